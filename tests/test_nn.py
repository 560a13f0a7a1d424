"""Behaviour of the nn family beyond the operator table: convolution and pooling
against naive loops in both layouts, layout handling, numerical stability of softmax,
tie sharing in max pooling, second order through the rules, and shape errors."""

import numpy as np
import pytest

import ppto

RNG = np.random.default_rng(2024)


def to_nhwc(x):
    return np.transpose(x, (0, 2, 3, 1))


def to_nchw(x):
    return np.transpose(x, (0, 3, 1, 2))


def naive_conv2d(x, w, stride, padding):
    """NCHW cross-correlation, one output element at a time."""
    (sh, sw), (ph, pw) = stride, padding
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    batch, _, height, width = x.shape
    out_channels, _, kh, kw = w.shape
    out = np.zeros(
        (batch, out_channels, (height - kh) // sh + 1, (width - kw) // sw + 1)
    )
    for n, o, i, j in np.ndindex(out.shape):
        window = x[n, :, i * sh : i * sh + kh, j * sw : j * sw + kw]
        out[n, o, i, j] = np.sum(window * w[o])
    return out


def naive_pool(x, kernel, stride, reduce):
    """NCHW pooling, one window at a time."""
    (kh, kw), (sh, sw) = kernel, stride
    batch, channels, height, width = x.shape
    out = np.zeros((batch, channels, (height - kh) // sh + 1, (width - kw) // sw + 1))
    for n, c, i, j in np.ndindex(out.shape):
        out[n, c, i, j] = reduce(x[n, c, i * sh : i * sh + kh, j * sw : j * sw + kw])
    return out


CONV_CASES = [
    ((2, 2, 5, 5), (3, 2, 3, 3), (1, 1), (0, 0)),
    ((2, 2, 5, 5), (3, 2, 3, 3), (2, 2), (1, 1)),
    ((1, 3, 6, 7), (2, 3, 2, 3), (2, 1), (0, 2)),
    ((2, 1, 4, 4), (2, 1, 4, 4), (1, 1), (0, 0)),
]
# The geometries with their own code paths: 1x1 kernels without padding (the image is
# its own patch matrix, strided or not), windows that tile the padded image exactly
# (col2im a reordering), and disjoint windows with a remainder or with gaps.
SPECIAL_CONV_CASES = [
    ((2, 3, 4, 5), (2, 3, 1, 1), (1, 1), (0, 0)),
    ((2, 3, 5, 5), (2, 3, 1, 1), (2, 2), (0, 0)),
    ((1, 3, 4, 4), (2, 3, 1, 1), (1, 2), (1, 0)),
    ((2, 2, 4, 6), (3, 2, 2, 2), (2, 2), (0, 0)),
    ((1, 2, 4, 4), (2, 2, 3, 3), (3, 3), (1, 1)),
    ((1, 2, 5, 5), (2, 2, 2, 2), (2, 2), (0, 0)),
    ((1, 2, 7, 8), (2, 2, 2, 2), (3, 3), (0, 1)),
]


@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding", CONV_CASES + SPECIAL_CONV_CASES
)
def test_conv2d_matches_naive_loop_in_both_layouts(x_shape, w_shape, stride, padding):
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    expected = naive_conv2d(x, w, stride, padding)
    nchw = ppto.conv2d(x, w, stride=stride, padding=padding, layout="nchw")
    nhwc = ppto.conv2d(to_nhwc(x), w, stride=stride, padding=padding, layout="nhwc")
    np.testing.assert_allclose(np.asarray(nchw), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(to_nchw(np.asarray(nhwc)), expected, rtol=1e-12)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding", SPECIAL_CONV_CASES)
def test_conv2d_gradients_in_special_geometries(
    x_shape, w_shape, stride, padding, layout
):
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    x = to_nhwc(x) if layout == "nhwc" else x
    params = {"stride": stride, "padding": padding, "layout": layout}
    report = ppto.check_grad(lambda a, b: ppto.conv2d(a, b, **params), x, w, wrt=(0, 1))
    assert report.ok, str(report)


def test_int_stride_and_padding_mean_both_axes():
    x, w = RNG.standard_normal((2, 2, 5, 5)), RNG.standard_normal((3, 2, 3, 3))
    np.testing.assert_allclose(
        np.asarray(ppto.conv2d(x, w, stride=2, padding=1)),
        naive_conv2d(x, w, (2, 2), (1, 1)),
        rtol=1e-12,
    )


def test_layout_comes_from_the_input_tensor_and_is_kept():
    x, w = RNG.standard_normal((2, 5, 5, 2)), RNG.standard_normal((3, 2, 3, 3))
    image = ppto.tensor(x, layout="nhwc")
    out = ppto.conv2d(image, w, stride=2, padding=1)
    assert out.layout == "nhwc"
    assert out.shape == (2, 3, 3, 3)
    expected = ppto.conv2d(to_nchw(x), w, stride=2, padding=1, layout="nchw")
    np.testing.assert_allclose(to_nchw(np.asarray(out)), np.asarray(expected))
    assert ppto.max_pool2d(image, 2).layout == "nhwc"
    assert ppto.avg_pool2d(image, 2).layout == "nhwc"
    assert ppto.conv2d(ppto.tensor(to_nchw(x), layout="nchw"), w).layout == "nchw"


def test_input_gradient_keeps_the_layout_and_weight_gradient_has_none():
    x = ppto.tensor(RNG.standard_normal((2, 5, 5, 2)), layout="nhwc")
    w = ppto.tensor(RNG.standard_normal((3, 2, 3, 3)))
    dY = ppto.tensor(RNG.standard_normal((2, 3, 3, 3)), layout="nhwc")
    dx, dw = ppto.get_grad_rule(ppto.conv2d)(x, w)(dY)
    assert dx.layout == "nhwc" and dx.shape == x.shape
    assert dw.layout is None and dw.shape == w.shape


def pooled_copy(x, v):
    h = x
    return np.sum(ppto.max_pool2d(h * v, 2) ** 2)


def pooled_in_a_loop(x, v):
    h = x * 1.0
    for _ in range(2):
        h = np.tanh(h) * v
    return np.sum(ppto.max_pool2d(h, 2) ** 2)


def pooled_scaled(x, v):
    h = x * 2.0  # (left as it is when differentiating with respect to v only)
    return np.sum(ppto.max_pool2d(v * h, 2) ** 2)


def _pooled(h):
    return ppto.max_pool2d(h, 2)  # (no layout: the caller's hint is passed on)


def pooled_by_a_helper(x, v):
    return np.sum(_pooled(x * v) ** 2)


def _doubled(h):
    return h * 2.0


def pooled_after_a_helper(x, v):
    return np.sum(ppto.max_pool2d(_doubled(x * v), 2) ** 2)


@pytest.mark.parametrize(
    "function", [pooled_copy, pooled_in_a_loop, pooled_scaled, pooled_by_a_helper]
)
@pytest.mark.parametrize("wrt", [0, 1])
def test_a_layout_hint_reaches_pooling_through_copies_loops_and_plain_code(
    function, wrt
):
    # the NHWC hint was lost through h = x, a loop's carried value, arithmetic left
    # as it is, or v * h (v first, without a hint): pooling took NCHW, a silently
    # wrong value, gradient and tangent
    x = RNG.standard_normal((1, 4, 4, 3))
    v = np.linspace(0.5, 1.5, 3)
    image = ppto.tensor(x, layout="nhwc")
    arguments = [image, v]
    expected = float(function(image, v))
    value, gradient = ppto.value_and_grad(function, wrt=wrt)(image, v)
    assert np.isclose(float(value), expected, rtol=1e-12)
    direction = RNG.standard_normal(np.shape(arguments[wrt]))

    def along(step):
        moved = list(arguments)
        moved[wrt] = arguments[wrt] + step * direction
        if wrt == 0:
            moved[0] = ppto.tensor(np.asarray(moved[0]), layout="nhwc")
        return float(function(*moved))

    expected = (along(1e-6) - along(-1e-6)) / 2e-6
    tangents = [None, None]
    tangents[wrt] = direction
    _, pushed = ppto.jvp(function, arguments, tangents)
    np.testing.assert_allclose(
        [float(np.sum(np.asarray(gradient) * direction)), float(pushed)],
        expected,
        rtol=1e-6,
    )


def test_pooling_a_helpers_result_from_a_hinted_image_needs_a_layout():
    # (a helper's result has no hint: what its derivative makes is not analysed
    # before the caller's; pooling took NCHW for an NHWC image, silently wrong)
    image = ppto.tensor(RNG.standard_normal((1, 4, 4, 3)), layout="nhwc")
    with pytest.raises(ppto.TransformError, match="cannot tell the image layout"):
        ppto.grad(pooled_after_a_helper, wrt=1)(image, np.ones(3))


def pooled_by_its_layout(x, v):
    # a network written for either layout, choosing its axes by the image's
    h = ppto.relu(x * v) if x.layout == "nhwc" else ppto.relu(x)
    pooled = ppto.max_pool2d(h, 2)
    axes = (1, 2) if pooled.layout == "nhwc" else (2, 3)
    return np.sum(pooled.mean(axis=axes) ** 2)


def layout_of_a_helpers_result(x, v):
    h = _doubled(x * v)
    return np.sum(h**2) if h.layout == "nhwc" else np.sum(h)


@pytest.mark.parametrize("layout", ["nhwc", "nchw", None])
def test_an_images_layout_read_in_the_function_is_the_tensors(layout):
    # x.layout in a differentiated function raised AttributeError ('numpy.ndarray'
    # object has no attribute 'layout'): generated code reads raw arrays
    x = RNG.standard_normal((1, 4, 4, 3) if layout == "nhwc" else (1, 3, 4, 4))
    v = np.linspace(0.5, 1.5, 3) if layout == "nhwc" else 1.5
    image = ppto.tensor(x, layout=layout)
    value, gradient = ppto.value_and_grad(pooled_by_its_layout)(image, v)
    assert float(value) == pytest.approx(float(pooled_by_its_layout(image, v)))
    direction = RNG.standard_normal(x.shape)

    def along(step):
        moved = ppto.tensor(x + step * direction, layout=layout)
        return float(pooled_by_its_layout(moved, v))

    expected = (along(1e-6) - along(-1e-6)) / 2e-6
    _, pushed = ppto.jvp(pooled_by_its_layout, (image, v), (direction, None))
    np.testing.assert_allclose(
        [float(np.sum(np.asarray(gradient) * direction)), float(pushed)],
        expected,
        rtol=1e-6,
    )


def test_the_layout_of_a_helpers_result_is_refused_where_it_cannot_be_told():
    image = ppto.tensor(RNG.standard_normal((1, 4, 4, 3)), layout="nhwc")
    with pytest.raises(ppto.TransformError, match="cannot tell the image layout of h"):
        ppto.grad(layout_of_a_helpers_result)(image, np.ones(3))


POOL_CASES = [
    ((2, 2, 4, 4), 2, None),
    ((2, 3, 5, 5), 3, 2),
    ((1, 2, 5, 6), (2, 3), (1, 2)),
]


@pytest.mark.parametrize("shape, kernel_size, stride", POOL_CASES)
@pytest.mark.parametrize(
    "name, reduce", [("max_pool2d", np.max), ("avg_pool2d", np.mean)]
)
def test_pooling_matches_naive_loop_in_both_layouts(
    name, reduce, shape, kernel_size, stride
):
    pool = getattr(ppto, name)
    x = RNG.standard_normal(shape)
    kernel = (kernel_size,) * 2 if isinstance(kernel_size, int) else kernel_size
    steps = (
        kernel
        if stride is None
        else (stride,) * 2
        if isinstance(stride, int)
        else stride
    )
    expected = naive_pool(x, kernel, steps, reduce)
    nchw = pool(x, kernel_size, stride, layout="nchw")
    nhwc = pool(to_nhwc(x), kernel_size, stride, layout="nhwc")
    np.testing.assert_allclose(np.asarray(nchw), expected, rtol=1e-12)
    np.testing.assert_allclose(to_nchw(np.asarray(nhwc)), expected, rtol=1e-12)


def test_max_pool_shares_the_gradient_among_tied_maxima():
    x = np.array([[[[1.0, 1.0], [0.0, 1.0]]]])
    dY = ppto.tensor([[[[3.0]]]])
    dx = ppto.get_grad_rule(ppto.max_pool2d)(x, 2)(dY)
    np.testing.assert_allclose(np.asarray(dx), [[[[1.0, 1.0], [0.0, 1.0]]]])
    np.testing.assert_allclose(
        np.asarray(ppto.max_pool2d_tangent(x, x, 2)), [[[[1.0]]]]
    )


def naive_max_pool_backward_and_tangent(x, dY, dx, kernel, stride):
    """NCHW max pooling's gradient (dY shared equally among each window's maxima) and
    tangent (the mean of dx over them), one window at a time."""
    (kh, kw), (sh, sw) = kernel, stride
    gradient, tangent = np.zeros_like(x), np.zeros_like(dY)
    for n, c, i, j in np.ndindex(dY.shape):
        rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
        window = x[n, c, rows, cols]
        maxima = window == window.max()
        gradient[n, c, rows, cols] += maxima * dY[n, c, i, j] / maxima.sum()
        tangent[n, c, i, j] = dx[n, c, rows, cols][maxima].mean()
    return gradient, tangent


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("kernel, stride", [((3, 3), (2, 2)), ((2, 3), (1, 2))])
def test_max_pool_gradient_and_tangent_share_ties_in_overlapping_windows(
    kernel, stride, layout
):
    x = RNG.integers(0, 3, (2, 3, 6, 7)).astype(float)  # many ties
    dY = RNG.standard_normal(naive_pool(x, kernel, stride, np.max).shape)
    dx = RNG.standard_normal(x.shape)
    expected_gradient, expected_tangent = naive_max_pool_backward_and_tangent(
        x, dY, dx, kernel, stride
    )
    move = to_nhwc if layout == "nhwc" else np.asarray
    back = to_nchw if layout == "nhwc" else np.asarray
    params = {"kernel_size": kernel, "stride": stride, "layout": layout}
    gradient = ppto.max_pool2d_backward(move(dY), move(x), **params)
    tangent = ppto.max_pool2d_tangent(move(dx), move(x), **params)
    np.testing.assert_allclose(back(np.asarray(gradient)), expected_gradient)
    np.testing.assert_allclose(back(np.asarray(tangent)), expected_tangent)


def test_softmax_sums_to_one_and_does_not_overflow():
    x = RNG.standard_normal((4, 6)) * 3
    out = np.asarray(ppto.softmax(x))
    np.testing.assert_allclose(out.sum(axis=-1), np.ones(4))
    big = np.asarray(ppto.softmax(np.full((2, 3), 1000.0)))
    np.testing.assert_allclose(big, np.full((2, 3), 1 / 3))
    assert np.all(np.isfinite(np.asarray(ppto.softmax(np.array([1000.0, -1000.0])))))
    along_first = np.asarray(ppto.softmax(x, axis=0))
    np.testing.assert_allclose(along_first.sum(axis=0), np.ones(6))


def test_log_softmax_is_stable_and_is_the_log_of_softmax():
    x = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    out = np.asarray(ppto.log_softmax(x))
    assert np.all(np.isfinite(out[:, :2]))
    np.testing.assert_allclose(out[0, :2], [0.0, -1000.0])
    np.testing.assert_allclose(np.exp(out[1]), np.asarray(ppto.softmax(x))[1])


def test_one_hot():
    out = ppto.one_hot(np.array([[0, 2], [1, 5]]), 3)
    assert out.dtype == np.float64 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(
        np.asarray(out), [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 0]]]
    )
    assert ppto.one_hot(np.array([1]), 2, dtype="int32").dtype == np.int32


# Second order: the backward rule itself, evaluated through ppto operators, is checked
# by the gradient checker (rules of the rules, and their dot-product identity).
# Pooling gradients depend on x only through which elements are maxima (or not at
# all), so they are differentiated with respect to dY alone.
SECOND_ORDER = [
    ("softmax", (2, 5), {"axis": -1}, (0, 1)),
    ("log_softmax", (3, 4), {"axis": 0}, (0, 1)),
    ("max_pool2d", (1, 2, 4, 4), {"kernel_size": 2, "layout": "nchw"}, (1,)),
    (
        "avg_pool2d",
        (1, 4, 4, 2),
        {"kernel_size": 3, "stride": 1, "layout": "nhwc"},
        (1,),
    ),
]


@pytest.mark.parametrize("name, shape, params, wrt", SECOND_ORDER)
def test_backward_rules_are_differentiable(name, shape, params, wrt):
    op = getattr(ppto, name)
    x = ppto.tensor(RNG.permutation(np.prod(shape)).reshape(shape) * 0.1)
    dY = ppto.tensor(RNG.standard_normal(op(x, **params).shape))
    rule = ppto.get_grad_rule(op)
    report = ppto.check_grad(lambda a, g: rule(a, **params)(g), x, dY, wrt=wrt)
    assert report.ok, str(report)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv2d_backward_rule_is_differentiable(layout):
    shape = (2, 2, 5, 5) if layout == "nchw" else (2, 5, 5, 2)
    x, w = RNG.standard_normal(shape), RNG.standard_normal((3, 2, 3, 3))
    params = {"stride": 2, "padding": 1, "layout": layout}
    dY = RNG.standard_normal(np.shape(ppto.conv2d(x, w, **params)))
    rule = ppto.get_grad_rule(ppto.conv2d)
    # The input's gradient is bilinear in (w, dY), the weights' in (x, dY).
    for part, wrt in ((0, (1, 2)), (1, (0, 2))):
        report = ppto.check_grad(
            lambda a, b, g: rule(a, b, **params)(g)[part], x, w, dY, wrt=wrt
        )
        assert report.ok, f"gradient {part}\n{report}"


def test_channel_mismatch_names_conv2d_the_layout_and_both_shapes():
    x, w = np.zeros((2, 5, 5, 2)), np.zeros((3, 2, 3, 3))
    with pytest.raises(ppto.ShapeError, match="conv2d") as caught:
        ppto.conv2d(x, w)
    assert "'nchw'" in str(caught.value) and "(2, 5, 5, 2)" in str(caught.value)
    with pytest.raises(ppto.ShapeError, match=r"\(3, 2, 3, 3\)"):
        ppto.conv2d(np.zeros((2, 3, 5, 5)), w)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ppto.conv2d(np.zeros((2, 2, 5)), np.zeros((3, 2, 3, 3))), "4-D"),
        (lambda: ppto.conv2d(np.zeros((1, 2, 2, 2)), np.zeros((1, 2, 3, 3))), "fit"),
        (lambda: ppto.conv2d(np.zeros((1, 2, 5, 5)), np.zeros((1, 2, 3))), "conv2d"),
        (lambda: ppto.max_pool2d(np.zeros((1, 1, 4, 4)), 2, layout="hwcn"), "layout"),
        (lambda: ppto.avg_pool2d(np.zeros((1, 1, 4, 4)), 2, stride=0), "stride"),
        (
            lambda: ppto.conv2d_backward_input(
                np.zeros((1, 3, 2, 2)), np.zeros((3, 2, 3, 3)), np.zeros((1, 2, 5, 5))
            ),
            "dY",
        ),
    ],
)
def test_bad_image_arguments_raise_shape_errors(call, message):
    with pytest.raises(ppto.ShapeError, match=message):
        call()


