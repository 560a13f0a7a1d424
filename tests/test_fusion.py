"""Fusion: every built-in rule agrees with its pattern, user rules are checked on
registration, fused code is what runs and gives the same gradients as unfused code."""

import io
import linecache

import numpy as np
import pytest

import ppto
from ppto.fusion.kernels import (
    CHUNK_BYTES,
    LARGE,
    ElementwiseKernel,
    Node,
    evaluate_numpy,
    region_layout,
)
from tests.test_fusion_cnn import directional_errors
from tests.test_golden import central_differences

RULES = ppto.fusion_rules()


def test_there_are_more_than_fifty_rules_each_described():
    assert len(RULES) >= 50
    names = [rule.name for rule in RULES]
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert rule.applies in ("forward", "backward", "forward and backward")
        assert rule.kernel_name == f"__fused_{rule.name}"
        assert "(" in repr(rule.template)  # the pattern, as operators
    wanted = {"matmul_bias", "matmul_relu", "matmul_bias_relu", "matmul_bias_tanh",
              "matmul_bias_sigmoid", "matmul_bias_gelu", "sum_of_products",
              "mean_of_squares", "softmax_last_axis", "log_softmax_last_axis",
              "logsumexp_last_axis", "cross_entropy_from_logits", "layer_norm",
              "relu_backward", "tanh_backward", "sigmoid_backward",
              "softmax_backward_last_axis"}  # fmt: skip
    assert wanted <= set(names)


def _inputs(rule, rng, dtype):
    if rule.name.startswith("batch_norm_backward"):
        return _batch_norm_backward_inputs(rule, rng, dtype)
    if rule.name.startswith("label_cross_entropy"):
        return _label_cross_entropy_inputs(rule, rng, dtype)
    shapes = {
        "matmul_pair": [(5, 4), (4, 3), (5, 2), (2, 3), (3,)],  # (before "matmul")
        "matmul": [(5, 4), (4, 3), (3,)],
        # three axes: a rule along axis 1 must not reduce along the last one
        "softmax": [(3, 4, 7), (3, 4, 7)],
        "log_softmax": [(3, 4, 7), (3, 4, 7)],
        "logsumexp": [(3, 4, 7)],
        "cross": [(3, 7), (3, 7)],
        "layer": [(3, 7), ()],
        # NHWC images, OIHW weights, per-channel vectors (ppto/fusion/cnn_patterns)
        "conv2d": [(2, 6, 5, 3), (4, 3, 3, 3), (4,)],
        "batch_norm": [(2, 6, 5, 4), (4,), (4,), (), (2, 6, 5, 4)],
        "channel": [(2, 6, 5, 4)] * 2,
        "global_pool": [(2, 6, 5, 4)] * 2,
    }
    prefix = next((key for key in shapes if rule.name.startswith(key)), None)
    chosen = shapes[prefix] if prefix else [(6, 5)] * len(rule.parameters)
    if rule.name == "batch_norm_variance_backward":
        chosen = [(2, 6, 5, 4), (2, 6, 5, 4), (4,)]
    if rule.name == "matmul_add":
        chosen = [(5, 4), (4, 3), (5, 3)]
    if rule.name == "matmul_scale":
        chosen = [(5, 4), (4, 3), ()]
    chosen = chosen[: len(rule.parameters)]
    arrays = [rng.uniform(0.5, 1.5, shape).astype(dtype) for shape in chosen]
    # a convolution's stride and padding: Python ints, as generated code passes them
    return arrays + [{"stride": 2, "padding": 1}[name] for name in
                     rule.parameters[len(chosen):]]  # fmt: skip


def _batch_norm_backward_inputs(rule, rng, dtype) -> list:
    """Images, per-channel deviation and scale, a count and, for a masked rule, a
    ReLU's mask with both values (ppto/fusion/batch_norm_backward), by name."""
    image, channel = (2, 6, 5, 4), (4,)
    if rule.name.endswith("_nchw"):
        image, channel = (2, 4, 6, 5), (1, 4, 1, 1)  # (statistics' dims kept)
    shapes = {"deviation": channel, "gamma": channel, "count": ()}
    inputs = []
    for name in rule.parameters:
        if name == "condition":
            inputs.append(rng.standard_normal(image) >= 0.0)
        else:
            inputs.append(rng.uniform(0.5, 1.5, shapes.get(name, image)).astype(dtype))
    return inputs


def _label_cross_entropy_inputs(rule, rng, dtype) -> list:
    """A gather's gradient at (rows, labels) of a matrix, one row twice (or, for
    a reduced rule, the loss's number and the gather's shape), the
    log-probabilities, the axis, then exponentials and their sums or (the rules of
    ppto.log_softmax) the log-probabilities (ppto/fusion/label_cross_entropy)."""
    exps = rng.uniform(0.5, 1.5, (6, 5)).astype(dtype)
    total = exps.sum(axis=1, keepdims=True)
    index = (np.array([0, 3, 3, 5]), np.array([4, 0, 1, 0]))
    g = rng.uniform(-1.0, 1.0, 4).astype(dtype)
    if rule.parameters[0] == "loss":
        g = [g.dtype.type(-0.25), (4,)]
    else:
        g = [g]
    log_probs = np.log(exps / total)
    if rule.parameters[-1] == "log_probs":
        return [*g, index, log_probs, 1, log_probs]
    return [*g, index, log_probs, 1, total, exps]


def _as_tensors(inputs) -> list:
    return [ppto.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", RULES, ids=[rule.name for rule in RULES])
def test_builtin_rule_equals_its_pattern(rule, dtype):
    rng = np.random.default_rng(11)
    inputs = _inputs(rule, rng, dtype)
    expected = values_of(rule, rule.pattern(*_as_tensors(inputs)))
    actual = values_of(rule, rule.implementation(*inputs))
    assert len(actual) == len(expected)
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    for value, wanted in zip(actual, expected):
        assert value.shape == wanted.shape and value.dtype == wanted.dtype
        np.testing.assert_allclose(value, wanted, rtol=tolerance, atol=tolerance)


def values_of(rule, result) -> list:
    """A rule's value as arrays: one, or each of a multi-output rule's."""
    if rule.outputs:
        assert isinstance(result, tuple) and len(result) == len(rule.outputs)
        return [np.asarray(value) for value in result]
    return [np.asarray(result)]


def test_large_kernels_equal_small_ones():
    # (a + b) * tanh(a) - a / b: numexpr cannot do tanh, so the out= sequence runs
    a, b = Node(leaf=0), Node(leaf=1)
    product = Node("mul", [Node("add", [a, b]), Node("tanh", [a])])
    tree = Node("sub", [product, Node("div", [a, b])])
    arithmetic = Node(
        "add", [Node("mul", [Node(leaf=0), Node(leaf=1)]), Node(value=2.0)]
    )
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.5, 1.5, (2, LARGE + 3))
    for node in (tree, arithmetic):
        kernel = ElementwiseKernel("__fused_test", node, 2)
        np.testing.assert_allclose(kernel(x, y), kernel.small(x, y), rtol=1e-13)
    float32 = ElementwiseKernel("__fused_test32", arithmetic, 2)
    assert float32(x.astype("float32"), y.astype("float32")).dtype == np.float32


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_kernels_over_blocks_of_rows_equal_plain_numpy(threads, dtype, monkeypatch):
    """Rows are cut into blocks (one per thread); operands with the result's first
    axis are cut with them, broadcast ones are not; intermediates are written over one
    another and into the result. Every case equals the plain NumPy expression."""
    monkeypatch.setenv("PPTO_NUM_THREADS", threads)
    a, b, c = Node(leaf=0), Node(leaf=1), Node(leaf=2)
    trees = {
        # two computed operands at once: one lives in the result, one elsewhere
        "two computed": Node("mul", [Node("exp", [Node("sub", [a, b])]),
                                     Node("tanh", [Node("add", [a, c])])]),
        "comparison inside": Node("where", [Node("greater", [Node("sin", [a]), b]),
                                            Node("exp", [a]), Node("cos", [c])]),
        "python number": Node("log1p", [Node("mul", [Node("exp", [a]),
                                                     Node(value=2.0)])]),
    }  # fmt: skip
    import ppto.fusion.kernels as kernels

    blocks = []
    run_chunks = kernels.run_chunks

    def spy(work, count, min_chunks, threads=None):
        blocks.append(count)
        return run_chunks(work, count, min_chunks, threads)

    monkeypatch.setattr(kernels, "run_chunks", spy)
    rng = np.random.default_rng(3)
    rows = 3 * LARGE // 16 + 5
    x = rng.uniform(-1, 1, (rows, 16)).astype(dtype)
    operands = {  # b and c: cut with the rows, broadcast per row, per column, 0-d
        "rows": (rng.uniform(-1, 1, (rows, 16)), rng.uniform(-1, 1, (rows, 16))),
        "broadcast": (rng.uniform(-1, 1, (rows, 1)), rng.uniform(-1, 1, 16)),
        "0-d": (np.array(0.25), rng.uniform(-1, 1, (1, 16))),
    }
    for name, tree in trees.items():
        kernel = ElementwiseKernel(f"__fused_{name.replace(' ', '_')}", tree, 3)
        for y, z in operands.values():
            arguments = (x, y.astype(dtype), z.astype(dtype))
            actual = kernel(*arguments)
            expected = kernel.small(*arguments)
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            np.testing.assert_array_equal(actual, expected)
    assert set(blocks) == {1 if threads == "1" else 3}  # 3: one per LARGE elements


