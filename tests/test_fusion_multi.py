"""Multi-output fusion rules: a pattern returning several values, matched over the
data flow of several statements, whose fused call binds each value to the name the
unfused code gave it (batch norm's training forward in gradient code, and a user's
``@ppto.fusion_rule``). Fused gradients equal unfused ones (float64 and float32) and
central differences (float64); statements read elsewhere are never fused away."""

import inspect
import io
import re

import numpy as np
import pytest

import ppto
from ppto.fusion import FusionError
from tests.test_fusion_cnn import unfused_value_and_grad
from tests.test_golden import central_differences

WRT = (0, 1, 2)


def batch_norm_shifted(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * x)


def batch_norm_maximum(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(y * y * x)


def batch_norm_relu(x, g, b):
    centred = x - np.mean(x, axis=(0, 1, 2))  # (one name read twice)
    v = np.mean(centred**2, axis=(0, 1, 2))
    y = ppto.relu(g * centred / np.sqrt(v + 1e-3) + b)
    return np.sum(np.sin(y) * x)


def residual_maximum(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b + skip, 0.0)
    return np.sum(np.mean(y, axis=(1, 2)) ** 2)


def residual_relu(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = ppto.relu(g * (x - m) / np.sqrt(v + 1e-5) + b + skip)
    return np.sum(y * skip)


def conv_batch_norm(x, w, g, b):
    h = ppto.conv2d(x, w, 1, 1, layout="nhwc")
    m = np.mean(h, axis=(0, 1, 2))
    v = np.mean((h - m) ** 2, axis=(0, 1, 2))
    h = np.maximum(g * (h - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(h * x)


def normalized_shifted(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    normal = (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.tanh(g * normal + b) * x)


def normalized_maximum(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    normal = (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.maximum(g * normal + b, 0.0) * x)


def normalized_residual_relu(x, g, b, skip):
    centred = x - np.mean(x, axis=(0, 1, 2))
    normal = centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(ppto.relu(g * normal + b + skip) * skip)


# function -> the multi-output rule its gradient code runs
CASES = {
    batch_norm_shifted: "batch_norm_outputs_nhwc",
    batch_norm_maximum: "batch_norm_maximum_outputs_nhwc",
    batch_norm_relu: "batch_norm_relu_outputs_nhwc",
    residual_maximum: "batch_norm_add_maximum_outputs_nhwc",
    residual_relu: "batch_norm_add_relu_outputs_nhwc",
    conv_batch_norm: "batch_norm_maximum_outputs_nhwc",
    normalized_shifted: "batch_norm_normalized_outputs_nhwc",
    normalized_maximum: "batch_norm_normalized_maximum_outputs_nhwc",
    normalized_residual_relu: "batch_norm_normalized_add_relu_outputs_nhwc",
}


def arguments(function, dtype="float64", seed=5):
    rng = np.random.default_rng(seed)
    image = (2, 5, 4, 3)
    x = rng.standard_normal(image)
    g, b = rng.uniform(0.5, 1.5, 3), rng.normal(0.0, 0.3, 3)
    if function is conv_batch_norm:
        args = [x, rng.standard_normal((3, 3, 3, 3)) * 0.3, g, b]
    elif "skip" in inspect.signature(function).parameters:
        args = [x, g, b, rng.standard_normal(image)]
    else:
        args = [x, g, b]
    return [a.astype(dtype) for a in args]


def fused_gradient_listing(function, args) -> str:
    wrt = tuple(range(len(args)))
    return ppto.show_grad(function, *args, wrt=wrt, fused=True, file=io.StringIO())


@pytest.fixture
def counted(monkeypatch):
    """Calls of each multi-output rule's implementation; fused code always (for
    arrays of any size: these are small), in fresh transforms."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lower
    import ppto.transform.regions as regions
    from ppto.api import _SHARED
    from ppto.fusion.registry import RULES

    for module in (kernels, fuse, lower, regions):
        monkeypatch.setattr(module, "LARGE", 1)
    monkeypatch.setenv("PPTO_FUSION", "on")
    calls: dict = {}
    for rule in RULES:
        if rule.outputs:
            implementation = rule.implementation

            def run(*arguments, rule=rule, implementation=implementation):
                calls[rule.name] = calls.get(rule.name, 0) + 1
                return implementation(*arguments)

            monkeypatch.setattr(rule, "implementation", run)
    _SHARED.clear()
    yield calls
    _SHARED.clear()


# --- the rewrite ---------------------------------------------------------------------


@pytest.mark.parametrize("function", list(CASES), ids=lambda f: f.__name__)
def test_each_value_is_bound_to_the_name_the_backward_pass_reads(function):
    args = arguments(function)
    text = fused_gradient_listing(function, args)
    rule = CASES[function]
    call = re.search(rf"^    ([\w, ]+) = __fused_{rule}\((.*)\)$", text, re.M)
    assert call, text
    names = call.group(1).split(", ")
    found = next(r for r in ppto.fusion_rules() if r.name == rule)
    assert len(names) == len(found.outputs) >= 4
    after = text[call.end() :]
    # centred, deviation and scaled value: the backward pass reads each of them
    for name in names[:3]:
        assert re.search(rf"\b{name}\b", after), (name, text)
    # the statements the call replaced are gone: the statistics are the kernel's
    forward = text.split("# grad of")[0]
    assert not re.search(r"reduce_mean\(\w+, axis=\(0, 1, 2\)\)", forward), text
    unfused = ppto.show_grad(function, *args, wrt=tuple(range(len(args))),
                             file=io.StringIO())  # fmt: skip
    for name in names:  # the names the unfused code assigns, each once
        assert len(re.findall(rf"^    {name} = ", unfused, re.M)) == 1, name


def test_the_resnet_gradient_loses_its_batch_norm_statements():
    from examples.resnet_block import PARAMETERS, block_loss, make_arguments

    args = make_arguments()
    wrt = tuple(range(len(PARAMETERS)))
    text = ppto.show_grad(block_loss, *args, wrt=wrt, fused=True, file=io.StringIO())
    before, after = map(
        int, re.match(r"# operators: (\d+) before .*, (\d+)", text).groups()
    )
    assert before == 112 and after <= 70  # (83 with one-value rules alone)
    assert "= __fused_batch_norm_maximum_outputs_nhwc(h, g1, b1, 1e-05)" in text
    assert (
        "= __fused_batch_norm_add_maximum_outputs_nhwc(h_2, g2, b2, 1e-05, x)" in text
    )


# --- values and gradients ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", list(CASES), ids=lambda f: f.__name__)
def test_fused_gradients_equal_unfused_ones_and_central_differences(
    function, dtype, counted
):
    args = arguments(function, dtype)
    value, grads = ppto.value_and_grad(function, wrt=tuple(range(len(args))))(*args)
    # the fused kernel ran, once (and batch norm's backward kernel, once, where
    # its gradient is written as the rule's pattern: test_fusion_batch_norm_grad)
    assert counted[CASES[function]] == 1 and set(counted.values()) == {1}
    assert_like_unfused_and_differences(function, args, value, grads, dtype)


@pytest.mark.parametrize("normalized", [False, True])
def test_the_kernel_computes_each_value_as_the_unfused_code_does(
    normalized, monkeypatch
):
    # (the values themselves, beyond the gradients that read them)
    import ppto.fusion.batch_norm_outputs as module

    rng = np.random.default_rng(0)
    x, skip = rng.standard_normal((2, 2, 70, 8, 5))  # (rows in several chunks)
    g, b = rng.uniform(0.5, 1.5, 5), rng.standard_normal(5)
    plain = module._plain(x, g, b, 1e-5, skip, True, normalized)
    for chunk_bytes in (module.CHUNK_BYTES, 5 * 8 * 7):  # one chunk; 7 rows a chunk
        monkeypatch.setattr(module, "CHUNK_BYTES", chunk_bytes)
        fused = module._outputs(x, g, b, 1e-5, skip, True, normalized)
        assert len(fused) == len(plain) == 5
        for value, wanted in zip(fused, plain):
            assert value.shape == wanted.shape and value.dtype == wanted.dtype
            np.testing.assert_allclose(value, wanted, rtol=1e-13, atol=1e-13)
        # every value its own array: the backward pass reads them all
        assert not any(
            np.shares_memory(a, c) for i, a in enumerate(fused) for c in fused[i + 1 :]
        )
    # an image of another dtype than its scale and shift: the pattern's types
    name = (
        "batch_norm_normalized_outputs_nhwc"
        if normalized
        else "batch_norm_outputs_nhwc"
    )
    rule = next(r for r in ppto.fusion_rules() if r.name == name)
    image, g32, b32 = x.astype("float32"), g.astype("float32"), b.astype("float32")
    for args in ([image, g, b, 1e-5], [image, g32, b32, np.float64(1e-5)]):
        mixed = module._outputs(*args, normalized=normalized)
        expected = rule.pattern(*[ppto.tensor(a) for a in args[:3]], args[3])
        assert [v.dtype for v in mixed] == [np.asarray(v).dtype for v in expected]
        assert {v.dtype for v in mixed} == {np.dtype("float32"), np.dtype("float64")}
        for value, wanted in zip(mixed, expected):
            np.testing.assert_allclose(value, np.asarray(wanted), rtol=1e-5)


# --- never fused away --------------------------------------------------------------


def centred_read_in_between(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    c = x - m
    peak = np.max(c, axis=(0, 1, 2))  # (a value read before batch norm's output)
    v = np.mean(c**2, axis=(0, 1, 2))
    y = g * c / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * x) + np.sum(peak * g)


def variance_read_elsewhere(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * x) + np.sum(v * b)


def in_a_loop(x, g, b):
    # (the loop's tape keeps the values as they are computed: they are read there)
    for _ in range(2):
        m = np.mean(x, axis=(0, 1, 2))
        v = np.mean((x - m) ** 2, axis=(0, 1, 2))
        x = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(x * x)


def test_a_value_read_before_the_last_statement_moves_the_call_earlier():
    # (the call runs where its arguments are ready, before the maximum reads c)
    args = arguments(batch_norm_shifted)
    text = fused_gradient_listing(centred_read_in_between, args)
    body = text.split("def centred_read_in_between_grad(x, g, b):\n")[1]
    first, second = body.splitlines()[:2]
    assert first == "    c, t4, t5, y = __fused_batch_norm_outputs_nhwc(x, g, b, 1e-05)"
    assert second == "    peak = reduce_max(c, axis=(0, 1, 2))"
    _, grads = ppto.value_and_grad(centred_read_in_between, wrt=WRT)(*args)
    for position, gradient in enumerate(grads):
        expected = central_differences(centred_read_in_between, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("function", [variance_read_elsewhere, in_a_loop])
def test_values_read_by_other_statements_are_not_fused_away(function):
    args = arguments(batch_norm_shifted)
    text = fused_gradient_listing(function, args)
    assert "_outputs_nhwc(" not in text
    _, grads = ppto.value_and_grad(function, wrt=WRT)(*args)
    for position, gradient in enumerate(grads):
        expected = central_differences(function, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-7)


# --- a user's multi-output rule ------------------------------------------------------


@pytest.fixture
def own_rules():
    """The rules a test registers are removed after it."""
    from ppto.api import _SHARED
    from ppto.fusion import registry
    from ppto.ops.primitive import note_registration

    before = list(registry.RULES)
    _SHARED.clear()
    yield
    registry.RULES[:] = before
    registry._BY_ROOT.clear()
    note_registration()
    _SHARED.clear()


def affine_and_relu(x, W, b):
    """A pattern of two values: the affine map (read by ReLU's gradient), its ReLU."""
    z = ppto.dot(x, W) + b
    return z, ppto.maximum(z, 0.0)


def layer(x, W, b, V):
    h = np.maximum(x @ W + b, 0.0)
    return np.sum(np.tanh(h @ V))


SHAPES = [(4, 3), (3, 5), (5,)]


def test_a_users_multi_output_rule_runs_in_gradient_code(own_rules, monkeypatch):
    monkeypatch.setenv("PPTO_FUSION", "on")
    calls = []

    @ppto.fusion_rule(affine_and_relu, name="affine_relu_values", shapes=SHAPES)
    def fused(x, W, b):
        calls.append(x.shape)
        z = x @ W
        z += b
        return z, np.maximum(z, 0.0)

    assert fused.outputs and fused.kind == "multi-output"
    assert "affine_relu_values" in [rule.name for rule in ppto.fusion_rules()]
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s) for s in [(6, 3), (3, 5), (5,), (5, 2)]]
    wrt = (0, 1, 2, 3)
    text = ppto.show_grad(layer, *args, wrt=wrt, fused=True, file=io.StringIO())
    assert re.search(
        r"^    \w+, h = __fused_affine_relu_values\(x, W, b\)$", text, re.M
    )
    _, grads = ppto.value_and_grad(layer, wrt=wrt)(*args)
    assert calls  # its implementation computed the values the gradient read
    for position, gradient in enumerate(grads):
        expected = central_differences(layer, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-8)


def grown_and_squashed(x, y):
    """Two values no built-in rule computes: ``exp(x) * y`` and its tanh."""
    z = ppto.exp(x) * y
    return z, ppto.tanh(z)


def squashed_alone(x, y):
    return np.sum(np.tanh(np.exp(x) * y))


def squashed_and_grown(x, y):
    z = np.exp(x) * y
    return np.sum(np.tanh(z) * z)


def test_a_multi_output_rule_whose_other_values_no_one_reads_is_not_run(
    own_rules, monkeypatch
):
    """Where nothing but the pattern reads ``exp(x) * y`` the rule would compute an
    array for nothing: the plain code runs (as in batch norm's forward code, where
    a one-value rule then matches); where another statement reads it, the rule."""
    from tests.test_fusion_cnn import forward

    monkeypatch.setenv("PPTO_FUSION", "on")
    calls = []

    @ppto.fusion_rule(
        grown_and_squashed, name="grown_and_squashed", shapes=[(4, 3)] * 2
    )
    def fused(x, y):
        calls.append(x.shape)
        z = np.exp(x)
        z *= y
        return z, np.tanh(z)

    rng = np.random.default_rng(3)
    args = [rng.standard_normal((6, 3)), rng.standard_normal((6, 3))]
    for function, runs in ((squashed_alone, False), (squashed_and_grown, True)):
        text = ppto.show_source(function, *args, fused=True, file=io.StringIO())
        assert ("= __fused_grown_and_squashed(x, y)" in text) == runs
        calls.clear()  # (the rule's check at registration ran it)
        value = forward(function, args, fused=True)
        assert bool(calls) == runs
        np.testing.assert_allclose(float(value), function(*args), rtol=1e-13)


def test_a_users_multi_output_rule_is_checked_value_by_value(own_rules):
    def one_value(x, W, b):
        return np.maximum(x @ W + b, 0.0)

    def wrong_first(x, W, b):
        z = x @ W + b
        return z * 1.01, np.maximum(z, 0.0)

    with pytest.raises(FusionError, match="returns one value .*a tuple of 2"):
        ppto.fusion_rule(affine_and_relu, name="one", shapes=SHAPES)(one_value)
    with pytest.raises(FusionError, match="implementation value 0 differs"):
        ppto.fusion_rule(affine_and_relu, name="wrong", shapes=SHAPES)(wrong_first)
    names = [rule.name for rule in ppto.fusion_rules()]
    assert "one" not in names and "wrong" not in names


def test_a_multi_output_pattern_returns_intermediates_of_its_last_value(own_rules):
    def unrelated(x, y):
        return x * y, ppto.tanh(x)

    def repeated(x, y):
        z = x * y
        return z, z

    with pytest.raises(FusionError, match="not an intermediate of its last value"):
        ppto.fusion_rule(unrelated, name="unrelated")(lambda x, y: (x * y, np.tanh(x)))
    with pytest.raises(FusionError, match="is not an intermediate|one value twice"):
        ppto.fusion_rule(repeated, name="repeated")(lambda x, y: (x * y, x * y))
    from ppto.fusion.registry import register

    with pytest.raises(FusionError, match="needs an implementation"):
        register(affine_and_relu, None, name="bare", shapes=SHAPES,
                 applies="forward", builtin=False)  # fmt: skip


# --- CUDA ---------------------------------------------------------------------------


def test_on_emulated_cupy_the_staged_values_run_and_gradients_hold(
    emulated_cupy, monkeypatch
):
    monkeypatch.setenv("PPTO_FUSION", "on")
    args = arguments(residual_relu)
    on_device = [ppto.tensor(a, device="cuda") for a in args]
    value, grads = ppto.value_and_grad(residual_relu, wrt=(0, 1, 2, 3))(*on_device)
    kernel = "__fused_batch_norm_add_relu_outputs_nhwc"
    assert [f"{kernel}_value{n}" for n in range(1, 6)] == [
        name for name in emulated_cupy if name.startswith(f"{kernel}_value")
    ]
    np.testing.assert_allclose(value.numpy(), residual_relu(*args), rtol=1e-12)
    for position, gradient in enumerate(grads):
        assert gradient.device == "cuda:0"
        expected = central_differences(residual_relu, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-7)


def assert_like_unfused_and_differences(function, args, value, grads, dtype):
    """The fused value and gradients equal the unfused ones (to the dtype's
    rounding), and in float64 central differences'."""
    plain_value, plain_grads = unfused_value_and_grad(function, args)
    tolerance = 1e-10 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(float(value), float(plain_value), rtol=tolerance)
    for fused, unfused in zip(grads, plain_grads):
        assert fused.shape == unfused.shape and fused.dtype == unfused.dtype
        np.testing.assert_allclose(
            fused.numpy(), unfused.numpy(), rtol=tolerance, atol=tolerance
        )
    if dtype == "float64":
        for position, gradient in enumerate(grads):
            expected = central_differences(function, args, position)
            np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-7)
