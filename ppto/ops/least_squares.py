"""Linear algebra: the pseudo-inverse and least squares of ``np.linalg`` (pinv of a
matrix or a stack of them, lstsq), as NumPy computes them from the singular value
decomposition, with their gradients and tangents, right where the matrix's rank
does not change (Golub and Pereyra 1973).
"""

import numpy as np

from ppto.errors import LinAlgError, ShapeError
from ppto.ops.decompositions import svd
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.rules import shape_helper
from ppto.ops.shape import expand_dims, matrix_transpose, zeros_like

# --- the pseudo-inverse -----------------------------------------------------------


@primitive("(Tensor[...,M,N]) -> Tensor[...,N,M]")
def pinv(xp, A, rcond=None, hermitian=False, rtol=None):
    """The Moore-Penrose pseudo-inverse of a matrix (of each in a stack), like
    np.linalg.pinv: from its singular values above ``rcond`` (else ``rtol``; else
    NumPy's 1e-15) times the largest (rtol=None reads as not given). Its
    derivative is taken where A's rank does not change (Golub and Pereyra 1973):
    at a matrix of lower rank, as the pseudo-inverse of that rank; a cutoff that
    drops a singular value that is not 0 is refused there (kept_values_checked)."""
    if hermitian:
        raise ShapeError(
            "ppto.pinv does not take hermitian=True: leave it out (the same "
            "pseudo-inverse, from the general decomposition)"
        )
    if rcond is not None and rtol is not None:
        raise ShapeError("ppto.pinv takes rcond or rtol, not both (as NumPy)")
    ratio = rcond if rcond is not None else rtol if rtol is not None else 1e-15
    U, s, Vh = xp.linalg.svd(A, full_matrices=False)
    cutoff = xp.asarray(ratio, dtype=s.dtype)[..., None] * xp.max(
        s, axis=-1, keepdims=True
    )
    large = s > cutoff
    inverse = xp.where(large, 1 / xp.where(large, s, 1), 0).astype(s.dtype)
    return xp.matmul(
        xp.swapaxes(Vh, -1, -2) * inverse[..., None, :], xp.swapaxes(U, -1, -2)
    )


# With X = pinv(A): dX = -X dA X + X X.T dA.T (I - A X) + (I - X A) dA.T X.T X, and
# its adjoint Ā = -X.T Ȳ X.T + (I - A X) Ȳ.T X X.T + X.T X Ȳ.T (I - X A).


@pinv.grad_rule
def _(A, rcond=None, hermitian=False, rtol=None, out=None):
    def backward(dY):
        if may_drop_values(A, pinv_ratio(rcond, rtol)):
            dY = kept_values_checked(dY, A, pinv_ratio(rcond, rtol), of="pinv")
        X, Xt, dYt = out, matrix_transpose(out), matrix_transpose(dY)
        left = dYt @ (X @ Xt)
        right = (Xt @ X) @ dYt
        return -(Xt @ dY @ Xt) + left - A @ (X @ left) + right - (right @ X) @ A

    return backward


@pinv.jvp_rule
def _(A, rcond=None, hermitian=False, rtol=None, out=None):
    def tangent(dA):
        if may_drop_values(A, pinv_ratio(rcond, rtol)):
            dA = kept_values_checked(dA, A, pinv_ratio(rcond, rtol), of="pinv")
        X, dAt = out, matrix_transpose(dA)
        left = (X @ matrix_transpose(X)) @ dAt
        right = dAt @ (matrix_transpose(X) @ X)
        return -(X @ dA @ X) + left - (left @ A) @ X + right - X @ (A @ right)

    return tangent


@shape_helper
def pinv_ratio(rcond, rtol):
    """The cutoff of pinv's singular values, as a ratio to the largest."""
    return rcond if rcond is not None else rtol if rtol is not None else 1e-15


@shape_helper
def may_drop_values(A, ratio) -> bool:
    """Whether a cutoff of ``ratio`` times A's largest singular value is above
    rounding, so that it may drop a singular value that is not 0 (then
    ``kept_values_checked`` looks at them where the derivative is taken)."""
    return bool(np.any(np.asarray(ratio) > _rounding_ratio(A)))


def _rounding_ratio(A) -> float:
    """Singular values below this ratio to the largest are 0 to rounding."""
    return 16 * max(np.shape(A)[-2:]) * float(np.finfo(A.dtype).eps)


@primitive("(Tensor[...], Tensor[...,M,N]) -> Tensor[...]")
def kept_values_checked(xp, D, A, ratio, of="pinv"):
    """D (a change of A or of its pseudo-inverse, or their adjoints) as it is, once
    A's singular values are checked where D is not all 0: the cutoff of ``ratio``
    times the largest may drop only values that are 0 to rounding. The derivative
    ppto takes (Golub and Pereyra's) is that of a matrix of the rank kept; past a
    dropped value that is not 0 it misses how the kept singular vectors turn
    towards the dropped ones, and this raises ``ppto.LinAlgError``."""
    if not xp.any(D != 0):
        return D
    s = xp.linalg.svd(A, compute_uv=False)
    largest = xp.max(s, axis=-1, keepdims=True)
    cutoff = xp.asarray(ratio, dtype=s.dtype)[..., None] * largest
    dropped = (s <= cutoff) & (s > _rounding_ratio(A) * largest)
    if xp.any(dropped):
        raise LinAlgError(
            f"ppto.{of}: the cutoff of the singular values ({ratio} times the "
            f"largest, {float(xp.max(largest)):.6g}) drops "
            f"{float(xp.max(xp.where(dropped, s, 0))):.6g}, which is not 0: the "
            "derivative ppto takes (Golub and Pereyra's) is that of a matrix of the "
            "rank kept, and past a dropped value that is not 0 it would miss how "
            "the kept singular vectors turn towards the dropped ones. Give a cutoff "
            "that drops only values that are 0 to rounding (NumPy's default), or "
            "build the truncated inverse from np.linalg.svd's factors"
        )
    return D


