"""The fusion rules of convolutional networks on NHWC images (ppto/fusion/
cnn_patterns.py): each runs where its pattern is written, in the forward code (the
function itself, as ``show_source(fused=True)`` shows it) or in the gradient's code,
computes what the unfused code computes, and gradients through fused code agree with
central differences in float64."""

import io

import numpy as np
import pytest

import ppto
from ppto.api import Transformed
from ppto.fusion.kernels import ElementwiseKernel
from ppto.fusion.registry import RULES

CNN_RULES = {
    "conv2d_bias_nhwc",
    "conv2d_bias_relu_nhwc",
    "conv2d_bias_maximum_nhwc",
    "channel_sum_of_products",
    "batch_norm_variance_backward",
    "channel_mean_of_squares",
    "batch_norm_nhwc",
    "batch_norm_relu_nhwc",
    "batch_norm_maximum_nhwc",
    "global_pool_of_relu_sum",
    "global_pool_of_relu_op_sum",
    "batch_norm_add_relu_nhwc",
    "batch_norm_add_maximum_nhwc",
    "batch_norm_normalized_nhwc",
    "batch_norm_normalized_relu_nhwc",
    "batch_norm_normalized_maximum_nhwc",
    "batch_norm_normalized_add_relu_nhwc",
    "batch_norm_normalized_add_maximum_nhwc",
    # (ppto/fusion/batch_norm_outputs.py: batch norm's values in gradient code)
    "batch_norm_outputs_nhwc",
    "batch_norm_relu_outputs_nhwc",
    "batch_norm_maximum_outputs_nhwc",
    "batch_norm_add_relu_outputs_nhwc",
    "batch_norm_add_maximum_outputs_nhwc",
    "batch_norm_normalized_outputs_nhwc",
    "batch_norm_normalized_relu_outputs_nhwc",
    "batch_norm_normalized_maximum_outputs_nhwc",
    "batch_norm_normalized_add_relu_outputs_nhwc",
    "batch_norm_normalized_add_maximum_outputs_nhwc",
    # (ppto/fusion/batch_norm_backward.py: batch norm's gradient)
    "batch_norm_backward_nhwc",
    "batch_norm_backward_added_nhwc",
    "batch_norm_backward_centred_added_nhwc",
    "batch_norm_backward_masked_added_nhwc",
}


def conv_bias_relu(x, w, b):
    h = np.maximum(ppto.conv2d(x, w, 1, 1, layout="nhwc") + b, 0.0)
    return np.sum(h * h)


def strided_conv_bias_relu(x, w, b):
    h = ppto.relu(ppto.conv2d(x, w, stride=2, layout="nhwc") + b)
    return np.sum(np.tanh(h))


def batch_norm_centred_once(x, g, b):
    # (x - m) is one name read twice: the pattern's shared value, matched at both
    centred = x - np.mean(x, axis=(0, 1, 2))
    y = g * centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-3) + b
    return np.sum(np.tanh(y) * x)


