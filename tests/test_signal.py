"""np.convolve and np.correlate for every pair of lengths and mode: values against
NumPy (whose 'same' window of a correlation with the longer array second sits one
place later) and gradients against central differences; the refusals."""

import numpy as np
import pytest

import ppto

PAIRS = [(n, m) for n in range(1, 6) for m in range(1, 6)]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n, m", PAIRS)
def test_values_and_gradients_for_every_length_and_mode(name, mode, n, m):
    rng = np.random.default_rng(n * 10 + m)
    a, v = rng.standard_normal(n), rng.standard_normal(m)
    op = getattr(ppto, name)
    result = getattr(np, name)(ppto.tensor(a), v, mode=mode)
    np.testing.assert_allclose(result.numpy(), getattr(np, name)(a, v, mode=mode))
    report = ppto.check_grad(
        lambda a, v: op(a, v, mode), ppto.tensor(a), ppto.tensor(v), wrt=(0, 1)
    )
    assert report.ok, str(report)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: np.convolve(x, x, mode="circular"), ppto.PptoError, "'circular'"),
        (lambda x: np.correlate(x, x[:0]), ppto.PptoError, "empty array"),
        (
            lambda x: np.convolve(ppto.reshape(x, (2, 2)), x),
            ppto.ShapeError,
            r"convolve.*\(Tensor\[N\], Tensor\[M\]\)",
        ),
    ],
)
def test_refusals_name_the_operator(call, error, message):
    with pytest.raises(error, match=message):
        call(ppto.tensor(np.ones(4)))


def test_interp_matches_numpy_and_reads_a_knot_from_the_segment_it_starts():
    knots, heights = np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 2.0])
    x = np.array([-1.0, 0.0, 0.5, 1.0, 3.0, 4.0])
    for bounds in ({}, {"left": -5.0}, {"right": 7.0}):
        np.testing.assert_array_equal(
            np.interp(ppto.tensor(x), knots, heights, **bounds).numpy(),
            np.interp(x, knots, heights, **bounds),
        )
    # slopes 2 on [0, 1), -0.5 on [1, 3]; constant beyond (a one-sided
    # derivative at each knot: the segment starting there, the last one at 3)
    slopes = ppto.grad(lambda a: np.sum(np.interp(a, knots, heights)))(x)
    np.testing.assert_array_equal(slopes.numpy(), [0.0, 2.0, 2.0, -0.5, -0.5, 0.0])
    # fp's end values serve beyond the knots unless left= or right= replace them
    weights = ppto.grad(lambda h: np.sum(np.interp(x, knots, h, left=-5.0)), wrt=0)
    np.testing.assert_array_equal(weights(heights).numpy(), [1.5, 1.5, 2.0])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: np.interp(x, [0.0, 1.0], [1.0, 2.0], period=2.0), "period="),
        (lambda x: np.interp(x, [0.0], [1.0]), "at least 2 points"),
        (lambda x: np.interp(x, [0.0, 1.0, 2.0], [1.0, 2.0]), "Tensor\\[N\\]"),
    ],
)
def test_interp_refusals_say_what_to_write(call, message):
    with pytest.raises(ppto.PptoError, match=message):
        call(ppto.tensor(np.ones(4)))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid_matches_numpy(indexing, sparse):
    x, y, z = np.arange(3.0), np.arange(4.0) + 10, np.array([[1.5, 2.5]])
    grids = np.meshgrid(
        ppto.tensor(x), y, ppto.tensor(z), indexing=indexing, sparse=sparse
    )
    expected = np.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
    assert isinstance(grids, tuple) and len(grids) == 3
    for grid, want in zip(grids, expected):
        np.testing.assert_array_equal(grid.numpy(), want)


def grids_of_unpacked(x, y):
    points = (x, y)
    return np.sum(np.meshgrid(*points)[0])


def test_meshgrid_refusals_say_what_to_write():
    with pytest.raises(ppto.PptoError, match="indexing='xy' or 'ij'"):
        np.meshgrid(ppto.tensor(np.ones(2)), np.ones(3), indexing="ji")
    with pytest.raises(ppto.TransformError, match="one by one"):
        ppto.grad(grids_of_unpacked)(np.ones(2), np.ones(3))