def test_a_gradient_comes_back_in_its_arguments_layout():
    """ppto.grad, value_and_grad and vjp's pullback: the gradient of an nhwc image
    is laid out nhwc and says so (it came back untagged: taken for nchw by the next
    operator it met)."""
    weights = RNG.standard_normal((3, 2, 3, 3))

    def energy(image):
        return np.sum(ppto.conv2d(image, weights, padding=1) ** 2)

    x = RNG.standard_normal((2, 5, 5, 2))
    expected = ppto.grad(energy)(ppto.tensor(to_nchw(x))).numpy()
    image = ppto.tensor(x, layout="nhwc")
    gradient = ppto.grad(energy)
    for dx in (gradient(image), gradient(image), ppto.value_and_grad(energy)(image)[1]):
        assert dx.layout == "nhwc"
        np.testing.assert_allclose(to_nchw(dx.numpy()), expected, rtol=1e-10)
    out, pullback = ppto.vjp(energy, image)
    (dx,) = pullback(1.0)
    assert dx.layout == "nhwc"
    np.testing.assert_allclose(to_nchw(dx.numpy()), expected, rtol=1e-10)


def test_a_hessian_vector_product_comes_back_in_its_arguments_layout():
    """jvp of ppto.grad (and value_and_grad): the gradient and its tangent of an
    nhwc image are nhwc, as the gradient ppto.grad hands back is (they came back
    untagged, taken for nchw by the next operator). Values against central
    differences of the gradient."""
    weights = RNG.standard_normal((3, 2, 3, 3))

    def energy(image, scale):
        return np.sum(ppto.conv2d(image, weights, padding=1) ** 3) * np.sum(scale**2)

    x, direction = RNG.standard_normal((2, 4, 4, 2)), RNG.standard_normal((2, 4, 4, 2))
    scale = np.array([0.5, -1.5])
    image = ppto.tensor(x, layout="nhwc")
    tangent = ppto.tensor(direction, layout="nhwc")
    gradient, step = ppto.grad(energy), 1e-6
    expected = (
        gradient(ppto.tensor(x + step * direction, layout="nhwc"), scale).numpy()
        - gradient(ppto.tensor(x - step * direction, layout="nhwc"), scale).numpy()
    ) / (2 * step)
    for function in (
        gradient,
        ppto.grad(energy, wrt=(0, 1)),
        ppto.value_and_grad(energy),
    ):
        value, pushed = ppto.jvp(function, (image, scale), (tangent, None))
        if function.with_value:
            value, pushed = value[1], pushed[1]
        if not function.single:
            assert value[1].layout is None and pushed[1].layout is None
            value, pushed = value[0], pushed[0]
        assert value.layout == "nhwc" and pushed.layout == "nhwc"
        np.testing.assert_allclose(pushed.numpy(), expected, rtol=1e-6)