def batch_norm_relu(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    return np.sum(np.tanh(ppto.relu(g * (x - m) / np.sqrt(v + 1e-5) + b)) * x)


def batch_norm(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * x)


def block_output(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b + skip, 0.0)
    return np.sum(np.tanh(y) * skip)


def block_output_relu(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = ppto.relu(g * (x - m) / np.sqrt(v + 1e-5) + b + skip)
    return np.sum(np.tanh(y) * skip)


def normalized(x, g, b):
    # normalized first, then scaled: in forward code a one-value rule, not the
    # multi-output one (its other four values would be arrays no one reads)
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    return np.sum(np.tanh(g * ((x - m) / np.sqrt(v + 1e-5)) + b) * x)


def normalized_relu(x, g, b):
    centred = x - np.mean(x, axis=(0, 1, 2))
    normal = centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.tanh(ppto.relu(g * normal + b)) * x)


def normalized_maximum(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    normal = (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.tanh(np.maximum(g * normal + b, 0.0)) * x)


def normalized_block_output(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    normal = (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.tanh(np.maximum(g * normal + b + skip, 0.0)) * skip)


def normalized_block_output_relu(x, g, b, skip):
    m = np.mean(x, axis=(0, 1, 2))
    normal = (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=(0, 1, 2)) + 1e-5)
    return np.sum(np.tanh(ppto.relu(g * normal + b + skip)) * skip)


def residual_pool(a, b, W):
    pooled = np.mean(np.maximum(a + b, 0.0), axis=(1, 2))
    return np.sum(np.tanh(pooled @ W))


def residual_pool_relu(a, b, W):
    pooled = np.mean(ppto.relu(a + b), axis=(1, 2))
    return np.sum(np.tanh(pooled @ W))


def whole_block(x, w1, g1, b1, w2, g2, b2):
    """A ResNet basic block's body, bias-free convolutions then batch norm."""
    h = ppto.conv2d(x, w1, 1, 1, layout="nhwc")
    m = np.mean(h, axis=(0, 1, 2))
    v = np.mean((h - m) ** 2, axis=(0, 1, 2))
    h = np.maximum(g1 * (h - m) / np.sqrt(v + 1e-5) + b1, 0.0)
    h = ppto.conv2d(h, w2, 1, 1, layout="nhwc")
    m = np.mean(h, axis=(0, 1, 2))
    v = np.mean((h - m) ** 2, axis=(0, 1, 2))
    h = g2 * (h - m) / np.sqrt(v + 1e-5) + b2
    return np.sum(np.mean(np.maximum(h + x, 0.0), axis=(1, 2)) ** 2)


def _arguments(function, dtype="float64"):
    rng = np.random.default_rng(3)
    image = (2, 6, 5, 4)
    kernel = rng.standard_normal((4, 4, 3, 3)) * 0.3
    channel = rng.uniform(0.5, 1.5, 4)
    table = {
        conv_bias_relu: [rng.standard_normal(image), kernel, channel - 1],
        strided_conv_bias_relu: [rng.standard_normal(image), kernel, channel - 1],
        batch_norm: [rng.standard_normal(image), channel, channel - 1],
        batch_norm_relu: [rng.standard_normal(image), channel, channel - 1],
        batch_norm_centred_once: [rng.standard_normal(image), channel, channel - 1],
        block_output: [rng.standard_normal(image), channel, channel - 1,
                       rng.standard_normal(image)],
        block_output_relu: [rng.standard_normal(image), channel, channel - 1,
                            rng.standard_normal(image)],
        normalized: [rng.standard_normal(image), channel, channel - 1],
        normalized_relu: [rng.standard_normal(image), channel, channel - 1],
        normalized_maximum: [rng.standard_normal(image), channel, channel - 1],
        normalized_block_output: [rng.standard_normal(image), channel, channel - 1,
                                  rng.standard_normal(image)],
        normalized_block_output_relu: [rng.standard_normal(image), channel,
                                       channel - 1, rng.standard_normal(image)],
        residual_pool: [rng.standard_normal(image), rng.standard_normal(image),
                        rng.standard_normal((4, 3))],
        residual_pool_relu: [rng.standard_normal(image), rng.standard_normal(image),
                             rng.standard_normal((4, 3))],
        whole_block: [rng.standard_normal(image), kernel, channel, channel - 1,
                      kernel[::-1].copy(), channel[::-1].copy(), channel - 0.5],
    }  # fmt: skip
    return [a.astype(dtype) for a in table[function]]


BACKWARD = {"channel_sum_of_products", "batch_norm_variance_backward"}
# batch norm's whole gradient, where it is scaled as gamma * centred / deviation
GRADIENT = {"batch_norm_backward_nhwc"}
# and added to the input's gradient, where the input is read elsewhere too
ADDED = {"batch_norm_backward_added_nhwc"}
# and its ReLU's mask folded in, where nothing else reads the masked gradient
MASKED_ADDED = {"batch_norm_backward_masked_added_nhwc"}
# (function, rules its forward code runs, rules its gradient code runs without regions:
# batch norm's values the backward pass reads by one multi-output rule)
CASES = [
    (conv_bias_relu, {"conv2d_bias_maximum_nhwc"}, {"conv2d_bias_nhwc"}),
    (strided_conv_bias_relu, {"conv2d_bias_relu_nhwc"}, {"conv2d_bias_nhwc"}),
    (batch_norm, {"batch_norm_nhwc"}, {"batch_norm_outputs_nhwc", *ADDED}),
    # (its gradient written around the name centred: the rule of that order)
    (batch_norm_centred_once, {"batch_norm_nhwc"},
     {"batch_norm_outputs_nhwc", "batch_norm_backward_centred_added_nhwc"}),
    (batch_norm_relu, {"batch_norm_relu_nhwc"},
     {"batch_norm_relu_outputs_nhwc", *MASKED_ADDED}),
    (residual_pool, {"global_pool_of_relu_sum"}, set()),
    (block_output, {"batch_norm_add_maximum_nhwc"},
     {"batch_norm_add_maximum_outputs_nhwc", *GRADIENT}),
    (block_output_relu, {"batch_norm_add_relu_nhwc"},
     {"batch_norm_add_relu_outputs_nhwc", *GRADIENT}),
    (residual_pool_relu, {"global_pool_of_relu_op_sum"}, set()),
    (normalized, {"batch_norm_normalized_nhwc"},
     {"batch_norm_normalized_outputs_nhwc", *BACKWARD}),
    (normalized_relu, {"batch_norm_normalized_relu_nhwc"},
     {"batch_norm_normalized_relu_outputs_nhwc", *BACKWARD}),
    (normalized_maximum, {"batch_norm_normalized_maximum_nhwc"},
     {"batch_norm_normalized_maximum_outputs_nhwc", *BACKWARD}),
    (normalized_block_output, {"batch_norm_normalized_add_maximum_nhwc"},
     {"batch_norm_normalized_add_maximum_outputs_nhwc", *BACKWARD}),
    (normalized_block_output_relu, {"batch_norm_normalized_add_relu_nhwc"},
     {"batch_norm_normalized_add_relu_outputs_nhwc", *BACKWARD}),
    (whole_block, {"batch_norm_maximum_nhwc", "batch_norm_nhwc",
                   "global_pool_of_relu_sum"},
     {"batch_norm_maximum_outputs_nhwc", "batch_norm_add_maximum_outputs_nhwc",
      *GRADIENT}),
]  # fmt: skip
IDS = [case[0].__name__ for case in CASES]


@pytest.fixture
def counted(monkeypatch):
    """Calls of each rule's implementation (fusion uses ``rule.implementation``), in
    fresh transforms, and fusion for arrays of any size."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lower
    import ppto.transform.regions as regions
    from ppto.api import _SHARED

    for module in (kernels, fuse, lower, regions):
        monkeypatch.setattr(module, "LARGE", 1)
    monkeypatch.setenv("PPTO_FUSION", "on")
    calls: dict = {}
    for rule in RULES:
        if rule.name in CNN_RULES and rule.kind != "elementwise":
            monkeypatch.setattr(rule, "implementation", _counting(rule, calls))
    # (an elementwise rule's kernel is generated, named after the rule: a rule with
    # an implementation of its own would be a user's, fused another way)
    original = ElementwiseKernel.__call__

    def counted_kernel(self, *arrays):
        name = self.name.removeprefix("__fused_")
        if name in CNN_RULES:
            calls[name] = calls.get(name, 0) + 1
        return original(self, *arrays)

    monkeypatch.setattr(ElementwiseKernel, "__call__", counted_kernel)
    _SHARED.clear()
    yield calls
    _SHARED.clear()


def _counting(rule, calls):
    implementation = rule.implementation

    def run(*arguments):
        calls[rule.name] = calls.get(rule.name, 0) + 1
        return implementation(*arguments)

    return run


def without_regions(monkeypatch):
    """Fusion by rules alone, so that each rule's own implementation runs where a
    region's pass would otherwise compute its statements."""
    import ppto.transform.fuse as fuse

    monkeypatch.setattr(
        fuse, "fuse_regions", lambda definition, *a, **k: (definition, [])
    )


def forward(function, args, fused: bool):
    """The function's own generated code (no gradient), fused or not."""
    transformed = Transformed(function, (), "primal", with_value=True)
    _, values, ranks, _, device = transformed.prepare(args, {})
    return transformed.lowered(ranks, device, fused)[function.__name__](*values)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function, forward_rules, _", CASES, ids=IDS)
def test_forward_code_runs_the_rules_and_equals_the_unfused_code(
    function, forward_rules, _, dtype, counted
):
    args = _arguments(function, dtype)
    fused = np.asarray(forward(function, args, fused=True))
    assert set(counted) == forward_rules
    unfused = np.asarray(forward(function, args, fused=False))
    assert fused.dtype == unfused.dtype == np.dtype(dtype)
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(fused, unfused, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(unfused, function(*args), rtol=tolerance)


def test_the_forward_block_is_its_convolutions_and_three_kernels():
    args = _arguments(whole_block)
    text = ppto.show_source(whole_block, *args, fused=True, file=io.StringIO())
    before, after = [int(word) for word in text.splitlines()[0].split() if
                     word.isdigit()]  # fmt: skip
    # two convolutions, a batch norm with its ReLU, a batch norm, the pooled ReLU
    # of the residual sum; then the loss's square and sum
    for kernel in ("batch_norm_maximum_nhwc", "batch_norm_nhwc",
                   "global_pool_of_relu_sum"):  # fmt: skip
        assert text.count(f"__fused_{kernel}(") == 1
    assert (before, after) == (28, 7)


def unfused_value_and_grad(function, args):
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        return ppto.value_and_grad(function, wrt=tuple(range(len(args))))(*args)
    finally:
        ppto.set_precision(previous)


def directional_errors(function, args, grads, directions=3, step=1e-6):
    """Relative differences between each gradient's directional derivative and
    central differences of the (unfused) function along seeded random directions."""
    rng = np.random.default_rng(0)
    errors = []
    for position, gradient in enumerate(grads):
        for _ in range(directions):
            direction = rng.standard_normal(np.shape(args[position]))
            moved = [list(args), list(args)]
            moved[0][position] = args[position] + step * direction
            moved[1][position] = args[position] - step * direction
            plus, minus = (float(function(*m)) for m in moved)
            numeric = (plus - minus) / (2 * step)
            analytic = float(np.sum(np.asarray(gradient) * direction))
            errors.append(abs(numeric - analytic) / max(1.0, abs(numeric)))
    return errors


@pytest.mark.parametrize("regions", [True, False], ids=["regions", "rules"])
@pytest.mark.parametrize("function, _, gradient_rules", CASES, ids=IDS)
def test_gradients_through_fused_code_equal_unfused_ones_and_finite_differences(
    function, _, gradient_rules, regions, counted, monkeypatch
):
    if not regions:
        without_regions(monkeypatch)
    args = _arguments(function)
    wrt = tuple(range(len(args)))
    value, grads = ppto.value_and_grad(function, wrt=wrt)(*args)
    if not regions:
        assert set(counted) == gradient_rules
    plain_value, plain_grads = unfused_value_and_grad(function, args)
    np.testing.assert_allclose(float(value), float(plain_value), rtol=1e-12)
    for fused, unfused in zip(grads, plain_grads):
        assert fused.shape == unfused.shape and fused.dtype == unfused.dtype
        np.testing.assert_allclose(
            fused.numpy(), unfused.numpy(), rtol=1e-10, atol=1e-12
        )
    assert max(directional_errors(function, args, grads)) < 1e-6


def test_conv_epilogues_keep_numpys_types_for_other_operands(counted):
    """A float64 bias on a float32 convolution (NumPy: float64) and a bias that
    broadcasts to a larger shape are computed anew, not written over the product."""
    rule = next(r for r in RULES if r.name == "conv2d_bias_relu_nhwc")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 4, 3)).astype("float32")
    w = rng.standard_normal((6, 3, 3, 3)).astype("float32")
    for b in (rng.standard_normal(6), rng.standard_normal((3, 1, 1, 1, 6))):
        expected = np.asarray(rule.pattern(ppto.tensor(x), ppto.tensor(w),
                                           ppto.tensor(b), 1, 1))  # fmt: skip
        actual = rule.implementation(x, w, b, 1, 1)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-6)


