"""The statistics operators beyond the operator table's rows: values against NumPy
for every quantile method, the subgradient picked at ties, NaN entries (all-NaN
slices included) and the refusals."""

import warnings

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

METHODS = [
    "linear",
    "lower",
    "higher",
    "nearest",
    "midpoint",
    "hazen",
    "weibull",
    "median_unbiased",
    "normal_unbiased",
    "interpolated_inverted_cdf",
]
X = np.random.default_rng(5).permutation(30).reshape(5, 6) * 0.5 - 7.0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("q", [0.0, 0.13, 0.5, 0.8, 1.0, [0.25, 0.5, 0.99]])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_quantiles_and_their_weights_match_numpy(method, q, axis):
    expected = np.quantile(X, q, axis=axis, method=method)
    tensor = ppto.tensor(X)
    np.testing.assert_allclose(
        np.quantile(tensor, q, axis=axis, method=method).numpy(), expected
    )
    np.testing.assert_allclose(
        ppto.percentile(tensor, np.multiply(q, 100), axis, method=method).numpy(),
        np.percentile(X, np.multiply(q, 100), axis=axis, method=method),
    )
    # the gradient's weights: the quantile is their sum with x over axis
    weights = ppto._OPERATORS["quantile_weights"](tensor, q, axis, method).numpy()
    assert weights.shape == np.shape(q) + X.shape
    reduced = (0, 1) if axis is None or axis == (0, 1) else (axis % 2,)
    summed = np.sum(weights * X, axis=tuple(np.ndim(q) + a for a in reduced))
    np.testing.assert_allclose(summed, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median_matches_numpy(axis, keepdims):
    expected = np.median(X, axis=axis, keepdims=keepdims)
    got = np.median(ppto.tensor(X), axis=axis, keepdims=keepdims).numpy()
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape


def test_numpys_keyword_names_and_positional_order():
    tensor = ppto.tensor(X)
    np.testing.assert_allclose(
        np.quantile(a=tensor, q=0.3, axis=1, keepdims=True).numpy(),
        np.quantile(X, 0.3, 1, keepdims=True),
    )
    np.testing.assert_allclose(
        np.percentile(tensor, 30, 0, method="lower").numpy(),
        np.percentile(X, 30, 0, method="lower"),
    )
    np.testing.assert_allclose(ppto.median(tensor, 1).numpy(), np.median(X, 1))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nan_skipping_quantiles_and_their_weights_match_numpy(method, axis):
    x = X.copy()
    x[0, 1] = x[2, 3] = x[2, 0] = x[4, 5] = np.nan
    x[3, :] = np.nan  # (an all-NaN row: NaN, and no weight anywhere)
    for q in (0.0, 0.3, 1.0, [0.1, 0.5, 0.9]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanquantile(x, q, axis=axis, method=method)
            got = np.nanquantile(ppto.tensor(x), q, axis=axis, method=method)
        np.testing.assert_allclose(got.numpy(), expected)
        weights = ppto._OPERATORS["quantile_weights"](
            x, q, axis, method, skip_nan=True
        ).numpy()
        assert not np.any(weights[..., np.isnan(x)])
        reduced = (0, 1) if axis is None else (axis,)
        summed = np.sum(
            weights * np.nan_to_num(x), axis=tuple(np.ndim(q) + a for a in reduced)
        )
        np.testing.assert_allclose(summed, np.nan_to_num(expected), atol=1e-12)


def skip_missing_order_statistics(x):
    rows = np.nanmedian(x, axis=1) * np.array([1.0, -2.0, 0.5, 3.0, 1.5])
    columns = np.nanquantile(x, [0.2, 0.7], axis=0)[:, [0, 2]]
    return np.nansum(rows) + np.nanpercentile(x, 30) + np.sum(columns**2)


def test_nan_skipping_order_statistics_against_central_differences():
    x = X.copy()
    x[0, 1] = x[2, 3] = x[2, 0] = x[4, 5] = np.nan
    x[3, :] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gradient = ppto.grad(skip_missing_order_statistics)(x)
        expected = central_differences(skip_missing_order_statistics, [x], 0)
    assert_gradient(gradient, expected, "nanmedian, nanquantile, nanpercentile")
    np.testing.assert_array_equal(gradient.numpy()[np.isnan(x)], 0.0)


def tied_median(x):
    return np.median(x) * 2.0 + np.quantile(x, 0.5, method="lower")


def test_tied_order_statistics_take_the_place_a_stable_sort_gives_them():
    # sorted, x is [0, 1, 3, 3, 5]: the median is the third, and of the tied 3s
    # the first (index 1) sorts third; the gradient goes to it alone (a valid
    # subgradient: the median moves with it to the right of the tie)
    x = np.array([1.0, 3.0, 0.0, 3.0, 5.0])
    gradient = ppto.grad(tied_median)(x).numpy()
    np.testing.assert_array_equal(gradient, [0.0, 3.0, 0.0, 0.0, 0.0])
    # an even count interpolates between the two tied middle places: half each
    pair = np.array([2.0, 4.0, 2.0, 1.0])
    np.testing.assert_array_equal(
        ppto.grad(lambda a: ppto.median(a))(pair).numpy(), [0.5, 0.0, 0.5, 0.0]
    )


def test_tied_extrema_share_the_range_gradient_equally():
    x = np.array([[1.0, 4.0, 4.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    gradient = ppto.grad(lambda a: np.sum(np.ptp(a, axis=1) * np.array([1.0, 3.0])))
    np.testing.assert_array_equal(
        gradient(x).numpy(), [[0.0, 0.5, 0.5, -1.0], [0.0, 0.0, 0.0, 0.0]]
    )


def skip_missing(x):
    rows = np.nanmean(x, axis=1)
    return np.nansum(rows * rows) + np.nanstd(x) + np.nansum(np.nanmax(x, axis=1))


def test_nan_entries_and_all_nan_slices_take_no_gradient():
    # row 1 is all NaN: its mean and maximum are NaN, which np.nansum skips
    x = np.array([[0.5, np.nan, -1.2], [np.nan] * 3, [2.0, 0.3, np.nan]])
    with np.errstate(invalid="ignore", divide="ignore"):
        with pytest.warns(RuntimeWarning):
            value, gradient = ppto.value_and_grad(skip_missing)(x)
            expected = central_differences(skip_missing, [x], 0)
    assert np.isfinite(float(value))
    assert_gradient(gradient, expected, "NaN-skipping statistics")
    np.testing.assert_array_equal(gradient.numpy()[np.isnan(x)], 0.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: np.quantile(x, 1.5), r"q must be in the range \[0, 1\]"),
        (lambda x: np.percentile(x, [50, 101]), r"in the range \[0, 100\]"),
        (lambda x: np.quantile(x, 0.5, method="inverted_cdf"), "inverted-CDF"),
        (lambda x: np.median(x, 0, np.zeros(6)), "at most 2 positional arguments"),
        (lambda x: np.quantile(x, 0.5, weights=np.ones(5)), "'weights'"),
    ],
)
def test_refusals_name_the_operator_and_the_argument(call, message):
    with pytest.raises(ppto.PptoError, match=message):
        call(ppto.tensor(X))


def quantile_over_a_missing_axis(x):
    return np.sum(np.quantile(x, 0.5, axis=2))


def test_an_axis_out_of_bounds_is_a_shape_error_naming_the_statement():
    with pytest.raises(ppto.ShapeError, match="axis 2 is out of bounds.*quantile"):
        ppto.grad(quantile_over_a_missing_axis)(X)


@pytest.mark.parametrize(
    "shape, keywords",
    [
        ((3, 6), {}),
        ((6, 3), {"rowvar": False}),
        ((7,), {}),
        ((1, 5), {"bias": True}),
        ((3, 6), {"ddof": 2}),
        ((2, 5), {"bias": True, "ddof": 3}),
    ],
)
def test_covariance_and_correlation_match_numpy(shape, keywords):
    x = np.random.default_rng(11).standard_normal(shape)
    got = np.cov(ppto.tensor(x), **keywords).numpy()
    np.testing.assert_allclose(got, np.cov(x, **keywords), rtol=1e-12)
    assert got.shape == np.cov(x, **keywords).shape
    rowvar = keywords.get("rowvar", True)
    np.testing.assert_allclose(
        np.corrcoef(ppto.tensor(x), rowvar=rowvar).numpy(),
        np.corrcoef(x, rowvar=rowvar),
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "shapes, keywords",
    [
        (((2, 5), (5,)), {}),
        (((5, 2), (5, 3)), {"rowvar": False}),
        (((6, 2), (1, 6)), {"rowvar": False}),  # (y of one row: not transposed)
        (((4,), (4,)), {"ddof": 0}),
    ],
)
def test_covariance_and_correlation_of_a_second_array(shapes, keywords):
    rng = np.random.default_rng(12)
    m, y = (rng.standard_normal(shape) for shape in shapes)
    for name in ("cov", "corrcoef"):
        given = keywords if name == "cov" else {"rowvar": keywords.get("rowvar", True)}
        got = getattr(np, name)(ppto.tensor(m), ppto.tensor(y), **given).numpy()
        np.testing.assert_allclose(got, getattr(np, name)(m, y, **given), rtol=1e-12)
        op = getattr(ppto, name)
        report = ppto.check_grad(
            lambda a, b: op(a, b, **given), ppto.tensor(m), ppto.tensor(y), wrt=(0, 1)
        )
        assert report.ok, str(report)


def correlation_with_targets(features, targets):
    return np.sum(np.corrcoef(features, targets, rowvar=False)[:3, 3:] ** 2)


def test_a_correlation_differentiated_in_one_array_only():
    # the other array's tangent is zero: the tangent of the rows joined was 0
    # (read as zero after the rule's branch) or a concat of wrong shapes
    rng = np.random.default_rng(13)
    features, targets = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    direction = rng.standard_normal(targets.shape)
    _, tangent = ppto.jvp(
        lambda t: correlation_with_targets(features, t), (targets,), (direction,)
    )
    expected = central_differences(
        lambda t: correlation_with_targets(features, t), [targets], 0
    )
    assert float(tangent) == pytest.approx(float(np.sum(expected * direction)))


def test_covariance_refuses_arrays_of_more_than_two_axes():
    with pytest.raises(ppto.ShapeError, match="1-D or 2-D"):
        np.cov(ppto.tensor(np.ones((2, 3, 4))))
    with pytest.raises(ppto.ShapeError, match="1-D or 2-D"):
        np.corrcoef(ppto.tensor(np.ones((2, 3))), np.ones((2, 3, 1)))