def assert_vjp_and_jvp_outputs_are_nhwc(function, image, eager):
    """vjp's output and jvp's value and tangent of ``function`` at the nhwc
    ``image`` are tagged nhwc, with the eager result's shape and values; returns
    vjp's output."""
    out, _ = ppto.vjp(function, image)
    value, tangent = ppto.jvp(function, (image,), (np.ones(image.shape),))
    for result in (out, value, tangent):
        assert result.layout == "nhwc" and result.shape == eager.shape
    np.testing.assert_allclose(out.numpy(), eager.numpy(), rtol=1e-12)
    np.testing.assert_allclose(value.numpy(), eager.numpy(), rtol=1e-12)
    return out


def test_vjp_and_jvp_outputs_keep_the_layout_operators_give_them():
    """As on tensors, where ppto.conv2d(image) is nhwc for an nhwc image and an
    elementwise operator keeps it: vjp's and jvp's outputs said no layout, and the
    next operator took the nhwc array for nchw."""
    weights = RNG.standard_normal((3, 2, 3, 3))

    def block(image):
        return ppto.relu(ppto.conv2d(image, weights, padding=1)) * 2.0

    image = ppto.tensor(RNG.standard_normal((2, 5, 5, 2)), layout="nhwc")
    eager = block(image)
    assert eager.layout == "nhwc"
    assert_vjp_and_jvp_outputs_are_nhwc(block, image, eager)
    flat, _ = ppto.vjp(lambda image: ppto.reduce_sum(block(image), axis=(1, 2)), image)
    assert flat.layout is None  # (2-d: no image layout, as on tensors)


