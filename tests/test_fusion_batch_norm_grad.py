"""Batch norm's backward pass fused (ppto/fusion/batch_norm_backward.py): NHWC and
NCHW images, the input's gradient alone or added to an earlier one; the fused call
binds the shift's, scale's and input's gradients to the names the code gave them,
its kernel equals the pattern over several chunks and threads, and gradients through
fused code equal unfused ones and central differences (float64)."""

import io
import re

import numpy as np
import pytest

import ppto
from ppto.fusion.batch_norm_backward import NHWC, _fits
from ppto.fusion.registry import RULES
from tests.test_fusion_multi import (  # noqa: F401  (counted: a fixture)
    assert_like_unfused_and_differences,
    counted,
)


def nhwc(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * y)


def nhwc_input_read_again(x, g, b):
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(np.sin(y) * x)


def nchw(x, g, b):
    m = np.mean(x, axis=(0, 2, 3), keepdims=True)
    v = np.mean((x - m) ** 2, axis=(0, 2, 3), keepdims=True)
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * y)


def nchw_input_read_again(x, g, b):
    m = np.mean(x, axis=(0, 2, 3), keepdims=True)
    v = np.mean((x - m) ** 2, axis=(0, 2, 3), keepdims=True)
    y = g * (x - m) / np.sqrt(v + 1e-5) + b
    return np.sum(np.tanh(y) * x)


def nhwc_centred(x, g, b):
    # (x - mean) named: its gradient is accumulated, then the input's
    centred = x - np.mean(x, axis=(0, 1, 2))
    y = g * centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-3) + b
    return np.sum(np.tanh(y) * y)


def nhwc_centred_input_read_again(x, g, b):
    centred = x - np.mean(x, axis=(0, 1, 2))
    y = g * centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-3) + b
    return np.sum(np.tanh(y) * x)


def nchw_centred(x, g, b):
    c = x - np.mean(x, axis=(0, 2, 3), keepdims=True)
    y = g * c / np.sqrt(np.mean(c**2, axis=(0, 2, 3), keepdims=True) + 1e-3) + b
    return np.sum(np.tanh(y))


def nchw_centred_input_read_again(x, g, b):
    c = x - np.mean(x, axis=(0, 2, 3), keepdims=True)
    y = g * c / np.sqrt(np.mean(c**2, axis=(0, 2, 3), keepdims=True) + 1e-3) + b
    return np.sum(np.sin(y) * x)


def nchw_variance_named(x, g, b):
    # x - mean and the variance both named: the variance's gradient is added to
    # the centred value's after the scale's, ``dc = dc + dvariance / 40 * 2 * c``
    # where the rule has ``dc = dc + dt2 * g``: matched with add's operands swapped
    centred = x - np.mean(x, axis=(0, 2, 3), keepdims=True)
    variance = np.mean(centred**2, axis=(0, 2, 3), keepdims=True)
    return np.sum(np.tanh(g * centred / np.sqrt(variance + 1e-3) + b))


def nhwc_relu(x, g, b):
    # np.maximum's mask where(t > 0.0, dy, where(t == 0.0, 0.5 * dy, 0.0)) read only
    # by batch norm's gradient
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(np.tanh(y) * y)


def nchw_relu(x, g, b):
    # ppto.relu's mask is where(t > 0, dy, 0.0)
    m = np.mean(x, axis=(0, 2, 3), keepdims=True)
    v = np.mean((x - m) ** 2, axis=(0, 2, 3), keepdims=True)
    return np.sum(np.cos(ppto.relu(g * (x - m) / np.sqrt(v + 1e-5) + b)))


def nchw_relu_input_read_again(x, g, b):
    m = np.mean(x, axis=(0, 2, 3), keepdims=True)
    v = np.mean((x - m) ** 2, axis=(0, 2, 3), keepdims=True)
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(np.sin(y) * x)


def nhwc_centred_relu(x, g, b):
    centred = x - np.mean(x, axis=(0, 1, 2))
    y = g * centred / np.sqrt(np.mean(centred**2, axis=(0, 1, 2)) + 1e-3) + b
    return np.sum(np.tanh(np.maximum(y, 0.0)))


def nhwc_relu_read_again(x, g, b):
    # the masked gradient is read by the skip connection's too: not folded
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b + x, 0.0)
    return np.sum(np.tanh(y) * y)


