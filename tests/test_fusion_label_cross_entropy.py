"""Softmax cross-entropy over integer labels, its backward pass fused
(ppto/fusion/label_cross_entropy.py), log-softmax written out or ppto.log_softmax,
the gathered entries summed or averaged (the loss's number scattered) or not:
the fused call replaces the gather's and the log-softmax's gradient statements; the
kernels equal their patterns for repeated, negative and listed indices; gradients
through fused code equal unfused ones and central differences (float64), and code
the rules do not fit is left as it is."""

import io

import numpy as np
import pytest

import ppto
from ppto.fusion import label_cross_entropy as module
from tests.test_golden import central_differences

RULE = "label_cross_entropy_backward"
OPERATOR_RULE = "label_cross_entropy_log_softmax_backward"  # (ppto.log_softmax's)
# (the gathered entries summed or averaged: the loss's number scattered)
REDUCED_RULE = "label_cross_entropy_reduced_backward"
REDUCED_OPERATOR_RULE = "label_cross_entropy_reduced_log_softmax_backward"
RULES = {rule.name: rule for rule in ppto.fusion_rules()}
# rows gathered out of order and twice, (2, 1) twice: both gradients add up
ROWS = np.array([2, 0, 2, 1, 3, 1, 0])


def mean_of_labelled(logits, labels):  # (benchmarks/workloads.py's mlp ends so)
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def sum_of_labelled(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.sum(log_probs[np.arange(logits.shape[0]), labels])


def last_axis(logits, labels):
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def no_maximum_subtracted(logits, labels):
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def repeated_rows(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[ROWS, labels])


def listed_labels(logits):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.sum(log_probs[[0, 1, 2, 3, 1], [2, 0, 4, 1, -1]])


def exps_named(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(shifted)
    log_probs = shifted - np.log(np.sum(e, axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels]) * 3.0


def log_softmax_operator(logits, labels):
    log_probs = ppto.log_softmax(logits)
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def log_softmax_operator_axis1(logits, labels):
    log_probs = ppto.log_softmax(logits, axis=1)
    return -np.sum(log_probs[ROWS, labels])


# the gathered entries read again: their gradient is a sum, not the loss's number
def picked_read_again(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    picked = log_probs[np.arange(logits.shape[0]), labels]
    return -np.mean(picked) + np.sum(picked**2)


def log_softmax_operator_picked_read_again(logits, labels):
    picked = ppto.log_softmax(logits)[ROWS, labels]
    return -np.mean(picked) + np.sum(np.sin(picked))


def mlp(w, b, x, labels):
    logits = np.tanh(x @ w) + b
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(x.shape[0]), labels])


# the log-probabilities read again: their gradient is a sum the rule does not match
def log_probs_read_again(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    picked = log_probs[np.arange(logits.shape[0]), labels]
    return -np.mean(picked) + 0.1 * np.sum(log_probs**2)


# the exponentials read again: their gradient is added to before log-softmax's is
def exps_read_again(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(shifted)
    log_probs = shifted - np.log(np.sum(e, axis=1, keepdims=True))
    return -np.sum(log_probs[np.arange(logits.shape[0]), labels]) + np.sum(e * e)


LABELS = np.array([2, 0, 4, 1])
# each function's gradient fused, and by which rule
FUSED = {mean_of_labelled: REDUCED_RULE, sum_of_labelled: REDUCED_RULE,
         last_axis: REDUCED_RULE, no_maximum_subtracted: REDUCED_RULE,
         repeated_rows: REDUCED_RULE, listed_labels: REDUCED_RULE,
         exps_named: REDUCED_RULE, mlp: REDUCED_RULE,
         log_softmax_operator: REDUCED_OPERATOR_RULE,
         log_softmax_operator_axis1: REDUCED_OPERATOR_RULE,
         picked_read_again: RULE,
         log_softmax_operator_picked_read_again: OPERATOR_RULE}  # fmt: skip
LEFT = [log_probs_read_again, exps_read_again]


def arguments(function, dtype="float64") -> list:
    rng = np.random.default_rng(5)
    if function is mlp:
        w, x = rng.standard_normal((3, 5)), rng.standard_normal((4, 3))
        return [w.astype(dtype), rng.normal(0, 0.3, 5).astype(dtype),
                x.astype(dtype), LABELS]  # fmt: skip
    logits = (2 * rng.standard_normal((4, 5))).astype(dtype)
    if function is listed_labels:
        return [logits]
    if function in (repeated_rows, log_softmax_operator_axis1,
                    log_softmax_operator_picked_read_again):  # fmt: skip
        return [logits, np.array([1, 3, 1, 0, 4, 4, 3])]
    return [logits, LABELS]


def wrt(function) -> tuple:
    return (0, 1, 2) if function is mlp else (0,)


def call(function) -> str:
    """The fused call of the rule ``function``'s gradient runs."""
    return f"__fused_{FUSED[function]}("


@pytest.fixture
def kernel_calls(monkeypatch):
    """Calls of the rule's kernel, and whether each took its one pass (``_fits``);
    fused code always (these arrays are small), in fresh transforms."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lower
    import ppto.transform.regions as regions
    from ppto.api import _SHARED

    for place in (kernels, fuse, lower, regions):
        monkeypatch.setattr(place, "LARGE", 1)
    monkeypatch.setenv("PPTO_FUSION", "on")
    fits = []
    monkeypatch.setattr(module, "_fits", lambda *a: fits.append(_fits(*a)) or fits[-1])
    _SHARED.clear()
    yield fits
    _SHARED.clear()


_fits = module._fits


def listing(function, args) -> str:
    return ppto.show_grad(function, *args, wrt=wrt(function), fused=True,
                          file=io.StringIO())  # fmt: skip


@pytest.mark.parametrize("function", FUSED, ids=lambda f: f.__name__)
def test_the_call_replaces_the_gathers_and_log_softmaxs_gradients(function):
    text = listing(function, arguments(function))
    assert text.count(call(function)) == 1, text
    backward = text.split("# grad of")[1]
    for gone in ("index_add", "zeros_like", "reduce_sum", "log_softmax_backward"):
        assert gone not in backward, text
    if "reduced" in FUSED[function]:  # (the loss's view too)
        assert "unreduce" not in backward, text


@pytest.mark.parametrize("function", LEFT, ids=lambda f: f.__name__)
def test_gradients_read_elsewhere_are_not_fused_away(function):
    text = listing(function, arguments(function))
    assert "__fused_label_cross_entropy" not in text, text
    assert "index_add(zeros_like(log_probs)" in text, text


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", [*FUSED, *LEFT], ids=lambda f: f.__name__)
def test_fused_gradients_equal_unfused_ones_and_central_differences(
    function, dtype, kernel_calls
):
    args = arguments(function, dtype)
    value, grads = ppto.value_and_grad(function, wrt=wrt(function))(*args)
    # the kernel ran once, on its one pass, where the rule matched
    assert kernel_calls == ([True] if function in FUSED else [])
    previous = ppto.set_precision("strict")  # (no fusion)
    try:
        plain_value, plain_grads = ppto.value_and_grad(function, wrt=wrt(function))(
            *args
        )
    finally:
        ppto.set_precision(previous)
    tolerance = 1e-12 if dtype == "float64" else 1e-6
    np.testing.assert_allclose(float(value), float(plain_value), rtol=tolerance)
    for fused, unfused in zip(grads, plain_grads):
        assert fused.shape == unfused.shape and fused.dtype == unfused.dtype
        np.testing.assert_allclose(
            fused.numpy(), unfused.numpy(), rtol=tolerance, atol=tolerance
        )
    if dtype == "float64":
        for position, gradient in zip(wrt(function), grads):
            expected = central_differences(function, args, position)
            np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-8)


def kernel_arguments(rows, labels, dtype="float64", shape=(4, 5)):
    """The rule's arguments for a gather at ``(rows, labels)`` of a matrix of
    ``shape``: its gradient, the index, log-probabilities, the axis, the
    exponentials' sums and the exponentials."""
    rng = np.random.default_rng(2)
    exps = rng.uniform(0.1, 1.0, shape).astype(dtype)
    total = exps.sum(axis=1, keepdims=True)
    like = np.log(exps / total)
    g = rng.standard_normal(np.shape(rows)).astype(dtype)
    return [g, (rows, labels), like, 1, total, exps]


def rule_arguments(name, arguments) -> list:
    """The arguments of rule ``name`` for those of ``kernel_arguments``: the rules
    of ppto.log_softmax take the log-probabilities of the same exponentials, the
    reduced rules a number (``g``'s first, in its dtype) and the gather's shape
    for ``g``."""
    g, index, like, axis, total, exps = arguments
    if "log_softmax" in name:
        rest = [like, axis, np.log(exps / total).astype(exps.dtype)]
    else:
        rest = [like, axis, total, exps]
    if "reduced" in name:
        number = g.dtype.type(g.flat[0] if g.size else 0.5)
        return [number, g.shape, index, *rest]
    return [g, index, *rest]


def pattern_value(name, arguments) -> np.ndarray:
    as_tensors = [ppto.tensor(a) if isinstance(a, np.ndarray) else a
                  for a in arguments]  # fmt: skip
    return RULES[name].pattern(*as_tensors).numpy()


def kernel(name, arguments) -> np.ndarray:
    return RULES[name].implementation(*arguments)


ALL = [RULE, OPERATOR_RULE, REDUCED_RULE, REDUCED_OPERATOR_RULE]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rows_each_gathered_once_give_the_unfused_gradient_bit_for_bit(dtype, name):
    given = kernel_arguments(np.array([3, 1, 0, 2]), LABELS, dtype)
    arguments = rule_arguments(name, given)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in arguments]
    _, index, like, axis, total, exps = given
    assert _fits(like, axis, exps, *index, total)
    fused = kernel(name, arguments)
    assert fused.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fused, pattern_value(name, arguments))
    for before, after in zip(copies, arguments):  # (its arguments unchanged)
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    "rows, labels",
    [
        (ROWS, np.array([1, 3, 1, 0, 4, 1, 2])),  # a row twice, (2, 1) twice
        (ROWS, np.array([1, -1, 1, 0, -5, 1, 2])),  # negative labels
        (np.array([-1, 0, -4, 3]), LABELS),  # negative rows, -4 the first again
        (np.array([-1, 0, 1]), np.array([-1, 2, -5])),  # each row once, negatives
        ([0, 1, 1, 3], [2, 2, 2, 0]),  # lists
        (np.array([3, 0, 3], np.uint64), np.array([1, 4, 1], np.uint8)),  # unsigned
        (np.array([], int), np.array([], int)),  # nothing gathered
    ],
)
@pytest.mark.parametrize("name", ALL)
def test_the_kernel_equals_its_pattern_for_any_rows_and_labels(rows, labels, name):
    arguments = rule_arguments(name, kernel_arguments(rows, labels))
    np.testing.assert_allclose(
        kernel(name, arguments), pattern_value(name, arguments), rtol=1e-13,
        atol=1e-15,
    )  # fmt: skip