def test_vjp_and_jvp_tuple_outputs_keep_each_items_layout():
    """A function returning several values (features and their pooling): each of
    vjp's and jvp's outputs is laid out as on tensors (all came back untagged)."""
    weights = RNG.standard_normal((3, 2, 3, 3))

    def features_and_pooled(image):
        features = ppto.conv2d(image, weights, padding=1)
        return features, np.sum(features), ppto.max_pool2d(features, 2)

    image = ppto.tensor(RNG.standard_normal((2, 4, 4, 2)), layout="nhwc")
    eager = features_and_pooled(image)
    out, pullback = ppto.vjp(features_and_pooled, image)
    value, tangent = ppto.jvp(features_and_pooled, (image,), (np.ones(image.shape),))
    for results in (out, value, tangent):
        assert [r.layout for r in results] == ["nhwc", None, "nhwc"]
    for result, expected in zip(out + value, eager + eager):
        np.testing.assert_allclose(result.numpy(), expected.numpy(), rtol=1e-12)
    (dx,) = pullback(tuple(np.ones(r.shape) for r in out))
    assert dx.layout == "nhwc"


class _ConvBlock:
    def __init__(self, weights):
        self.weights = weights

    def forward(self, image):
        return ppto.relu(ppto.conv2d(image, self.weights, padding=1)) * 2.0