CASES = {
    nhwc: "batch_norm_backward_nhwc",
    nhwc_input_read_again: "batch_norm_backward_masked_tied_added_nhwc",
    nchw: "batch_norm_backward_nchw",
    nchw_input_read_again: "batch_norm_backward_added_nchw",
    nhwc_centred: "batch_norm_backward_centred_nhwc",
    nhwc_centred_input_read_again: "batch_norm_backward_centred_added_nhwc",
    nchw_centred: "batch_norm_backward_centred_nchw",
    nchw_centred_input_read_again: "batch_norm_backward_centred_added_nchw",
    nchw_variance_named: "batch_norm_backward_centred_nchw",
    nhwc_relu: "batch_norm_backward_masked_tied_nhwc",
    nchw_relu: "batch_norm_backward_masked_nchw",
    nchw_relu_input_read_again: "batch_norm_backward_masked_tied_added_nchw",
    nhwc_centred_relu: "batch_norm_backward_centred_masked_tied_nhwc",
    nhwc_relu_read_again: "batch_norm_backward_added_nhwc",
}
# the ReLU's condition (and np.maximum's tie) each masked rule's call passes
MASKS = {
    nhwc_input_read_again: ["> 0.0", "== 0.0"],
    nhwc_relu: ["> 0.0", "== 0.0"],
    nchw_relu: ["> 0"],
    nchw_relu_input_read_again: ["> 0.0", "== 0.0"],
    nhwc_centred_relu: ["> 0.0", "== 0.0"],
}


def arguments(function, dtype="float64"):
    rng = np.random.default_rng(7)
    if function.__name__.startswith("nchw"):
        image, channel = (2, 3, 5, 4), (1, 3, 1, 1)
    else:
        image, channel = (2, 5, 4, 3), (3,)
    x = rng.standard_normal(image)
    g, b = rng.uniform(0.5, 1.5, channel), rng.normal(0.0, 0.3, channel)
    return [a.astype(dtype) for a in (x, g, b)]


@pytest.mark.parametrize("function", list(CASES), ids=lambda f: f.__name__)
def test_the_call_binds_each_gradient_and_replaces_the_statements(function):
    args = arguments(function)
    text = ppto.show_grad(function, *args, wrt=(0, 1, 2), fused=True,
                          file=io.StringIO())  # fmt: skip
    call = re.search(rf"^    (\w+), (\w+), (\w+) = __fused_{CASES[function]}\(", text,
                     re.M)  # fmt: skip
    assert call, text
    assert call.groups() == ("db", "dg", "dx")
    if "added" in CASES[function]:
        # (moved earlier, where dx is ready: after the "# grad of" line of y, so
        # that an error in it names that line)
        above = text[: call.start()].splitlines()
        nearest = next(line for line in reversed(above) if "# grad of" in line)
        assert nearest.startswith("    # grad of: y = "), text
    backward = text[call.end() :].split("\n\n")[0]
    assert "reduce_sum" not in backward and "unreduce" not in backward, text
    if function in MASKS:  # the mask is the call's, no where() of its own
        arguments_ = text[call.end() :].splitlines()[0].split(", ")
        for number, mask in enumerate(MASKS[function], 1):
            assert re.fullmatch(rf"\w+ {mask}", arguments_[number]), text
        assert "where(" not in text, text
    elif "relu" in function.__name__:  # (read elsewhere too: computed once)
        # (np.maximum's gradient by its backward kernel, ties included)
        assert text.count("where(") == 0, text
        assert text.count("__fused_maximum_backward(") == 1, text


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", list(CASES), ids=lambda f: f.__name__)
def test_fused_gradients_equal_unfused_ones_and_central_differences(
    function,
    dtype,
    counted,  # noqa: F811
    monkeypatch,
):
    import ppto.fusion.batch_norm_backward as module

    fits = []  # (whether the kernel took its two passes, not NumPy's operators)
    monkeypatch.setattr(module, "_fits", lambda *a: fits.append(_fits(*a)) or fits[-1])
    args = arguments(function, dtype)
    value, grads = ppto.value_and_grad(function, wrt=(0, 1, 2))(*args)
    assert counted[CASES[function]] == 1  # its kernel ran, once
    assert fits == [True]
    assert_like_unfused_and_differences(function, args, value, grads, dtype)


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize(
    "name", [r.name for r in RULES if r.name.startswith("batch_norm_backward")]
)
def test_the_kernel_equals_its_pattern_over_several_chunks(name, threads, monkeypatch):
    import ppto.fusion.batch_norm_backward as module

    monkeypatch.setenv("PPTO_NUM_THREADS", threads)
    rule = next(r for r in ppto.fusion_rules() if r.name == name)
    rng = np.random.default_rng(1)
    nchw_layout = name.endswith("nchw")
    if nchw_layout:
        image, channel, block = (6, 5, 7, 4), (1, 5, 1, 1), 5 * 7 * 4  # an image
    else:
        image, channel, block = (3, 7, 4, 5), (5,), 5 * 8  # eight rows
    g, scaled, centred, earlier = rng.standard_normal((4, *image))
    deviation, gamma = rng.uniform(0.5, 1.5, (2, *channel))
    given = {
        "g": g,
        "condition": rng.standard_normal(image) >= 0.0,  # (a ReLU's: both values)
        "tie": rng.standard_normal(image) >= 1.0,  # (some, where and where not)
        "scaled": scaled,
        "deviation": deviation,
        "centred": centred,
        "gamma": gamma,
        "count": image[0] * image[2] * image[3] if nchw_layout else np.prod(image[:3]),
        "shape": image,
        "like": centred,
        "earlier": earlier,
    }
    arguments = [given[parameter] for parameter in rule.parameters]
    expected = rule.pattern(*[ppto.tensor(a) if isinstance(a, np.ndarray) else a
                              for a in arguments])  # fmt: skip
    # one chunk; then one block a chunk: several, the last one short (NHWC)
    for chunk_bytes in (module.CHUNK_BYTES, 8 * block):
        monkeypatch.setattr(module, "CHUNK_BYTES", chunk_bytes)
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in arguments]
        actual = rule.implementation(*arguments)
        for before, after in zip(copies, arguments):  # (its arguments unchanged)
            np.testing.assert_array_equal(before, after)
        for value, wanted in zip(actual, expected):
            assert value.shape == wanted.shape and value.dtype == wanted.dtype
            np.testing.assert_allclose(value, wanted.numpy(), rtol=1e-12, atol=1e-12)