@pytest.mark.parametrize("name", ALL)
def test_an_index_out_of_bounds_raises_as_numpy_does(name):
    for rows, labels in ((np.array([0, 4]), np.array([1, 1])), ([0, 1], [5, 0])):
        with pytest.raises(IndexError):
            kernel(name, rule_arguments(name, kernel_arguments(rows, labels)))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    "change",
    ["float64 gradient", "float64 sums", "3-d", "masks", "rows of rows", "axis 0"],
)
def test_other_types_and_shapes_run_the_patterns_operators(change, name):
    rows, labels = np.array([0, 2, 2]), np.array([1, 0, 1])
    arguments = kernel_arguments(rows, labels, "float32")
    g, index, like, axis, total, exps = arguments
    if change == "float64 gradient":  # (NumPy's promotion: a float64 result)
        arguments[0] = g.astype("float64")
    elif change == "float64 sums":
        arguments[4] = total.astype("float64")
    elif change == "3-d":  # rows of a stack of matrices
        stacked = kernel_arguments(rows, labels, "float32", (4, 5, 3))
        stacked[4] = stacked[5].sum(axis=1, keepdims=True)
        arguments = stacked
    elif change == "masks":
        arguments[1] = (np.array([True, False, True, True]), labels)
    elif change == "rows of rows":
        arguments[1] = (rows.reshape(3, 1), labels.reshape(1, 3))
        arguments[0] = np.ones((3, 3), "float32")
    else:  # the sums along the other axis
        arguments[3] = 0
        arguments[4] = exps.sum(axis=0, keepdims=True)
    arguments = rule_arguments(name, arguments)
    wanted = pattern_value(name, arguments)
    actual = kernel(name, arguments)
    assert actual.dtype == wanted.dtype and actual.shape == wanted.shape
    np.testing.assert_allclose(actual, wanted, rtol=1e-6, atol=1e-6)


def test_the_rules_are_listed():
    for name in ALL:
        assert RULES[name].applies == "backward" and RULES[name].before_regions
    written_out = ("index", "like", "axis", "total", "exps")
    assert RULES[RULE].parameters == ("g", *written_out)
    assert RULES[REDUCED_RULE].parameters == ("loss", "picked", *written_out)
    operator = ("index", "like", "axis", "log_probs")
    assert RULES[OPERATOR_RULE].parameters == ("g", *operator)
    assert RULES[REDUCED_OPERATOR_RULE].parameters == ("loss", "picked", *operator)