def test_channel_sums_of_broadcast_operands_are_numpys():
    rule = next(r for r in RULES if r.name == "channel_sum_of_products")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 5, 4, 3)), rng.standard_normal(3)
    expected = np.asarray(rule.pattern(ppto.tensor(a), ppto.tensor(b)))
    np.testing.assert_allclose(rule.implementation(a, b), expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["conv2d_bias_nhwc", "conv2d_bias_relu_nhwc",
                                  "conv2d_bias_maximum_nhwc"])  # fmt: skip
def test_cuda_conv_epilogues_write_over_the_product(kernels_from_trees, name):
    """On CUDA (CuPy emulated by NumPy): conv2d's product, then the epilogue's one
    elementwise kernel written over it; the stride and padding are the call's."""
    from ppto.fusion.cuda import CudaMatmulEpilogue
    from ppto.transform.fuse import implementation_for

    rule = next(r for r in RULES if r.name == name)
    kernel = implementation_for(rule, "cuda")
    assert isinstance(kernel, CudaMatmulEpilogue) and kernel.rest == [2]
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(shape) for shape in [(2, 7, 6, 3), (5, 3, 3, 3),
                                                         (5,)])  # fmt: skip
    for stride, padding in ((1, 1), (2, 0)):
        tensors = [ppto.tensor(a) for a in (x, w, b)]
        expected = np.asarray(rule.pattern(*tensors, stride, padding))
        actual = kernel(x, w, b, stride, padding)
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)
    assert kernels_from_trees == [rule.kernel_name] * 2
    assert "cuBLAS's a0 = conv2d(x, w) (im2col)" in kernel.listing()