def test_kernels_time_both_ways_then_keep_the_faster_and_give_the_same_bits(
    monkeypatch,
):
    from ppto.fusion.kernels import TRIALS

    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    a, b = Node(leaf=0), Node(leaf=1)
    kernel = ElementwiseKernel(
        "__fused_trial", Node("exp", [Node("sub", [a, Node("tanh", [b])])]), 2
    )
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((2, LARGE // 8, 16))
    results = [kernel(x, y[:, :1]) for _ in range(2 * TRIALS + 3)]
    for result in results[1:]:
        assert result.tobytes() == results[0].tobytes()
    (plan,) = kernel.plans.values()
    (key,) = plan.chosen
    assert plan.chosen[key] in ("blocks", "numpy")
    # a first call of each way, untimed in the choice, then TRIALS timed ones
    assert all(len(seconds) == TRIALS + 1 for seconds in plan.trials[key].values())
    monkeypatch.setenv("PPTO_NUM_THREADS", "1")  # another thread count: tried anew
    kernel(x, y[:, :1])
    assert len(plan.trials) == 2 and len(plan.chosen) == 1


def test_arithmetic_kernels_time_numexpr_too_and_give_the_same_numbers(monkeypatch):
    """numexpr's threads meet at a barrier: right after a BLAS product (its threads
    spinning) ``dy * 2 * x`` took 13 ms by numexpr, 0.1 ms by NumPy. So numexpr is
    one of the timed ways, not taken untimed."""
    from ppto.fusion.kernels import TRIALS

    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    a, b = Node(leaf=0), Node(leaf=1)
    tree = Node("mul", [Node("mul", [a, Node(value=2.0)]), b])
    kernel = ElementwiseKernel("__fused_square_backward_trial", tree, 2)
    rng = np.random.default_rng(15)
    dy, x = rng.standard_normal((2, LARGE // 16, 32))
    expected = dy * 2 * x
    for _ in range(3 * (TRIALS + 1) + 2):
        np.testing.assert_allclose(kernel(dy, x), expected, rtol=1e-15, atol=0)
    (plan,) = kernel.plans.values()
    (key,) = plan.chosen
    assert set(plan.trials[key]) == {"numexpr", "blocks", "numpy"}
    assert all(len(seconds) == TRIALS + 1 for seconds in plan.trials[key].values())
    assert plan.chosen[key] in plan.trials[key]


def test_a_kernels_first_call_runs_in_blocks_writing_only_its_result(monkeypatch):
    """A first call is often a gradient's first call, cold: it runs the way that
    writes no array but its result and pays no first use of numexpr (compiling the
    expression, starting numexpr's threads); the other ways are tried after."""
    import tracemalloc

    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    a, b = Node(leaf=0), Node(leaf=1)
    tree = Node("add", [Node("mul", [a, Node(value=3.0)]), Node("mul", [b, b])])
    kernel = ElementwiseKernel("__fused_first_call_trial", tree, 2)
    x, y = np.random.default_rng(16).standard_normal((2, 4 * LARGE))
    tracemalloc.start()
    result = kernel(x, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    np.testing.assert_allclose(result, x * 3.0 + y * y, rtol=1e-15, atol=0)
    (plan,) = kernel.plans.values()
    (times,) = plan.trials.values()
    assert {way: len(seconds) for way, seconds in times.items()} == {
        "blocks": 1,
        "numexpr": 0,
        "numpy": 0,
    }
    # the result and a block-sized buffer per worker thread (both threads' buffers
    # live at once where they run together: 1.5x here), not a whole-array temporary
    # per operation (NumPy's x * 3.0 + y * y peaks at 3x, an out= sequence at 2x)
    assert peak < 2 * result.nbytes
    kernel(x, y)
    assert len(times["numexpr"]) == 1  # tried next


def test_the_fastest_threaded_way_is_kept_only_when_clearly_faster_than_numpy():
    from ppto.fusion.kernels import faster_way

    one = [9.0, 1.0, 1.0, 1.0]
    slow = [0.1, 13.0, 12.0, 14.0]  # numexpr after a BLAS product (see above)
    fast = [9.0, 0.5, 0.6, 0.5]
    assert faster_way({"numexpr": slow, "blocks": one, "numpy": one}) == "numpy"
    assert faster_way({"numexpr": slow, "blocks": fast, "numpy": one}) == "blocks"
    assert faster_way({"numexpr": fast, "blocks": slow, "numpy": one}) == "numexpr"
    assert faster_way({"numexpr": [0.1, 0.9, 0.9, 0.9], "blocks": one, "numpy": one}) \
        == "numpy"  # fmt: skip


def test_blocks_are_kept_only_when_clearly_faster():
    # what blocks write sits in several cores' caches and slows the next reader
    from ppto.fusion.kernels import faster_way

    # (each way's first call is left out: it pays for fresh memory)
    one = [9.0, 1.0, 1.0, 1.0]
    assert faster_way({"blocks": [9.0, 0.5, 0.6, 9.0], "numpy": one}) == "blocks"
    assert faster_way({"blocks": [0.1, 0.95, 0.9, 0.1], "numpy": one}) == "numpy"
    assert faster_way({"blocks": [0.1, 2.0, 2.0, 2.0], "numpy": one}) == "numpy"
    assert faster_way({"blocks": [0.1, 1.0, 1.0, 1.0], "numpy": [0.1] * 4}) == "numpy"


def test_kernels_over_blocks_take_array_subclasses_empty_rows_and_booleans(
    monkeypatch,
):
    """Found in review: an ndarray subclass (a memmap, a masked array) lost its
    rules in row blocks (it now runs as plain NumPy), a result of no rows divided by
    zero, and ``sin`` of a boolean (float16) was written into a boolean
    destination."""
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    a, b = Node(leaf=0), Node(leaf=1)
    transcendental = Node("mul", [Node("exp", [a]), Node("sin", [b])])
    boolean = Node("less_equal", [Node("sin", [Node("greater", [a, Node(value=0.0)])]),
                                  b])  # fmt: skip

    class Marked(np.ndarray):
        pass

    rng = np.random.default_rng(9)
    rows = 3 * LARGE // 16 + 5
    x, y = rng.uniform(-1, 1, (2, rows, 16))
    masked = np.ma.masked_less(x, 0.0)
    cases = [
        (transcendental, (x.view(Marked), y)),
        (transcendental, (masked, y)),  # the mask must survive
        (transcendental, (y, masked)),
        (transcendental, (np.ones((0, 1)), rng.uniform(-1, 1, 40000))),
        (boolean, (x, y)),
    ]
    for number, (tree, arguments) in enumerate(cases):
        kernel = ElementwiseKernel(f"__fused_review_{number}", tree, 2)
        actual, expected = kernel(*arguments), kernel.small(*arguments)
        assert type(actual) is type(expected)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual, expected)
        if isinstance(expected, np.ma.MaskedArray):
            np.testing.assert_array_equal(actual.mask, expected.mask)


SHADOWING = ["number", "chunks", "claim", "part", "count", "sum", "iter", "min",
             "run_chunks", "found"]  # fmt: skip


@pytest.mark.parametrize("name", SHADOWING)
def test_region_inputs_may_have_any_name(name):
    """The generated pass names its inputs a0, a1, ...: a parameter named like one of
    its locals or a builtin it calls gave wrong gradients or errors (review)."""
    namespace = {"np": np}
    source = (
        f"def shadowing(x, y, {name}):\n"
        f"    return np.sum(np.tanh(x * y + {name}) * np.exp(-x))\n"
    )
    filename = f"<region names {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    function = namespace["shadowing"]
    rng = np.random.default_rng(10)
    args = [rng.standard_normal(3 * LARGE), rng.standard_normal(3 * LARGE), 0.5]
    gradient = ppto.value_and_grad(function, wrt=(0, 1))
    calls = fallback_calls(gradient, args)
    fused = gradient(*args)
    assert calls == []
    assert_same_results(fused, unfused_value_and_grad(function, (0, 1), args), 1e-12)


def test_a_wrong_user_rule_is_refused():
    def pattern(x, y):
        return ppto.exp(x) * y

    with pytest.raises(ppto.FusionError, match="exp_times_wrong refused"):

        @ppto.fusion_rule(pattern, name="exp_times_wrong")
        def wrong(x, y):
            return np.exp(x) + y

    assert "exp_times_wrong" not in [rule.name for rule in ppto.fusion_rules()]


def test_a_user_rule_is_checked_against_the_active_tolerance(own_rules):
    """Fusion never changes results beyond the active tolerance (SPEC): a rule off
    by 1e-4 of its pattern is refused at the default rtol of 1e-5, accepted once the
    tolerance allows it (the check was a fixed 1e-7)."""

    def pattern(x, y):
        return ppto.exp(x) * y

    def close(x, y):
        return np.exp(x) * y * (1.0 + 1e-4)

    with pytest.raises(ppto.FusionError, match="more than the tolerance 1e-05"):
        ppto.fusion_rule(pattern, name="exp_times_close")(close)
    previous = ppto.set_tolerance(rtol=1e-3)
    try:
        ppto.fusion_rule(pattern, name="exp_times_close")(close)
        assert "exp_times_close" in [rule.name for rule in ppto.fusion_rules()]
    finally:
        ppto.set_tolerance(*previous)


def test_a_user_rule_writing_into_its_argument_is_refused(own_rules):
    """An implementation computing the pattern's value in its argument's memory
    (``x += x * y``) gave the right value when checked, then changed the caller's
    array in generated code (found by fuzzing fused against unfused code)."""

    def pattern(x, y):
        return x * y + x

    with pytest.raises(ppto.FusionError, match="changes its argument x in place"):

        @ppto.fusion_rule(pattern, name="gate_in_place")
        def gate(x, y):
            x += x * y
            return x

    assert "gate_in_place" not in [rule.name for rule in ppto.fusion_rules()]


def test_a_rule_decorator_written_bare_says_how_to_write_it():
    """``@ppto.fusion_rule`` alone made the function the decorator ``fusion_rule``
    returns, registering nothing and saying nothing."""

    @ppto.fusion_rule
    def relu_of(x):
        return np.maximum(x, 0.0)

    with pytest.raises(ppto.PptoError, match=r"write @ppto.fusion_rule\(pattern\)"):
        relu_of(np.ones(3))


def scaled_softsign(x, y):
    return np.sum(x / (1.0 + np.abs(x)) * y)


@pytest.fixture
def own_rules():
    """The rules a test registers are removed after it (they would run in later
    tests' code that has their patterns)."""
    from ppto.fusion import registry
    from ppto.ops.primitive import note_registration

    before = list(registry.RULES)
    yield
    registry.RULES[:] = before
    registry._BY_ROOT.clear()
    note_registration()


def test_a_user_rule_is_used_by_generated_code_and_keeps_gradients_right(own_rules):
    def pattern(x):
        return x / (1.0 + ppto.abs(x))

    @ppto.fusion_rule(pattern, name="softsign")
    def softsign(x):
        return x / (1.0 + np.abs(x))

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(8), rng.standard_normal(8)
    shown = ppto.show_source(scaled_softsign, x, y, fused=True, file=io.StringIO())
    assert "__fused_softsign(x)" in shown
    gradient = np.asarray(ppto.grad(scaled_softsign, wrt=1)(x, y))
    np.testing.assert_allclose(gradient, x / (1 + np.abs(x)), rtol=1e-13)


def test_a_user_rule_beyond_a_tolerance_set_tighter_since_is_not_used(own_rules):
    """A rule accepted under a loose tolerance stayed in use once the tolerance
    was set tighter: fused code differed from the pattern by 1e-4 at rtol 1e-5
    (ppto.allclose said False of it), and code fused before the change was kept."""

    def pattern(x):
        return x / (1.0 + ppto.abs(x))

    def loose(x):
        return x / (1.0 + np.abs(x)) * (1.0 + 1e-4)

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(8), rng.standard_normal(8)
    gradient = ppto.grad(scaled_softsign, wrt=1)
    previous = ppto.set_tolerance(rtol=1e-3)
    try:
        ppto.fusion_rule(pattern, name="softsign_loose")(loose)
        shown = ppto.show_source(scaled_softsign, x, y, fused=True, file=io.StringIO())
        assert "__fused_softsign_loose(x)" in shown
        gradient(x, y)
    finally:
        ppto.set_tolerance(*previous)
    shown = ppto.show_source(scaled_softsign, x, y, fused=True, file=io.StringIO())
    assert "softsign_loose" not in shown
    np.testing.assert_allclose(np.asarray(gradient(x, y)), x / (1 + np.abs(x)), 1e-13)


def padded_and_scaled(x, y):
    return np.sum(np.pad(x, 1) * 2.0 * y)


def test_a_user_rule_may_match_a_numpy_ordered_operator(own_rules):
    # a pattern with ppto.pad (a wrapper taking NumPy's order) matched nothing
    def pattern(x):
        return ppto.pad(x, 1) * 2.0

    @ppto.fusion_rule(pattern, name="padded_twice")
    def padded_twice(x):
        return np.pad(x, 1) * 2.0

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(6), rng.standard_normal(8)
    shown = ppto.show_source(padded_and_scaled, x, y, fused=True, file=io.StringIO())
    assert "__fused_padded_twice(x)" in shown
    gradient = np.asarray(ppto.grad(padded_and_scaled, wrt=1)(x, y))
    np.testing.assert_allclose(gradient, np.pad(x, 1) * 2.0, rtol=1e-13)


def scaled_product_shifted(x, W):
    return np.sum(((x @ W) * 3.0 + 1.0) @ x)


def shifted_product(A, B):
    return ppto.dot(A, B) * 3.0 + 1.0


class ShiftedProduct:  # a callable object: no __name__ of its own
    def __call__(self, A, B):
        return (A @ B) * 3.0 + 1.0


@pytest.mark.parametrize("name, implementation", [
    (None, lambda A, B: (A @ B) * 3.0 + 1.0),  # named <lambda>
    ("shifted product", ShiftedProduct()),  # called by its kernel name
    (None, ShiftedProduct()),
])  # fmt: skip
def test_user_rules_of_any_name_and_callable_run(name, implementation, own_rules):
    # a lambda's code called <lambda>_raw and a rule named "shifted product"
    # __fused_shifted product: generated code that did not compile
    ppto.fusion_rule(shifted_product, name=name, shapes=[(4, 3), (3, 5)])(
        implementation
    )
    rng = np.random.default_rng(4)
    x, W = 0.1 * rng.standard_normal((300, 200)), 0.1 * rng.standard_normal((200, 300))
    before, after = ppto.grad(scaled_product_shifted).operator_counts(x, W)
    assert after < before
    assert_same_results(
        ppto.value_and_grad(scaled_product_shifted, wrt=(0, 1))(x, W),
        unfused_value_and_grad(scaled_product_shifted, (0, 1), [x, W]),
        1e-12,
    )


def summed_products(x, y):
    return np.sum(x * y)


def test_a_user_rule_for_a_built_in_pattern_is_the_one_used(own_rules):
    """A user's rule whose pattern is a built-in rule's (the sum of products) was
    never called: the built-in rule, listed first, matched first. The latest
    rule is used, as for elementwise patterns (found by fuzzing fused code)."""
    calls = []

    def pattern(x, y):
        return ppto.reduce_sum(x * y)

    @ppto.fusion_rule(pattern, name="my_sum_of_products", shapes=[(4, 4), (4, 4)])
    def sum_of_products(x, y):
        calls.append(np.shape(x))
        return np.sum(np.multiply(x, y))

    calls.clear()  # (registration checked it against the pattern)
    x, y = np.random.default_rng(15).standard_normal((2, LARGE + 3))
    shown = ppto.show_source(summed_products, x, y, fused=True, file=io.StringIO())
    assert "__fused_my_sum_of_products(x, y)" in shown
    value, _ = ppto.vjp(summed_products, x, y)
    assert calls == [(LARGE + 3,)]
    np.testing.assert_allclose(float(value), np.dot(x, y), rtol=1e-12)


def test_rule_names_sharing_a_kernel_name_are_refused(own_rules):
    ppto.fusion_rule(shifted_product, name="shifted product")(ShiftedProduct())
    with pytest.raises(ppto.PptoError, match="would share the kernel name"):
        ppto.fusion_rule(shifted_product, name="shifted_product")(ShiftedProduct())


def uses_a_lambda(x):
    k = add_one(3)
    return np.sum(x * k)


add_one = lambda n: n + 1  # noqa: E731 (a function named <lambda>)


def test_code_calling_a_lambda_compiles():
    gradient = ppto.grad(uses_a_lambda)(np.ones(3))
    np.testing.assert_array_equal(np.asarray(gradient), np.full(3, 4.0))


def gate_squared(x, y):
    g = x * y + x
    return np.sum(g * g)


@pytest.mark.parametrize("size", [8, LARGE + 3])
def test_a_user_elementwise_rule_runs_its_own_implementation(size, own_rules):
    def pattern(x, y):
        return x * y + x

    calls = []

    @ppto.fusion_rule(pattern, name=f"gate_{size}")
    def gate(x, y):  # (a built-in rule has this pattern too: the later rule wins)
        calls.append(np.shape(x))
        return x * y + x

    calls.clear()  # registration ran it, to check it against the pattern
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((2, size))
    shown = ppto.show_grad(gate_squared, x, y, wrt=(0, 1), fused=True, file=None)
    assert f"g = __fused_gate_{size}(x, y)" in shown
    gradient = ppto.grad(gate_squared, wrt=(0, 1))
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        unfused = gradient(x, y)
    finally:
        ppto.set_precision(previous)
    assert calls == []
    dx, dy = gradient(x, y)
    # small arrays run unfused code unless another value is large
    assert calls == ([(size,)] if size > LARGE else [])
    for computed, plain, position in ((dx, unfused[0], 0), (dy, unfused[1], 1)):
        computed = np.asarray(computed)
        np.testing.assert_allclose(computed, np.asarray(plain), rtol=1e-13)
        direction = rng.standard_normal(size)
        moved = [[x, y], [x, y]]
        moved[0][position] = moved[0][position] + 1e-6 * direction
        moved[1][position] = moved[1][position] - 1e-6 * direction
        expected = (gate_squared(*moved[0]) - gate_squared(*moved[1])) / 2e-6
        assert np.isclose(np.dot(computed, direction), expected, rtol=1e-6)


def test_user_rules_match_whatever_their_parameters_order(own_rules):
    def swapped(s, x):  # read as x first: its leaves number the other way round
        return x * s + x

    def unused(x, y, z):  # z is never read: the rule cannot be called without it
        return x * y - x

    calls = []

    @ppto.fusion_rule(swapped, name="gate_swapped")
    def gate(s, x):
        calls.append("swapped")
        return x * s + x

    @ppto.fusion_rule(unused, name="gate_unused")
    def gate_unused(x, y, z):
        calls.append("unused")
        return x * y - x

    calls.clear()
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((2, LARGE + 3))
    shown = ppto.show_grad(gate_squared, x, y, wrt=(0, 1), fused=True, file=None)
    assert "g = __fused_gate_swapped(y, x)" in shown
    dx, dy = ppto.grad(gate_squared, wrt=(0, 1))(x, y)
    assert calls == ["swapped"]
    g = x * y + x
    np.testing.assert_allclose(np.asarray(dx), 2 * g * (y + 1), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(dy), 2 * g * x, rtol=1e-9)
    calls.clear()
    shown = ppto.show_grad(gate_difference, x, y, wrt=(0, 1), fused=True, file=None)
    assert "__fused_gate_unused" not in shown
    dx, _ = ppto.grad(gate_difference, wrt=(0, 1))(x, y)
    assert calls == []
    np.testing.assert_allclose(np.asarray(dx), 2 * (x * y - x) * (y - 1), rtol=1e-9)


def gate_difference(x, y):
    g = x * y - x
    return np.sum(g * g)


def mlp(W1, b1, W2, x):
    h = np.tanh(x @ W1 + b1)
    return np.sum((h @ W2) ** 2)


def chain(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


def test_show_grad_fused_shows_kernels_and_counts():
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((4, 3)), rng.standard_normal(3),
            rng.standard_normal((3, 2)), rng.standard_normal((5, 4)))  # fmt: skip
    text = ppto.show_grad(mlp, *args, wrt=(0, 1, 2), fused=True, file=io.StringIO())
    assert "__fused_matmul_bias_tanh" in text or "__fused_matmul_bias" in text
    header = text.splitlines()[0]
    before, after = [int(word) for word in header.split() if word.isdigit()]
    assert after < before
    assert ppto.grad(mlp, wrt=(0, 1, 2)).operator_counts(*args) == (before, after)
    on_sim = [ppto.tensor(a, device="sim") for a in args]  # a backend without fusion
    assert ppto.grad(mlp, wrt=(0, 1, 2)).operator_counts(*on_sim) == (before, before)


def test_show_grad_fused_says_when_calls_run_the_unfused_code(monkeypatch):
    """The fused code is shown with a line saying calls do not run it where they do
    not: small arrays, strict precision, PPTO_FUSION=off."""
    note = "# calls with these arguments run the unfused code"
    small, large = np.ones(7), np.ones(LARGE + 5)

    def second_line(x):
        text = ppto.show_grad(chain, x, x, x, fused=True, file=io.StringIO())
        return text.splitlines()[1]

    assert second_line(small).startswith(note) and "too small" in second_line(small)
    monkeypatch.setenv("PPTO_FUSION", "on")
    assert not second_line(large).startswith(note)
    monkeypatch.setenv("PPTO_FUSION", "off")
    assert "(PPTO_FUSION=off)" in second_line(large)
    monkeypatch.setenv("PPTO_FUSION", "on")
    previous = ppto.set_precision("strict")
    try:
        assert "(precision is 'strict')" in second_line(large)
    finally:
        ppto.set_precision(previous)


@pytest.mark.parametrize("function, shapes", [
    (mlp, [(4, 3), (3,), (3, 2), (5, 4)]),
    (chain, [(LARGE + 5,)] * 3),
    (chain, [(7,)] * 3),
])  # fmt: skip
def test_fused_and_unfused_gradients_agree(function, shapes):
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(shape) for shape in shapes]
    wrt = tuple(range(len(args)))
    fused = ppto.grad(function, wrt=wrt)(*args)
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        unfused = ppto.grad(function, wrt=wrt)(*args)
    finally:
        ppto.set_precision(previous)
    for a, b in zip(fused, unfused):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


def softmax_along_axis1(x, y):
    along = ppto.reduce_sum(ppto.softmax(x, axis=1) * y)
    return along + ppto.reduce_sum(ppto.log_softmax(x, axis=1) * y)


def test_softmax_rules_along_axis1_of_three_axes_reduce_along_axis1():
    # their implementations once reduced along the last axis: silently wrong
    # gradients for arrays of three axes (axis 1 is the last of two)
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((2, 30, LARGE // 50)), rng.standard_normal((2, 30, 1))
    text = ppto.show_grad(softmax_along_axis1, x, y, fused=True, file=io.StringIO())
    assert "__fused_log_softmax_backward_axis1(" in text
    fused = np.asarray(ppto.grad(softmax_along_axis1)(x, y))
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        unfused = np.asarray(ppto.grad(softmax_along_axis1)(x, y))
    finally:
        ppto.set_precision(previous)
    np.testing.assert_allclose(fused, unfused, rtol=1e-12, atol=1e-12)


# Rule implementations that assumed what their patterns do not: each computed a
# different value or dtype, or raised, where the unfused code did not.


def matmul_bias_tanh(x, W, b):
    return np.sum(np.tanh(x @ W + b))


def add_matmul_tanh(x, W, C):
    return np.sum(np.tanh(C + x @ W))


def vector_product_tanh(x, w):
    return np.tanh(x @ w)


def mean_squared_distance(x, w, y):
    t = ppto.stop_gradient(x * w)
    return np.mean(np.square(t - y)) + np.sum(w * w)


def mean_squared_from_number(x, w):
    t = ppto.stop_gradient(x * w)
    return np.mean(np.square(2.0 - t)) * np.sum(w)


def normalized(x, w, eps):
    h = ppto.stop_gradient(x * w)
    centred = h - np.mean(h, axis=-1, keepdims=True)
    spread = np.mean(np.square(h - np.mean(h, axis=-1, keepdims=True)), axis=-1,
                     keepdims=True)  # fmt: skip
    return np.sum(centred / np.sqrt(spread + eps)) * np.sum(w)


def gelu_features(x, W, b):
    h = ppto.stop_gradient(ppto.gelu(x @ W + b))
    return np.sum(h) + np.sum(W * W)


def log_sigmoid(z):
    return np.sum(np.log(ppto.sigmoid(z)))


def rnn_cell(x, Wx, h, Wh, b):
    return np.sum(np.tanh(x @ Wx + h @ Wh + b))


def rnn_cell_squared(x, Wx, h, Wh, b):
    return np.sum((x @ Wx + h @ Wh + b) ** 2)


def _random(*shapes, dtype="float64"):
    rng = np.random.default_rng(len(shapes))
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


f32 = "float32"


@pytest.mark.parametrize("function, args, wrt", [
    (matmul_bias_tanh, _random((400, 100), (100, 100), (3, 400, 100)), (0, 1, 2)),
    (matmul_bias_tanh, _random((300,), (300, 200), (400, 200)), (0, 1, 2)),
    (add_matmul_tanh, _random((300,), (300, 200), (400, 200)), (0, 1, 2)),
    (matmul_bias_tanh, _random((400, 100), (100, 100), dtype=f32) + _random((100,)),
     (0, 1, 2)),
    (vector_product_tanh, [0.01 * a for a in _random((40000,), (40000,))], (0, 1)),
    (mean_squared_distance, _random((300,), (300,), (200, 300)), 1),
    (mean_squared_from_number, _random((200, 300), (300,)), 1),
    (normalized, _random((200, 300), (300,), dtype=f32) + [np.array(1e-5)], 1),
    (normalized, _random((200, 300), (300,)) + [np.full(300, 1e-5)], 1),
    (gelu_features, _random((300,), (300, 200), (200,)), 1),
    (gelu_features, _random((3, 60, 64), (64, 1024), (1024,)), 1),
    (log_sigmoid, [np.full((200, 200), -20.0) + _random((200, 200))[0] * 1e-3], 0),
    # two products and a bias added into the first product's array: where the
    # second product, the bias or their dtype would widen it, a new array instead
    (rnn_cell, _random((400, 60), (60, 100), (400, 100), (100, 100), (100,)),
     (1, 3, 4)),
    (rnn_cell, _random((60,), (60, 100), (400, 100), (100, 100), (100,)), (1, 3, 4)),
    (rnn_cell, _random((400, 60), (60, 100), (400, 100), (100, 100), (3, 400, 100)),
     (1, 3, 4)),
    (rnn_cell, _random((400, 60), (60, 100), (400, 100), (100, 100), dtype=f32)
     + _random((100,)), (1, 3, 4)),
    (rnn_cell_squared, _random((400, 60), (60, 100), (400, 100), (100, 100), (100,)),
     (1, 3, 4)),
    (rnn_cell_squared, _random((400, 60), (60, 100), (60,), (60, 100), (100,)),
     (0, 1, 2, 3, 4)),
])  # fmt: skip
def test_rules_compute_what_the_unfused_code_does_for_any_operands(function, args, wrt):
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        value, grads = ppto.value_and_grad(function, wrt=wrt)(*args)
    finally:
        ppto.set_precision(previous)
    fused_value, fused_grads = ppto.value_and_grad(function, wrt=wrt)(*args)
    before, after = ppto.grad(function, wrt=wrt).operator_counts(*args)
    assert after < before  # (a rule applied: else unfused met unfused)
    assert np.asarray(fused_value).dtype == np.asarray(value).dtype
    np.testing.assert_allclose(np.asarray(fused_value), np.asarray(value), rtol=1e-10)
    pairs = (
        zip(fused_grads, grads) if isinstance(wrt, tuple) else [(fused_grads, grads)]
    )
    for fused, unfused in pairs:
        assert fused.dtype == unfused.dtype and fused.shape == unfused.shape
        np.testing.assert_allclose(
            np.asarray(fused), np.asarray(unfused), rtol=1e-9, atol=1e-9
        )


def doubled_sum(x, y):
    return np.sum(np.tanh(x * 2.0 + y * 2.0))


def plain_sum(x, y):
    return np.sum(np.tanh(x + y))


@pytest.mark.parametrize("function", [doubled_sum, plain_sum])
def test_gradients_never_share_memory_with_each_other(function):
    # one value computed for two gradients came back twice: scaling one in place
    # changed the other
    x, y = _random((200, 200), (200, 200))
    dx, dy = ppto.grad(function, wrt=(0, 1))(x, y)
    assert not np.shares_memory(np.asarray(dx), np.asarray(dy))


def summed(x, y):
    return x + y


def pair_of_sums(x, y):
    return x + y, x * 1.0


@pytest.mark.parametrize("function", [summed, pair_of_sums])
def test_pullback_gradients_share_memory_with_nothing_of_the_caller(function):
    # the pullback of x + y handed back the cotangent itself as both gradients:
    # updating dx in place changed dy and the caller's cotangent
    x, y = _random((200, 200), (200, 200))
    out, pullback = ppto.vjp(function, x, y)
    cotangent = tuple(np.ones(np.shape(o)) for o in _leaves(out))
    cotangent = cotangent if isinstance(out, tuple) else cotangent[0]
    dx, dy = (np.asarray(g) for g in pullback(cotangent))
    for held in (*_leaves(cotangent), x, y):
        assert not np.shares_memory(dx, held) and not np.shares_memory(dy, held)
    assert not np.shares_memory(dx, dy)


def gelu_gated(x, y):
    return np.sum(ppto.gelu(x) * y + x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("size", [7, LARGE + 5])
def test_gelu_fuses_into_chains_with_the_values_of_the_operator(dtype, size):
    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal(size).astype(dtype) for _ in range(2))
    text = ppto.show_grad(gelu_gated, x, y, fused=True, file=io.StringIO())
    if size < LARGE:  # written out: the kernel would run just that expression
        assert "t3 = gelu(x) * y + x" in text
    else:
        assert "= gelu(" not in text  # inside a region
        assert "0.7978845608028654" in text
    value, gradient = ppto.value_and_grad(gelu_gated)(x, y)
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        unfused_value, unfused_gradient = ppto.value_and_grad(gelu_gated)(x, y)
    finally:
        ppto.set_precision(previous)
    assert value.dtype == unfused_value.dtype == dtype
    assert np.asarray(value) == np.asarray(unfused_value)  # the same operations
    np.testing.assert_allclose(np.asarray(gradient), np.asarray(unfused_gradient))
    points = [x.astype(float), y.astype(float)]
    if size < LARGE:
        expected = central_differences(gelu_gated, points, 0)
        tolerance = 1e-6 if dtype == "float64" else 2e-2
        np.testing.assert_allclose(
            np.asarray(gradient), expected, rtol=tolerance, atol=tolerance
        )
    else:  # along random directions: element by element, 32773 of them took 13 s
        errors = directional_errors(gelu_gated, points, [gradient], directions=4)
        assert max(errors) < (1e-6 if dtype == "float64" else 1e-5), errors


@pytest.fixture(autouse=True)
def unshared_transforms():
    """Each test transforms its functions itself (grad objects of one function share
    their transforms, and these tests instrument the compiled kernels)."""
    from ppto.api import _SHARED

    _SHARED.clear()
    yield
    _SHARED.clear()


def region_kernels(gradient, args) -> list:
    gradient(*args)
    _, _, ranks, _, device = gradient.prepare(args, {})
    lowered = gradient.lowered(ranks, device)
    return [v for v in lowered.values() if hasattr(v, "fallback_name")]


def fallback_calls(gradient, args) -> list:
    """Compile ``gradient`` for ``args`` and record each call of a region's fallback
    (its original statements) from then on."""
    kernels = region_kernels(gradient, args)
    assert kernels, "no region was formed"
    calls = []
    for kernel in kernels:
        kernel.fallback = _recording(kernel.fallback, calls)
    return calls


def _recording(function, calls):
    def run(*args):
        calls.append(function.__name__)
        return function(*args)

    return run


def unfused_value_and_grad(function, wrt, args):
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        return ppto.value_and_grad(function, wrt=wrt)(*args)
    finally:
        ppto.set_precision(previous)


def assert_same_results(first, second, tolerance):
    (value, grads), (plain_value, plain_grads) = first, second
    np.testing.assert_allclose(float(value), float(plain_value), rtol=tolerance)
    for a, b in zip(grads, plain_grads):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tolerance, atol=tolerance)


def branchy_loss(x, y, s):
    total = 0.0
    for _ in range(2):
        if np.sum(x) > 0:
            u = np.sin(x) * y + s
        else:
            u = np.cos(x) - y
        total = total + np.sum(np.where(u > 0, u * u, -u) * np.exp(-y))
    return total


def angles_and_bases(x, y, s):
    # the elementwise functions without numexpr spellings: NumPy's ufuncs in blocks
    radius = np.hypot(x, y) + s
    angle = np.arctan2(y, x) * np.log2(radius) + np.log10(radius) * np.cbrt(x)
    return np.sum(angle + np.exp2(-y * y) + np.reciprocal(radius) + np.fmod(x, radius))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function, shapes", [
    (chain, [(LARGE + 5,)] * 3),
    (chain, [(3, LARGE // 2 + 7)] * 3),
    (branchy_loss, [(LARGE + 1,), (LARGE + 1,), ()]),
    (angles_and_bases, [(LARGE + 3,), (LARGE + 3,), ()]),
])  # fmt: skip
def test_regions_run_in_one_pass_and_agree_with_unfused_code(function, shapes, dtype):
    """A run of elementwise statements and full sums runs as one chunked pass when
    every array has one shape and dtype: its results equal the unfused ones."""
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    args[-1] = args[-1] if shapes[-1] else 0.5
    wrt = tuple(range(len(args) - (not shapes[-1])))
    gradient = ppto.value_and_grad(function, wrt=wrt)
    calls = fallback_calls(gradient, args)
    fused = gradient(*args)
    assert calls == []  # every region ran its chunked pass
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    assert_same_results(fused, unfused_value_and_grad(function, wrt, args), tolerance)


def test_regions_fall_back_to_their_statements_for_mixed_dtypes():
    rng = np.random.default_rng(7)
    x, y, z = rng.standard_normal((3, LARGE + 5))
    args = (x.astype("float32"), y, z)  # shapes agree, so a region is formed
    gradient = ppto.value_and_grad(chain, wrt=(0, 1, 2))
    calls = fallback_calls(gradient, args)
    fused = gradient(*args)
    assert calls  # the original statements ran
    assert_same_results(fused, unfused_value_and_grad(chain, (0, 1, 2), args), 1e-6)


def held_constant(x, w):
    s = ppto.stop_gradient(w)
    return np.sum(np.tanh(x) * np.exp(-x) + s * 0.0) + np.sum(s * s * s + s * s)


def test_a_region_summing_a_value_of_numbers_only_gives_the_numbers_once():
    """w, a differentiated Python number: summed in a chunked pass, ``s * s * s + s *
    s`` would be added once per element of x (it was: a wrong value, while w's shape
    was not known and the region ran its statements instead). A differentiated
    number stays a Python float (weak, as NumPy makes it), described with shape ():
    those statements run before the region, as for a 0-d array (next test), and
    the region runs its pass."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal(LARGE + 5)
    expected = np.sum(np.tanh(x) * np.exp(-x)) + (0.7**3 + 0.7**2)
    gradient = ppto.value_and_grad(held_constant, wrt=(0, 1))
    calls = fallback_calls(gradient, (x, 0.7))
    for w in (0.7, np.array(0.7)):
        value, (dx, dw) = gradient(x, w)
        np.testing.assert_allclose(float(value), expected, rtol=1e-12)
        slope = np.exp(-x) * (1 - np.tanh(x) ** 2 - np.tanh(x))
        np.testing.assert_allclose(dx, slope, rtol=1e-12, atol=1e-15)
        assert float(dw) == 0.0
    assert calls == []


def chosen_numbers(x, y, s):
    t = np.tanh(np.where(y, s, 0.0) * s)
    return np.sum(t * x + y)


def normalized_relu_product(x, g, b):
    # (x added before the ReLU: its masked gradient is x's too, so it stays in a
    # region, not folded into batch norm's backward kernel)
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    return np.sum(ppto.relu(g * (x - m) / np.sqrt(v + 1e-5) + b + x) * x)


def test_a_regions_where_writes_into_its_block(monkeypatch):
    """A masked gradient in a region is written into the pass's block (the masking
    route, no temporary copied in: that made the ResNet block's two regions 2.5x
    slower than their statements) and equals the unfused gradient."""
    monkeypatch.setenv("PPTO_FUSION", "on")
    rng = np.random.default_rng(16)
    x = rng.standard_normal((8, 16, 16, 32))
    g, b = rng.uniform(0.5, 1.5, 32), rng.standard_normal(32)
    wrt = (0, 1, 2)
    text = ppto.show_grad(normalized_relu_product, x, g, b, wrt=wrt, fused=True,
                          file=io.StringIO())  # fmt: skip
    assert "where_into(v2, in1, 0.0, out=out2_piece)" in text
    fused = ppto.grad(normalized_relu_product, wrt=wrt)(x, g, b)
    previous = ppto.set_precision("strict")
    try:
        unfused = ppto.grad(normalized_relu_product, wrt=wrt)(x, g, b)
    finally:
        ppto.set_precision(previous)
    for a, b in zip(fused, unfused):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-11, atol=1e-13)


def pairwise_top(a, b):
    # np.maximum of two arrays: its gradient chooses between two arrays (the whole,
    # or a tie's half), which a region writes into its blocks, no array made aside
    return np.sum(np.tanh(np.maximum(a, b)) * a)


def test_a_regions_choice_between_two_arrays_fills_its_blocks(monkeypatch):
    monkeypatch.setenv("PPTO_FUSION", "on")
    rng = np.random.default_rng(21)
    a, b = rng.standard_normal((2, LARGE + 7))
    b[:100] = a[:100]  # ties
    wrt = (0, 1)
    text = ppto.show_grad(pairwise_top, a, b, wrt=wrt, fused=True, file=io.StringIO())
    passes = text.split("def __fused_region_")[1:]
    assert passes and any("where_into(" in p for p in passes), text
    assert not any("np.where(" in p.split("\n\n\n")[0] for p in passes), text
    fused = ppto.grad(pairwise_top, wrt=wrt)(a, b)
    previous = ppto.set_precision("strict")
    try:
        unfused = ppto.grad(pairwise_top, wrt=wrt)(a, b)
    finally:
        ppto.set_precision(previous)
    for x, y in zip(fused, unfused):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-14)
    tied = a[:100] * (1 - np.tanh(a[:100]) ** 2) / 2  # b's half of a tie, by hand
    np.testing.assert_allclose(fused[1].numpy()[:100], tied, rtol=1e-12)


def test_a_region_keeps_numpys_float64_of_where_between_numbers():
    """``np.where(y, s, 0.0)`` of a Python number s is float64 whatever y's dtype,
    and so is every value computed from it; the pass computed it in float32, the
    arrays' dtype (found by fuzzing fused against unfused code). It runs its
    statements then, and its pass where s is an array."""
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((2, LARGE + 5)).astype("float32")
    gradient = ppto.value_and_grad(chosen_numbers, wrt=(0, 1))
    calls = fallback_calls(gradient, (x, y, 0.5))
    for s in (0.5, np.float32(0.5)):
        value, grads = gradient(x, y, s)
        expected = unfused_value_and_grad(chosen_numbers, (0, 1), (x, y, s))
        assert value.dtype == np.asarray(chosen_numbers(x, y, s)).dtype
        assert_same_results((value, grads), expected, 1e-6)
    assert calls == ["__fused_region_1_unfused"]  # for the Python number only


def tanh_chain(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


def test_a_regions_fallback_is_made_on_its_first_call_as_it_would_have_been(
    monkeypatch,
):
    """A region's fallback (its statements, for arguments its pass does not take) is
    fused and compiled when first called, not with the program: code for any shape
    (``SHAPE_SPECIALISATIONS`` seen) is fused for the large arrays of its first call,
    and a later call with small ones runs the statements. They give the gradient
    central differences give, and are the code the program lowered at once has."""
    import ppto.api
    from ppto.runtime.backends import backend_for
    from ppto.runtime.device import CPU
    from ppto.transform.lower import lower

    monkeypatch.setenv("PPTO_FUSION", "on")
    monkeypatch.setattr(ppto.api, "SHAPE_SPECIALISATIONS", 0)  # shapes not kept
    rng = np.random.default_rng(21)
    large = tuple(rng.standard_normal((3, LARGE + 5)))
    gradient = ppto.value_and_grad(tanh_chain, wrt=(0, 1, 2))
    kernels = region_kernels(gradient, large)  # (it runs the gradient once)
    assert kernels
    _, _, ranks, _, _ = gradient.prepare(large, {})
    namespace = gradient.lowered(ranks, CPU)
    for kernel in kernels:  # the passes ran: no fallback was made
        assert kernel.make_fallback is not None
        assert kernel.fallback_name not in namespace
    small = tuple(a[:7].copy() for a in large)
    assert gradient.prepare(small, {})[2] == ranks  # the same code
    value, grads = gradient(*small)
    np.testing.assert_allclose(float(value), tanh_chain(*small), rtol=1e-13)
    for position, computed in enumerate(grads):
        expected = central_differences(tanh_chain, list(small), position)
        np.testing.assert_allclose(computed.numpy(), expected, rtol=1e-6, atol=1e-8)
    program, _ = gradient.program(ranks)
    eager = lower(program, backend_for(CPU), "cpu", True)[0]
    for kernel in kernels:  # made by that call, the code lowered at once
        assert kernel.make_fallback is None
        function = namespace[kernel.fallback_name]
        assert kernel.fallback is function
        lines = linecache.getlines(function.__code__.co_filename)
        assert "".join(lines) in eager
        assert "".join(lines).startswith(f"def {kernel.fallback_name}(")


def test_a_late_fallback_cleared_by_another_thread_is_still_returned():
    """Two threads running a region's fallback for the first time: one tested
    ``make_fallback`` and read it again to call it, by which time the other had
    made the fallback and cleared it: ``None()``, a TypeError from the user's
    line. Here the other thread finishes right after the first read."""
    from ppto.fusion.kernels import Fallback

    def statements(*arguments):
        return sum(arguments)

    class MadeByAnotherThreadMeanwhile(Fallback):
        reads = 0

        @property
        def make_fallback(self):
            self.reads += 1
            maker = self.__dict__.get("maker")
            if self.reads == 1:  # (the other thread: made, then cleared)
                self._fallback, self.maker = statements, None
            return maker

        @make_fallback.setter
        def make_fallback(self, maker):
            self.maker = maker

    region = MadeByAnotherThreadMeanwhile()
    region.make_fallback = lambda: statements
    assert region.fallback is statements
    assert region.fallback(1.0, 2.0) == 3.0


def scaled_by_a_parameter(x, w):
    v = np.exp(w * w) + w
    return np.sum(np.tanh(x * v + v) * np.exp(-x)) + np.sum(w * w * w)


def test_values_of_0d_parameters_run_before_the_region_instead_of_stopping_it():
    """``v`` and ``w * w * w`` come from the 0-d w alone, and so do the gradient's
    first values for w: in a region they would make it run its statements on every
    call; they run before it."""
    rng = np.random.default_rng(10)
    x, w = rng.standard_normal(LARGE + 5), np.array(0.3)
    gradient = ppto.value_and_grad(scaled_by_a_parameter, wrt=(0, 1))
    source = ppto.show_grad(scaled_by_a_parameter, x, w, wrt=(0, 1), fused=True,
                            file=io.StringIO())  # fmt: skip
    body = source[: source.index("def __fused_region_1_unfused")]
    assert body.index("v = t2 + w") < body.index("= __fused_region_1(x, v)")
    calls = fallback_calls(gradient, (x, w))
    fused = gradient(x, w)
    # the forward region and the backward one of x's gradient run their passes
    # (w's gradient, after an axis sum whose shape the regions do not follow, may not)
    assert not {"__fused_region_1_unfused", "__fused_region_2_unfused"} & set(calls)
    expected = unfused_value_and_grad(scaled_by_a_parameter, (0, 1), (x, w))
    assert_same_results(fused, expected, 1e-12)


def squares_of_a_number(x, s):
    shifted = s * s + x  # one elementwise statement: a kernel, not a region
    return np.sum(shifted) + np.sum(x)


def counted_twice(x):
    total = np.sum(np.tanh(x) * x)
    return total + np.sum(np.ones_like(total)) * np.sum(x)


@pytest.mark.parametrize("size", [7, LARGE + 5])
def test_fused_kernels_keep_numpys_types_for_python_numbers(size):
    """``s * s`` of a Python number is a Python number (weak: float32 arrays stay
    float32); fused into a kernel it was np.multiply's float64, which made the
    float32 value float64 (found by the random programs)."""
    x = np.random.default_rng(11).standard_normal(size).astype("float32")
    value, gradient = ppto.value_and_grad(squares_of_a_number)(x, 0.5)
    assert np.asarray(squares_of_a_number(x, 0.5)).dtype == np.float32  # NumPy's
    assert value.dtype == np.float32 and gradient.dtype == np.float32
    expected = unfused_value_and_grad(squares_of_a_number, 0, (x, 0.5))
    np.testing.assert_allclose(float(value), float(expected[0]), rtol=1e-6)
    assert expected[0].dtype == np.float32


def test_a_sum_of_ones_like_a_sum_is_not_a_chunked_pass(fuse_everything):
    """``np.sum(np.ones_like(total))`` is 1 (it was a NameError in the pass, and
    would have counted its chunks)."""
    x = np.random.default_rng(12).standard_normal(50)
    value, gradient = ppto.value_and_grad(counted_twice)(x)
    np.testing.assert_allclose(float(value), counted_twice(x), rtol=1e-12)
    expected = unfused_value_and_grad(counted_twice, 0, (x,))
    np.testing.assert_allclose(gradient.numpy(), expected[1].numpy(), rtol=1e-12)


def test_a_sum_of_products_keeps_numpys_type_for_numbers_and_0d_arrays():
    """sum(w * 2.0) with a 0-d float32 w is float32 in NumPy; the dot product route
    made 2.0 a float64 array (found by review)."""
    rule = next(r for r in RULES if r.name == "sum_of_products")
    w = np.array(1.5, np.float32)
    for a, b in [(w, 2.0), (w, w), (np.ones(3, np.float32), np.float32(2))]:
        got, expected = rule.implementation(a, b), np.sum(a * b)
        assert got.dtype == expected.dtype and got == expected


def test_a_large_float32_sum_of_products_is_as_accurate_as_numpys_sum():
    """BLAS's float32 dot product of 1e7 elements was 2e-5 off (relative), past the
    default tolerance, where NumPy's pairwise sum of the products is 1e-7 off: the
    value of ``np.sum(x * x)`` changed with fusion (found by fuzzing fused against
    unfused code)."""
    rule = next(r for r in RULES if r.name == "sum_of_products")
    x = np.random.default_rng(14).uniform(0.0, 1.0, 10**7).astype("float32")
    exact = np.dot(x.astype("float64"), x.astype("float64"))
    got = rule.implementation(x, x)
    assert got.dtype == np.float32
    assert abs(float(got) - exact) / exact < 1e-6


def test_numexpr_maximum_and_minimum_are_numpys_for_nan_and_ties():
    """NaN on either side propagates; a tie gives the second operand, so the signs of
    zeros come out as NumPy's."""
    a, b = Node(leaf=0), Node(leaf=1)
    x = np.linspace(-2.0, 2.0, LARGE + 8)
    y = -x[::-1].copy()
    x[:3], y[5:8] = np.nan, np.nan
    x[10:14], y[10:14] = [-0.0, 0.0, 1.5, 0.0], [0.0, -0.0, 1.5, 0.0]
    for op, function in (("maximum", np.maximum), ("minimum", np.minimum)):
        tree = Node("mul", [Node(op, [a, b]), Node(value=1.0)])  # keeps zeros' signs
        kernel = ElementwiseKernel(f"__fused_{op}_test", tree, 2)
        got = kernel(x, y)
        (plan,) = kernel.plans.values()
        assert plan.expression is not None  # numexpr's path
        assert got.tobytes() == function(x, y).tobytes()
        assert list(np.signbit(got[10:12])) == [False, True]  # the second operand


def test_numexpr_kernels_take_boolean_conditions_and_masks_as_numpy_does():
    """A 0-d condition (``w >= 0`` for a 0-d w) is a NumPy bool scalar, which stays a
    condition (it was made a float: an error); a mask alone with float constants
    (``-(mask * 1.5)``) is NumPy's float64, not booleans (1.5 was made True)."""
    a, b = Node(leaf=0), Node(leaf=1)
    rng = np.random.default_rng(9)
    values = rng.standard_normal(LARGE + 3)
    mask = values > 0
    cases = [
        (Node("where", [a, Node("neg", [b]), b]), (np.bool_(True), values)),
        (Node("where", [a, Node("neg", [b]), b]), (np.float64(2.0) > 3, values)),
        (Node("neg", [Node("mul", [a, Node(value=1.5)])]), (mask,)),
        (Node("add", [Node("mul", [a, Node(value=1.5)]), a]), (mask,)),
        (Node("add", [Node("mul", [a, b]), Node(value=2)]), (values.astype("float32"),
                                                            np.float64(3.0))),
    ]  # fmt: skip
    for number, (tree, arrays) in enumerate(cases):
        kernel = ElementwiseKernel(f"__fused_mask_test{number}", tree, len(arrays))
        expected = evaluate_numpy(tree, arrays)
        got = kernel(*arrays)
        assert got.dtype == expected.dtype, number
        np.testing.assert_array_equal(got, expected)


def chosen_by_numbers(x, y):
    return np.where(x, y * 2.0, y + 1.0)


def test_a_condition_of_numbers_is_taken_as_numpy_takes_it():
    """``np.where(x, ...)`` of a float x (true where nonzero, NaN included): numexpr
    has no ``where`` of a float condition, and the large kernel raised
    NotImplementedError (found by fuzzing fused against unfused code)."""
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal(LARGE + 3), rng.standard_normal(LARGE + 3)
    x[::3], x[1] = 0.0, np.nan
    out, pullback = ppto.vjp(chosen_by_numbers, x, y)
    _, dy = pullback(np.ones_like(y))
    np.testing.assert_array_equal(out.numpy(), chosen_by_numbers(x, y))
    np.testing.assert_array_equal(dy.numpy(), np.where(x, 2.0, 1.0))


def scaled_rows(y, w):
    t = y * w + 1.0
    return np.sum(t * t)


def test_a_kernel_broadcasting_to_no_element_has_numpys_shape():
    """A batch of no rows, in code made for any shape: its large kernel went to
    numexpr, which broadcast ``(n,)`` with ``(0, 1)`` to ``(0, 1)``, not NumPy's
    ``(0, n)`` (an error further on; found by fuzzing fused against unfused
    code)."""
    y = np.random.default_rng(13).standard_normal(LARGE + 3)
    gradient = ppto.value_and_grad(scaled_rows, wrt=(0, 1))
    for rows in [*range(1, 10), 0]:  # many shapes: then code for any shape
        w = np.linspace(0.5, 1.5, rows)[:, None]
        value, (dy, dw) = gradient(y, w)
        t = y * w + 1.0
        np.testing.assert_allclose(float(value), np.sum(t * t), rtol=1e-12)
        np.testing.assert_allclose(dy.numpy(), np.sum(2 * t * w, axis=0), rtol=1e-12)
        assert dw.shape == w.shape


def test_values_of_different_known_shapes_are_not_joined_in_a_region():
    """y broadcasts against x: the statements reading it stay outside the regions,
    which then always run their pass."""
    rng = np.random.default_rng(8)
    args = (rng.standard_normal(LARGE + 5), rng.standard_normal(1), 0.5)
    gradient = ppto.value_and_grad(chain, wrt=(0, 1))
    calls = fallback_calls(gradient, args)
    text = ppto.show_grad(chain, *args, wrt=(0, 1), fused=True, file=io.StringIO())
    assert "t1 = x * y" in text  # not in a region
    fused = gradient(*args)
    assert calls == []
    assert_same_results(fused, unfused_value_and_grad(chain, (0, 1), args), 1e-12)


def test_region_layout_accepts_one_shape_and_floating_dtype_only():
    big = np.zeros((2, LARGE))
    assert region_layout((big, big, 2.0, np.ones(()))) == ((2, LARGE), big.dtype)
    assert region_layout((big, big[0])) is None  # broadcast
    assert region_layout((big, big.astype("float32"))) is None  # mixed dtypes
    assert region_layout((big, big.astype("int64"))) is None  # not floating
    assert region_layout((np.zeros(50), np.zeros(50))) is None  # too small to gain


def test_show_grad_fused_shows_a_region_and_its_pass():
    args = [np.ones(LARGE + 5)] * 3
    text = ppto.show_grad(chain, *args, wrt=(0, 1, 2), fused=True, file=io.StringIO())
    assert "= __fused_region_1(x, y, z)" in text  # the call replacing the statements
    assert "def __fused_region_1_unfused(x, y, z):" in text  # where it cannot run
    assert "for number in iter(claim, None):" in text  # the chunked pass
    assert "run_chunks(part, chunks)" in text  # its chunks, claimed by threads


def test_threaded_regions_agree_with_one_thread_and_with_unfused_code(monkeypatch):
    """Thirteen chunks claimed by three threads: every chunk's outputs are written,
    and the sum is the one thread's to the last bit (partial sums per chunk, added
    in chunk order)."""
    rng = np.random.default_rng(8)
    size = 13 * (CHUNK_BYTES // 8) - 100
    args = [rng.standard_normal(size) for _ in range(3)]
    gradient = ppto.value_and_grad(chain, wrt=(0, 1, 2))
    monkeypatch.setenv("PPTO_NUM_THREADS", "1")
    single = gradient(*args)
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    calls = fallback_calls(gradient, args)
    threaded = gradient(*args)
    assert calls == []
    for a, b in zip(threaded[1], single[1]):  # elementwise: the same operations
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert float(threaded[0]) == float(single[0])
    assert_same_results(threaded, unfused_value_and_grad(chain, (0, 1, 2), args), 1e-12)


@pytest.fixture
def fuse_everything(monkeypatch):
    """Fusion and regions for arrays of any size (normally only from LARGE on), so
    that the corpus's small functions run through them."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lower
    import ppto.transform.regions as regions

    for module in (kernels, fuse, lower, regions):
        monkeypatch.setattr(module, "LARGE", 1)


def counted_kernel_calls(monkeypatch) -> list:
    """A list that grows by one at every call of a generated elementwise kernel."""
    calls: list = []
    original = ElementwiseKernel.__call__

    def counted(self, *arrays):
        calls.append(self.name)
        return original(self, *arrays)

    monkeypatch.setattr(ElementwiseKernel, "__call__", counted)
    return calls


def test_fused_code_agrees_with_unfused_code_on_the_whole_corpus(
    fuse_everything, monkeypatch
):
    """Every scalar corpus function, its value and gradient computed with fused
    kernels and regions forced on, equals the unfused computation (loops carrying
    values through a region, sums, copies, branches, while loops with counters)."""
    from tests.corpus.checks import CASES

    kernel_calls = counted_kernel_calls(monkeypatch)
    checked = 0
    for case in CASES:
        if case.vjp:
            continue
        args = case.arguments()
        fused = ppto.value_and_grad(case.fn, wrt=case.wrt)(*args)
        plain = unfused_value_and_grad(case.fn, case.wrt, args)
        for a, b in zip(_leaves(fused), _leaves(plain)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=case.id)
        checked += 1
    assert checked > 200
    assert len(kernel_calls) > 250  # fused code ran (323 calls when written)


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [np.asarray(value.numpy() if hasattr(value, "numpy") else value)]


def carried(x, s):
    for _ in range(3):  # the backward loop's ds is read by a region, then assigned
        s = s * (1.0 + x * x)
    return np.sum(s)


def doubled(x, y):
    t = x * y
    return np.sum(np.sin(t + t) * np.cos(x))  # a value read twice by one operation


def test_regions_keep_values_a_loop_carries_and_operands_read_twice():
    rng = np.random.default_rng(9)
    for function, wrt in ((carried, (0,)), (doubled, (0, 1))):
        args = [rng.uniform(0.1, 0.9, LARGE + 3) for _ in range(2)]
        gradient = ppto.value_and_grad(function, wrt=wrt)
        calls = fallback_calls(gradient, args)
        fused = gradient(*args)
        assert calls == []
        expected = unfused_value_and_grad(function, wrt, args)
        assert_same_results(fused, expected, 1e-12)


def test_a_rule_is_checked_on_signed_inputs_and_its_errors_are_fusion_errors():
    # checked on positive inputs only, an implementation forgetting abs passed
    def pattern(A, B):
        return ppto.abs(ppto.dot(A, B))

    with pytest.raises(ppto.FusionError, match="abs_forgotten refused"):

        @ppto.fusion_rule(pattern, name="abs_forgotten", shapes=[(4, 3), (3, 5)])
        def forgotten(A, B):
            return A @ B

    with pytest.raises(ppto.FusionError, match="raised TypeError"):

        @ppto.fusion_rule(pattern, name="wrong_arity", shapes=[(4, 3), (3, 5)])
        def wrong_arity(A):
            return np.abs(A)

    names = [rule.name for rule in ppto.fusion_rules()]
    assert "abs_forgotten" not in names and "wrong_arity" not in names


def test_a_blocks_definitions_seen_from_a_position_are_the_last_before_it():
    """Fuser.block indexes a block's single-target definitions once; seen from a
    statement, a name's definition is its last one before that statement (a
    name assigned again later, as a loop's carried copy is, is not read there)."""
    from ppto.transform.fuse import _Definitions
    from ppto.transform.syntax import parse

    block = parse("a = 1\nb = a\nx, y = b\na = b\nc = a\n").body
    definitions = _Definitions(block)
    assert [definitions.before(p).get("a") for p in range(6)] == [
        None,
        0,
        0,
        0,
        3,
        3,
    ]
    assert definitions.before(2).get("b") == 1
    assert definitions.before(5).get("x") is None  # (a tuple's targets: not single)
    assert definitions.before(4).before(6).get("a") == 3  # (a view narrows only)
    assert definitions.before(1).get("c") is None


def exp_times(x, y):
    return ppto.exp(x) * y


@pytest.mark.parametrize(
    "arguments, named",
    [
        ({"name": "one_shape", "shapes": [(4, 4)]}, "gives 1 shape.* 2 parameter"),
        ({"name": "three_shapes", "shapes": [(4,)] * 3}, "gives 3 shape"),
        ({"name": "letters", "shapes": "ab"}, "shapes= must be a list of shapes"),
        ({"name": "not_whole", "shapes": [(4, 2.5), (4,)]}, "shapes= must be"),
        ({"name": 3}, "name= must be a non-empty string, got 3"),
        ({"name": ""}, "name= must be a non-empty string"),
        ({"name": "sideways", "applies": "sideways"}, "applies='sideways' is not"),
        ({"name": "forward_only", "applies": "forward"}, "applies='forward' is not"),
    ],
)
def test_fusion_rule_arguments_are_refused_naming_the_argument(arguments, named):
    """Checked before the rule is tried on random inputs: a FusionError naming the
    argument, not a TypeError from calling the pattern with too few inputs.
    applies= cannot choose a pass: a rule applies in forward and backward code."""
    with pytest.raises(ppto.FusionError, match=named):
        ppto.fusion_rule(exp_times, **arguments)(lambda x, y: np.exp(x) * y)
    names = [rule.name for rule in ppto.fusion_rules()]
    assert arguments["name"] not in names


def test_applies_may_say_forward_and_backward(own_rules):
    rule = ppto.fusion_rule(
        exp_times,
        name="both_passes",
        shapes=[(3,), (3,)],
        applies="forward and backward",
    )(lambda x, y: np.exp(x) * y)
    assert rule.applies == "forward and backward" and rule in ppto.fusion_rules()


def test_a_pattern_with_keyword_only_parameters_is_refused():
    def scaled(x, *, k=2.0):
        return ppto.exp(x) * k

    with pytest.raises(ppto.FusionError, match="parameter k=2.0 is not positional"):
        ppto.fusion_rule(scaled, name="keyword_only")(lambda x, k=2.0: np.exp(x) * k)
    with pytest.raises(ppto.FusionError, match="pattern must be a function"):
        ppto.fusion_rule("exp(x) * y", name="text")


def rnn(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def test_rnn_step_fused_in_place_and_weight_gradients_added_into():
    """The fused RNN (benchmark d): each step's two products, bias and tanh one
    kernel writing over the first product; the weights' gradients added into their
    zeros (accumulate_in_place), not fused into a product making a new array each
    turn; gradients as central differences give them."""
    rng = np.random.default_rng(5)
    args = (
        rng.standard_normal((4, 3, 5)),
        rng.standard_normal((3, 6)) * 0.5,
        rng.standard_normal((5, 6)) * 0.3,
        rng.standard_normal((6, 6)) * 0.3,
        rng.standard_normal(6) * 0.1,
    )
    text = ppto.show_grad(
        rnn, *args, wrt=(2, 3, 4), lowered=True, fused=True, file=io.StringIO()
    )
    assert "h_2 = __fused_matmul_pair_bias_tanh(x[t], Wx, h_1, Wh, b)" in text
    for gradient in ("dWx", "dWh", "db"):
        assert f"{gradient} = add_into({gradient}, " in text
    assert "__fused_matmul_bias(" not in text
    gradient = ppto.grad(rnn, wrt=(2, 3, 4))
    _, values, ranks, _, device = gradient.prepare(args, {})
    fused = gradient.lowered(ranks, device, fused=True)["rnn_grad"]
    _, gradients = fused(*values)
    for position, gradient in zip((2, 3, 4), gradients):
        expected = central_differences(rnn, list(args), position)
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)


def scaled_by_numbers(x, n):
    return np.sum(np.sin(x * (n * n)))


def scaled_by_a_quotient(x, c, d):
    return np.sum(np.sin(x * ((c * c - d * d) * 1e8)))


@pytest.mark.parametrize(
    "function, dtype, numbers, scale",
    [
        (scaled_by_numbers, "float64", (2**40,), 1e-24),  # n * n past 2**63
        (scaled_by_numbers, "float64", (10**20,), 1e-40),  # n past int64
        (scaled_by_a_quotient, "float32", (1 + 1e-8, 1.0), 1.0),  # cancels in float32
    ],
)
def test_numbers_alone_in_a_region_are_computed_as_python_computes_them(
    function, dtype, numbers, scale, monkeypatch
):  # (``scale``: x's, so that sin's argument is about 1)
    """Found by a probe: what Python numbers alone make inside a region (``n * n``)
    was a ufunc call into a chunk buffer of the arrays' dtype: int64 wrapped round
    past 2**63 (a value of 0.0 for 76.0) or raised, float32 cancelled (0.0 for 7.39).
    It is computed once, before the chunks, with Python's operators."""
    monkeypatch.setenv("PPTO_FUSION", "on")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(LARGE + 5) * scale).astype(dtype)
    args = (x, *numbers)
    gradient = ppto.value_and_grad(function)
    calls = fallback_calls(gradient, args)
    value, dx = gradient(*args)
    assert calls == []  # the region ran
    plain_value, plain_dx = unfused_value_and_grad(function, 0, args)
    assert float(value) == pytest.approx(float(function(*args)), rel=1e-5)
    np.testing.assert_allclose(float(value), float(plain_value), rtol=1e-6)
    np.testing.assert_allclose(dx.numpy(), plain_dx.numpy(), rtol=1e-5)
    points = [x.astype(float), *numbers]
    step = 1e-6 * scale
    errors = directional_errors(function, points, [dx.numpy()], 2, step)
    assert max(errors) < (1e-5 if dtype == "float64" else 1e-3), errors


def test_a_user_rule_changing_the_dtype_is_refused(own_rules):
    # only shapes and values were compared: an implementation computing in float32
    # (within the tolerance of float64's values) was registered, and one giving
    # float64 for float32 inputs too, where fused code would change the results'
    # dtype; a pattern that raised came out raw, where an implementation's raising
    # is a FusionError
    def pattern(x, y):
        return ppto.sin(x) * y

    with pytest.raises(ppto.FusionError, match="dtype float32, the pattern float64"):
        ppto.fusion_rule(pattern, name="sin_times_in_float32")(
            lambda x, y: (np.sin(x) * y).astype(np.float32)
        )
    with pytest.raises(ppto.FusionError, match="float32 inputs.*dtype float64"):
        ppto.fusion_rule(pattern, name="sin_times_in_float64")(
            lambda x, y: np.sin(x.astype(np.float64)) * y.astype(np.float64)
        )
    with pytest.raises(ppto.FusionError, match="raised ZeroDivisionError"):
        ppto.fusion_rule(lambda x: ppto.sin(x) / 0 * (1 / 0), name="raising")(np.sin)
    names = [rule.name for rule in ppto.fusion_rules()]
    assert not {"sin_times_in_float32", "sin_times_in_float64", "raising"} & {*names}
    ppto.fusion_rule(pattern, name="sin_times")(lambda x, y: np.sin(x) * y)