@kept_values_checked.grad_rule
def _(D, A, ratio, of="pinv"):
    def backward(dY):
        return dY, None

    return backward


@kept_values_checked.jvp_rule
def _(D, A, ratio, of="pinv"):
    def tangent(dD, dA):
        return dD

    return tangent


# --- least squares ----------------------------------------------------------------


@primitive("(Tensor[M,N], Tensor[...]) -> Tensor[...] tuple")
def lstsq(xp, a, b, rcond=None):
    """``(x, residuals, rank, s)`` like np.linalg.lstsq: x minimizes |b - a @ x|
    (the shortest such x), for b of shape (M,) or (M, K); residuals the squared
    distances left (for a of full column rank with M > N, else empty); rank a's
    rank (singular values above ``rcond`` times the largest; NumPy's default
    where None); s its singular values. All but the rank are differentiable."""
    check_least_squares(a, b)
    return tuple(xp.linalg.lstsq(a, b, rcond=least_squares_cutoff(a, rcond)))


lstsq.result_count = 4  # (NumPy's result is a plain tuple: no fields)


def check_least_squares(a, b) -> None:
    rows = np.shape(a)[0]
    if np.ndim(b) not in (1, 2) or np.shape(b)[0] != rows:
        raise ShapeError(
            f"ppto.lstsq: a right side of shape {tuple(np.shape(b))} for a matrix of "
            f"shape {tuple(np.shape(a))}: it must be ({rows},) or ({rows}, K) "
            "(np.linalg.lstsq takes no stacks)"
        )


@shape_helper
def least_squares_cutoff(a, rcond):
    """np.linalg.lstsq's rcond: where None, the machine precision times a's
    larger side."""
    if rcond is not None:
        return rcond
    return float(np.finfo(a.dtype).eps) * max(np.shape(a))


@shape_helper
def has_residuals(residuals) -> bool:
    """Whether lstsq gave residuals (a of full column rank, with more rows)."""
    return np.shape(residuals)[0] > 0


# x = pinv(a) b, so x's part is pinv's gradient (see pinv) with X̄ = x̄ b.T, and b̄ =
# X.T x̄; a residual |b - a x|² is a minimum over x, so only a and b move it: by
# -2 r x.T and 2 r (r = b - a x); the singular values' part is U diag(s̄) V.T.


@lstsq.grad_rule
def _(a, b, rcond=None, out=None):
    def backward(dYs):
        x, residuals, rank, s = out
        dx, dresiduals, drank, ds = dYs
        X = pinv(a, rcond=least_squares_cutoff(a, rcond))
        if b.ndim == 1:
            dX = expand_dims(dx, -1) * expand_dims(b, -2)
        else:
            dX = dx @ b.T
        if may_drop_values(a, least_squares_cutoff(a, rcond)):
            dX = kept_values_checked(dX, a, least_squares_cutoff(a, rcond), of="lstsq")
        db = X.T @ dx
        left = dX.T @ (X @ X.T)
        right = (X.T @ X) @ dX.T
        da = -(X.T @ dX @ X.T) + left - a @ (X @ left) + right - (right @ X) @ a
        U, s_again, Vh = svd(a, full_matrices=False)
        da = da + (U * ds) @ Vh
        if has_residuals(residuals):
            r = b - a @ x
            if b.ndim == 1:
                da = da - 2 * dresiduals[0] * expand_dims(r, -1) * expand_dims(x, -2)
                db = db + 2 * dresiduals[0] * r
            else:
                da = da - 2 * (r * dresiduals) @ x.T
                db = db + 2 * r * dresiduals
        return da, db

    return backward


@lstsq.jvp_rule
def _(a, b, rcond=None, out=None):
    def tangent(da, db):
        if may_drop_values(a, least_squares_cutoff(a, rcond)):
            da = kept_values_checked(da, a, least_squares_cutoff(a, rcond), of="lstsq")
        x, residuals, rank, s = out
        X = pinv(a, rcond=least_squares_cutoff(a, rcond))
        left = (X @ X.T) @ da.T
        right = da.T @ (X.T @ X)
        dX = -(X @ da @ X) + left - (left @ a) @ X + right - X @ (a @ right)
        dx = dX @ b + X @ db
        U, s_again, Vh = svd(a, full_matrices=False)
        # (s's zeros added: where a's tangent is zero, so is this sum, and the
        # generated code writes it as the number 0)
        ds = zeros_like(s) + reduce_sum(U * (da @ Vh.T), -2)
        dresiduals = zeros_like(residuals)
        if has_residuals(residuals):
            r = b - a @ x
            dresiduals = reduce_sum(2 * r * (db - da @ x), 0)
            if b.ndim == 1:
                dresiduals = expand_dims(dresiduals, 0)
        return dx, dresiduals, zeros_like(rank), ds

    return tangent
