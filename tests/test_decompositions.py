"""np.linalg's decompositions (eigh, eigvalsh, svd, svdvals, qr) beyond the operator
table and the corpus: NumPy's results and fields on tensors, the derivatives at
repeated eigenvalues and singular values (defined for what does not depend on
the basis of their space, refused otherwise), and the refusals of what is not
differentiable or not taken."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences

RNG = np.random.default_rng(5)


def test_results_and_fields_are_numpys_on_tensors():
    A = RNG.standard_normal((4, 3))
    S = A.T @ A
    w, V = np.linalg.eigh(ppto.tensor(S), UPLO="U")
    result = np.linalg.eigh(ppto.tensor(S))
    np.testing.assert_allclose(result.eigenvalues.numpy(), np.linalg.eigvalsh(S))
    np.testing.assert_allclose(np.abs(result.eigenvectors.numpy()), np.abs(V.numpy()))
    np.testing.assert_allclose(w.numpy(), np.linalg.eigh(S, UPLO="U").eigenvalues)
    U, s, Vh = np.linalg.svd(ppto.tensor(A), full_matrices=False)
    np.testing.assert_allclose((U.numpy() * s.numpy()) @ Vh.numpy(), A, atol=1e-12)
    assert np.linalg.svd(ppto.tensor(A)).U.shape == (4, 4)  # (NumPy's default)
    values = np.linalg.svd(ppto.tensor(A), compute_uv=False)
    np.testing.assert_allclose(values.numpy(), np.linalg.svd(A, compute_uv=False))
    np.testing.assert_allclose(np.linalg.svdvals(ppto.tensor(A)).numpy(), values)
    Q, R = np.linalg.qr(ppto.tensor(A))
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), A, atol=1e-12)
    np.testing.assert_allclose(np.linalg.qr(ppto.tensor(A)).R.numpy(), R.numpy())
    np.testing.assert_allclose(
        np.linalg.eigvalsh(ppto.tensor(S), UPLO="U").numpy(), np.linalg.eigvalsh(S)
    )


def top_eigenvector(A):
    # the eigenvector of the one eigenvalue that does not repeat, and all three
    # eigenvalues: defined where the other two repeat
    w, V = np.linalg.eigh(A)
    return np.sum(np.outer(V[:, 2], V[:, 2]) * np.cos(A)) + np.sum(w**3)


def eigenspace_projection(A):
    # the projection onto the space of the repeated eigenvalue: it has a
    # derivative, but V.T V̄ does not tell it from V diag(w) V.T's, which is refused
    w, V = np.linalg.eigh(A)
    return np.sum((V[:, :2] @ V[:, :2].T) * np.cos(A))


def first_eigenvector(A):
    w, V = np.linalg.eigh(A)
    return np.sum(V[:, 0] ** 2 * np.arange(1.0, 4.0))


def top_singular_pair(A):
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    return np.sum(np.sin(s[0] * np.outer(U[:, 0], Vh[0]))) + np.sum(s**3)


def rebuilt(A):
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    return np.sum(np.sin((U * s) @ Vh))


ROTATION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
REPEATED_EIGENVALUE = ROTATION @ np.diag([1.0, 1.0, 3.0]) @ ROTATION.T
REPEATED_SINGULAR_VALUE = np.diag([3.0, 1.0, 1.0]) @ ROTATION
RANK_ONE = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])  # (tall, a singular value 0)


@pytest.mark.parametrize(
    "function, point",
    [
        (top_eigenvector, REPEATED_EIGENVALUE),
        (top_singular_pair, REPEATED_SINGULAR_VALUE),
    ],
)
def test_vectors_of_values_that_do_not_repeat_at_a_repeated_value(function, point):
    gradient = np.asarray(ppto.grad(function)(point))
    expected = central_differences(function, (point,), 0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-7)
    # (forward mode refuses: a tangent has no cotangent to say what is read)
    direction = RNG.standard_normal(point.shape)
    with pytest.raises(ppto.LinAlgError, match="not defined"):
        ppto.jvp(function, (point,), (direction,))


def eigenvalues_alone(A):
    w, V = np.linalg.eigh(A)
    return np.sum(np.sin(w))


def test_eigenvalues_alone_at_a_repeated_eigenvalue():
    point = REPEATED_EIGENVALUE
    np.testing.assert_allclose(
        np.asarray(ppto.grad(eigenvalues_alone)(point)),
        central_differences(eigenvalues_alone, (point,), 0),
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.parametrize(
    "function, point, message",
    [
        (first_eigenvector, REPEATED_EIGENVALUE, "eigenvectors of a repeated"),
        (eigenspace_projection, REPEATED_EIGENVALUE, "eigenvectors of a repeated"),
        (rebuilt, REPEATED_SINGULAR_VALUE, "of a repeated or zero singular"),
        (rebuilt, RANK_ONE, "of a repeated or zero singular"),
        # (a zero singular value of a non-square matrix: its vectors' part off
        # the other side's span is divided by it wherever any vector is read)
        (top_singular_pair, RANK_ONE, "of a repeated or zero singular"),
    ],
)
def test_derivatives_through_a_repeated_values_vectors_are_refused(
    function, point, message
):
    with pytest.raises(ppto.LinAlgError, match=message):
        ppto.grad(function)(point)
    with pytest.raises(ppto.LinAlgError, match=message):
        ppto.jvp(function, (point,), (np.ones_like(point),))
    assert np.isfinite(float(function(point)))  # (only the derivative is refused)


def square_factors(A):
    U, s, Vh = np.linalg.svd(A)
    return np.sum(U**2 * np.arange(A.shape[0]))


def upper_factor(A):
    return np.sum(np.linalg.qr(A)[1] ** 3)  # (mode='r' as NumPy's default's R)


def wide_qr(A):
    Q, R = np.linalg.qr(A)
    return np.sum(R**2)


def test_refusals_name_the_operator_and_what_to_write():
    refused = [
        (lambda: ppto.eigh(np.ones((3, 2))), ppto.ShapeError, "N is 3 in one"),
        (lambda: ppto.eigvalsh(np.ones(3)), ppto.ShapeError, "at least 2 axes"),
        (lambda: ppto.eigh(np.eye(2), UPLO="X"), ppto.ShapeError, "UPLO must be"),
        (lambda: ppto.svd(np.ones(3)), ppto.ShapeError, "at least 2 axes"),
        (lambda: ppto.svdvals(np.ones(3)), ppto.ShapeError, "at least 2 axes"),
        (lambda: ppto.qr(np.ones(3)), ppto.ShapeError, "at least 2 axes"),
        (lambda: ppto.svd(np.eye(2), hermitian=True), ppto.ShapeError, "hermitian"),
        (lambda: ppto.qr(np.eye(2), mode="complete"), ppto.ShapeError, "'reduced'"),
        (
            lambda: ppto.grad(square_factors)(np.ones((3, 2)) + np.eye(3, 2)),
            ppto.LinAlgError,
            "full_matrices=False",
        ),
        (
            lambda: ppto.grad(wide_qr)(RNG.standard_normal((2, 3))),
            ppto.LinAlgError,
            "2x3",
        ),
    ]
    for call, error, message in refused:
        with pytest.raises(error, match=message):
            call()
    tall = RNG.standard_normal((4, 3))
    np.testing.assert_allclose(
        np.asarray(ppto.grad(upper_factor)(tall)),
        central_differences(upper_factor, (tall,), 0),
        rtol=1e-6,
        atol=1e-8,
    )
    square = RNG.standard_normal((3, 3))  # (full_matrices=True of a square matrix)
    np.testing.assert_allclose(
        np.asarray(ppto.grad(square_factors)(square)),
        central_differences(square_factors, (square,), 0),
        rtol=1e-6,
        atol=1e-8,
    )


def test_pinv_matrix_power_and_multi_dot_are_numpys_on_tensors():
    tall, square = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 3))
    np.testing.assert_allclose(
        np.linalg.pinv(ppto.tensor(tall)).numpy(), np.linalg.pinv(tall), atol=1e-12
    )
    low_rank = tall[:, :2] @ RNG.standard_normal((2, 3))  # (its cutoff drops one)
    np.testing.assert_allclose(
        np.linalg.pinv(ppto.tensor(low_rank), rcond=1e-8).numpy(),
        np.linalg.pinv(low_rank, rcond=1e-8),
        atol=1e-12,
    )
    for n in (-3, 0, 1, 4):
        np.testing.assert_allclose(
            np.linalg.matrix_power(ppto.tensor(square), n).numpy(),
            np.linalg.matrix_power(square, n),
            rtol=1e-10,
        )
    vectors = (RNG.standard_normal(5), RNG.standard_normal(3))
    arrays = [vectors[0], tall, square, vectors[1]]
    np.testing.assert_allclose(
        np.linalg.multi_dot([ppto.tensor(a) for a in arrays]).numpy(),
        np.linalg.multi_dot(arrays),
    )


def test_least_squares_results_are_numpys():
    a, low_rank = RNG.standard_normal((5, 3)), np.outer(np.arange(1.0, 6.0), [1, 2, 3])
    for matrix, b in ((a, RNG.standard_normal(5)), (low_rank, np.ones((5, 2)))):
        expected = np.linalg.lstsq(matrix, b)
        results = np.linalg.lstsq(ppto.tensor(matrix), b)
        for result, want in zip(results, expected):
            np.testing.assert_allclose(np.asarray(result), want, atol=1e-12)


def low_rank_pinv(F, G):
    # the pseudo-inverse of a matrix of rank 2 (a product of factors): where the
    # rank does not change, pinv is differentiable
    return np.sum(np.linalg.pinv(F @ G) * np.cos(G.T @ F.T))


def test_pinv_of_a_matrix_of_lower_rank():
    F, G = RNG.standard_normal((4, 2)), RNG.standard_normal((2, 3))
    for position in (0, 1):
        np.testing.assert_allclose(
            np.asarray(ppto.grad(low_rank_pinv, wrt=position)(F, G)),
            central_differences(low_rank_pinv, (F, G), position),
            rtol=1e-6,
            atol=1e-8,
        )


def _with_singular_values(values, rows=5):
    """A matrix of ``rows`` rows with these singular values."""
    left, _ = np.linalg.qr(RNG.standard_normal((rows, len(values))))
    right, _ = np.linalg.qr(RNG.standard_normal((len(values), len(values))))
    return (left * values) @ right.T


def pinv_cut_at_a_tenth(A):
    return np.sum(np.linalg.pinv(A, rcond=0.1) * np.arange(A.size).reshape(A.T.shape))


def lstsq_cut_at_a_tenth(A, b):
    return np.sum(np.linalg.lstsq(A, b, rcond=0.1)[0] * np.arange(1.0, 4.0))


def test_a_cutoff_that_drops_a_singular_value_that_is_not_zero_is_refused():
    """pinv(A, rcond=0.1) of singular values 3, 1 and 0.05 drops 0.05: the
    derivative ppto takes is that of a matrix of the rank kept (Golub and
    Pereyra's), which misses how the kept singular vectors turn towards the
    dropped one (0.035 off central differences here, and the tangent as much):
    refused where it is taken, not returned."""
    A, b = _with_singular_values([3.0, 1.0, 0.05]), RNG.standard_normal(5)
    calls = [
        lambda: ppto.grad(pinv_cut_at_a_tenth)(A),
        lambda: ppto.jvp(pinv_cut_at_a_tenth, (A,), (np.ones_like(A),)),
        lambda: ppto.grad(lstsq_cut_at_a_tenth)(A, b),
        lambda: ppto.jvp(lstsq_cut_at_a_tenth, (A, b), (np.ones_like(A), 0 * b)),
    ]
    for call in calls:
        with pytest.raises(ppto.LinAlgError, match="drops 0.05, which is not 0"):
            call()
    # what it drops is 0 to rounding (a matrix of rank 2): its derivative, as before
    F = _with_singular_values([3.0, 1.0])  # (F @ G: singular values 3, 1 and 0)
    G = np.linalg.qr(RNG.standard_normal((3, 2)))[0].T
    for position in (0, 1):
        np.testing.assert_allclose(
            np.asarray(ppto.grad(low_rank_pinv_cut_at_a_tenth, wrt=position)(F, G)),
            central_differences(low_rank_pinv_cut_at_a_tenth, (F, G), position),
            rtol=1e-6,
            atol=1e-8,
        )


def low_rank_pinv_cut_at_a_tenth(F, G):
    return pinv_cut_at_a_tenth(F @ G)


def test_products_refuse_what_numpy_refuses():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    refused = [
        (lambda: ppto.matrix_power(np.eye(2), 1.5), ppto.ShapeError, "whole number"),
        (lambda: ppto.matrix_power(np.ones((2, 3)), 2), ppto.ShapeError, "N is"),
        (
            lambda: ppto.matrix_power(singular, -1),
            ppto.LinAlgError,
            "invertible for a negative power",
        ),
        (lambda: ppto.multi_dot([np.eye(2)]), ppto.ShapeError, "two or more"),
        (
            lambda: ppto.multi_dot([np.eye(2), np.ones(2), np.eye(2)]),
            ppto.ShapeError,
            "first and the last of which may be vectors",
        ),
        (
            lambda: ppto.multi_dot([np.ones((2, 2, 2)), np.eye(2)]),
            ppto.ShapeError,
            "a @ b @ c",
        ),
        (lambda: ppto.pinv(np.eye(2), hermitian=True), ppto.ShapeError, "hermitian"),
        (lambda: ppto.pinv(np.eye(2), 1e-3, rtol=1e-3), ppto.ShapeError, "not both"),
        (lambda: ppto.lstsq(np.eye(3), np.ones(2)), ppto.ShapeError, r"\(3,\) or"),
        (
            lambda: ppto.lstsq(np.eye(3), np.ones((3, 1, 1))),
            ppto.ShapeError,
            "no stacks",
        ),
    ]
    for call, error, message in refused:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize(
    "shape, ord, axis",
    [((5,), o, None) for o in (None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1.5)]
    + [((3, 4), o, None) for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)]
    + [((2, 3, 4), o, (2, 0)) for o in ("nuc", 2, -1, np.inf)],
)
def test_every_order_of_numpys_norm(shape, ord, axis):
    x = RNG.standard_normal(shape)
    if ord == 0:
        x.flat[0] = 0.0  # (a zero element not to count)
    expected = np.linalg.norm(x, ord, axis)
    np.testing.assert_allclose(np.linalg.norm(ppto.tensor(x), ord, axis), expected)


def projections(A, x):
    # the decompositions' parts have known ranks: dot's rule needs no test of them
    w, V = np.linalg.eigh(A @ A.T)
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    Q, R = np.linalg.qr(A)
    return (
        np.sum((V[:, -1] @ x) ** 2)
        + np.sum(U[:, 0] * (Vh[0] @ A.T))
        + np.sum(Q @ R[:, 0])
        + np.sum(np.linalg.eigvalsh(A.T @ A) @ s)
    )


def test_the_parts_of_decompositions_have_known_ranks():
    A, x = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    text = ppto.show_grad(projections, A, x, wrt=(0, 1), file=None)
    assert "ndim" not in text
    for position in (0, 1):
        np.testing.assert_allclose(
            np.asarray(ppto.grad(projections, wrt=position)(A, x)),
            central_differences(projections, (A, x), position),
            rtol=1e-6,
            atol=1e-8,
        )


def values_by_position(A):
    return np.sum(np.linalg.svd(A, False, False) ** 2)  # (compute_uv, by position)


def values_if(A):
    s = np.linalg.svd(A, compute_uv=np.sum(A) > 100.0)
    return np.sum(s)


def test_svd_returns_one_array_only_where_compute_uv_is_written_false():
    A = RNG.standard_normal((4, 3))
    np.testing.assert_allclose(
        np.asarray(ppto.grad(values_by_position)(A)),
        central_differences(values_by_position, (A,), 0),
        rtol=1e-6,
        atol=1e-8,
    )
    with pytest.raises(ppto.TransformError, match="compute_uv is not written out"):
        ppto.grad(values_if)(A)


@pytest.mark.parametrize(
    "x, ord",
    [
        (np.array([-1.5, 0.0, 2.0]), 1),
        (np.array([-1.5, 0.0, 2.0]), -np.inf),
        (np.array([[0.0, 1.0], [4.0, -2.0]]), 1),
        (np.array([[0.0, 4.0], [1.0, -2.0]]), np.inf),
    ],
    ids=["vector 1", "vector -inf", "matrix 1", "matrix inf"],
)
def test_a_norm_of_abs_values_has_a_zero_derivative_at_a_zero_element(x, ord):
    # as abs's: sign(x), 0 at 0 (it was +1 there), which central differences give
    def norm(x):
        return np.linalg.norm(x, ord)

    expected = central_differences(norm, (x,), 0)
    assert np.all(expected[x == 0.0] == 0.0)
    found = np.asarray(ppto.grad(norm)(x))
    np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-9)
    tangent = np.ones_like(x)
    _, pushed = ppto.jvp(norm, (x,), (tangent,))
    assert float(pushed) == pytest.approx(float(np.sum(expected)), rel=1e-6)