def test_vjp_and_jvp_outputs_through_a_helper_or_method_keep_the_layout():
    """A result a called function makes (return helper(image)), and so a bound
    method's (ppto.vjp(model.forward, image), differentiated through a wrapper
    calling it), takes the layout the callee's derivative found: it came back
    untagged and the next operator took the nhwc array for nchw."""
    block = _ConvBlock(RNG.standard_normal((3, 2, 3, 3)))

    def through_a_helper(image):
        return block.forward(image)

    image = ppto.tensor(RNG.standard_normal((2, 5, 5, 2)), layout="nhwc")
    eager = block.forward(image)
    assert eager.layout == "nhwc"
    for function in (block.forward, through_a_helper):
        out = assert_vjp_and_jvp_outputs_are_nhwc(function, image, eager)
        pooled = ppto.max_pool2d(out, 2).numpy()  # (read as nhwc)
        np.testing.assert_allclose(pooled, ppto.max_pool2d(eager, 2).numpy())


def convolved_then_scaled(x, v):
    features = ppto.conv2d(x, CONSTANT_WEIGHTS, padding=1)  # (x not differentiated)
    return np.sum(np.tanh(features * v))


CONSTANT_WEIGHTS = RNG.standard_normal((2, 3, 3, 3))


def test_an_image_operator_on_values_not_differentiated_takes_the_images_layout():
    """conv2d without layout= on an image ppto leaves as it is (the gradient is
    with respect to v only) raised 'layout must be nchw or nhwc, got None' from the
    generated code; it takes the image's layout as operators on tensors do."""
    from tests.test_checkpoint import central_differences

    x, v = RNG.standard_normal((1, 3, 4, 4)), np.array([0.7, -0.4])[:, None, None]
    expected = central_differences(convolved_then_scaled, (x, v), 1)
    for image in (x, ppto.tensor(x), ppto.tensor(to_nhwc(x), layout="nhwc")):
        if getattr(image, "layout", None) == "nhwc":
            scale = v.reshape(2)  # (channels last)
            gradient = ppto.grad(convolved_then_scaled, wrt=1)(image, scale).numpy()
            np.testing.assert_allclose(gradient, expected.reshape(2), rtol=1e-7)
        else:
            gradient = ppto.grad(convolved_then_scaled, wrt=1)(image, v).numpy()
            np.testing.assert_allclose(gradient, expected, rtol=1e-7)