def test_a_mask_of_other_types_runs_the_patterns_operators():
    # a mask of numbers (not a boolean image): where() as the pattern has it
    rule = next(r for r in RULES if r.name == "batch_norm_backward_masked_nhwc")
    rng = np.random.default_rng(3)
    g, scaled, centred = rng.standard_normal((3, 2, 5, 4, 3))
    deviation, gamma = rng.uniform(0.5, 1.5, (2, 3))
    mask = (rng.standard_normal((2, 5, 4, 3)) > 0).astype(float)
    arguments = [g, mask, scaled, deviation, centred, gamma, 40, (2, 5, 4, 3), g]
    assert not _fits(NHWC, g, scaled, deviation, centred, gamma, 40, g, None,
                     (2, 5, 4, 3), mask)  # fmt: skip
    actual = rule.implementation(*arguments)
    boolean = rule.implementation(*arguments[:1], mask > 0, *arguments[2:])
    for value, wanted in zip(actual, boolean):
        np.testing.assert_allclose(value, wanted, rtol=1e-12, atol=1e-12)


def test_other_types_run_the_patterns_operators():
    # a float32 image with float64 scale: NumPy's promotion, as the pattern's
    rule = next(r for r in ppto.fusion_rules() if r.name == "batch_norm_backward_nhwc")
    rng = np.random.default_rng(2)
    g, scaled, centred = rng.standard_normal((3, 2, 5, 4, 3)).astype("float32")
    deviation, gamma = rng.uniform(0.5, 1.5, (2, 3))
    arguments = [g, scaled, deviation, centred, gamma, 40, (2, 5, 4, 3), centred]
    actual = rule.implementation(*arguments)
    expected = rule.pattern(*[ppto.tensor(a) if isinstance(a, np.ndarray) else a
                              for a in arguments])  # fmt: skip
    assert [v.dtype for v in actual] == [v.dtype for v in expected]
    assert {v.dtype for v in actual} == {np.dtype("float32"), np.dtype("float64")}
    for value, wanted in zip(actual, expected):
        np.testing.assert_allclose(value, wanted.numpy(), rtol=1e-5)


def test_the_resnet_gradient_runs_both_batch_norms_backward_fused():
    from examples.resnet_block import PARAMETERS, block_loss, make_arguments

    args = make_arguments()
    wrt = tuple(range(len(PARAMETERS)))
    text = ppto.show_grad(block_loss, *args, wrt=wrt, fused=True, file=io.StringIO())
    assert text.startswith("# operators: 112 before fusion, 41 after")
    for line in (
        # (bn2's masked gradient is the skip connection's too: not folded)
        "    db2, dg2, dh_2 = __fused_batch_norm_backward_nhwc(dt16, t15, t14, t9, g2,"
        " 2048, (8, 16, 16, 16), h_2)",
        "    db1, dg1, dh = __fused_batch_norm_backward_masked_tied_nhwc(dh_1, "
        "t8 > 0.0, t8 == 0.0, t7, t6, t1, g1, 2048, (8, 16, 16, 16), h)",
    ):
        assert line in text.splitlines(), text


@pytest.mark.parametrize(  # (functions whose slope at the ReLU's 0 is not 0)
    "function",
    [nhwc_input_read_again, nchw_relu_input_read_again, nhwc_centred_relu],
    ids=lambda f: f.__name__,
)
def test_ties_of_the_relu_share_the_gradient_in_the_fused_kernel(
    function,
    counted,  # noqa: F811
):
    # a scale and shift of 0 for one channel: every value of it ties the ReLU's 0,
    # where np.maximum's gradient is half, as central differences find it
    x, g, b = arguments(function)
    g.flat[0] = 0.0
    b.flat[0] = 0.0
    value, grads = ppto.value_and_grad(function, wrt=(0, 1, 2))(x, g, b)
    assert counted[CASES[function]] == 1
    assert_like_unfused_and_differences(function, [x, g, b], value, grads, "float64")