def test_the_pass_before_regions_is_made_only_where_a_rule_may_match():
    """It costs a function's fusion a third more time: code calling no convolution,
    batch norm or global pooling operators is not given it."""
    from ppto.transform.fuse import _first_rules_may_match

    def program_of(function, args):
        transformed = Transformed(function, (0,), "combined", with_value=True)
        _, _, ranks, _, _ = transformed.prepare(args, {})
        return transformed.program(ranks)[0]

    for function, expected in ((whole_block, True), (residual_pool, True),
                               (elementwise_only, False)):  # fmt: skip
        args = _arguments(function) if function is not elementwise_only else [
            np.ones((3, 4))]  # fmt: skip
        program = program_of(function, args)
        namespace = dict(program.refs.namespace)
        found = [_first_rules_may_match(f, namespace) for f in program.functions]
        assert any(found) is expected, function.__name__


def test_the_first_operator_a_rule_before_regions_calls_is_one_it_needs():
    """The check above first asks whether a function calls one operator of each
    rule (found in a few of its pattern's nodes) and reads the rule's full set
    only where it does: that operator must be one of the set, or the check would
    pass over a rule that matches."""
    from ppto.transform.fuse import (
        _NONE_CALLED,
        _first_called_by,
        _operators_called_by,
    )

    rules = [rule for rule in RULES if rule.before_regions]
    assert rules
    for rule in rules:
        first, needed = _first_called_by(rule), _operators_called_by(rule)
        assert first in needed if needed else first is _NONE_CALLED, rule.name


def elementwise_only(x):
    return np.sum(np.maximum(np.tanh(x) + x, 0.0))
