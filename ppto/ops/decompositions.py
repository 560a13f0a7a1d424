"""Linear algebra: the decompositions of ``np.linalg`` (eigh, eigvalsh, svd, svdvals,
qr) of a matrix or a stack of them, as NumPy computes them, with their gradients and
tangents (the standard matrix-calculus results: Giles 2008; Townsend 2016 for the
SVD). Where the derivative through eigenvectors or singular vectors divides by a
gap of 0 (a repeated value) or by a singular value of 0, it raises
``ppto.LinAlgError`` naming the operator unless the function reads none of the
vectors concerned: never a silently wrong value.
"""

from collections import namedtuple

import numpy as np

from ppto.errors import LinAlgError, ShapeError
from ppto.ops.linalg import halved_lower, solve, tril, triu
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.rules import shape_helper
from ppto.ops.shape import expand_dims, matrix_transpose

# --- the shared quotients by a spectrum's gaps and values -------------------------
#
# A vector's derivative divides by the gaps between its value and the others (and,
# for a non-square matrix's singular vectors, by the value itself). Where a gap or
# a value is 0 the quotient has a limit only for some functions, which the numbers
# at hand cannot tell apart (the turn within a repeated value's space is 0 for the
# projection onto that space, not for V diag(w) V.T), so ``used`` says which vectors
# the function reads (the sum of squares of each one's cotangent or tangent): a
# quotient by a gap of 0 between two vectors it reads, or by a value of 0 when it
# reads any vector, raises ppto.LinAlgError. A vector whose cotangent is exactly 0
# is one the function does not read, so the eigenvalues alone, or the vectors of
# values that do not repeat, are differentiated at a repeated value.

REPEATED = {
    "eigh": "eigenvectors of a repeated eigenvalue",
    "svd": "singular vectors of a repeated or zero singular value",
}


def refuse_undefined(of: str) -> LinAlgError:
    return LinAlgError(
        f"ppto.{of}: the derivative of the {REPEATED[of]} is not defined: it "
        "depends on which basis of their space was picked. Differentiate the "
        "values alone (np.linalg.eigvalsh, np.linalg.svdvals), or perturb the "
        "matrix (a ridge, A + 1e-6 * np.eye(n), moves values that repeat at 0)"
    )


def _tolerance(xp, w):
    """What counts as 0 in differences of w's values (rounding, per matrix)."""
    eps = float(np.finfo(w.dtype).eps)
    return 16 * w.shape[-1] * eps * xp.max(xp.abs(w), axis=-1, keepdims=True)


def _read(xp, used):
    """Which vectors the function reads (``used`` above rounding), and whether it
    reads any (per matrix)."""
    eps = float(np.finfo(used.dtype).eps)
    peak = xp.max(used, axis=-1, keepdims=True)
    return used > eps * peak, peak > 0


@primitive("(Tensor[...,N,N], Tensor[...,N], Tensor[...,N]) -> Tensor[...,N,N]")
def divide_by_gaps(xp, K, w, used, of="eigh"):
    """K[..., i, j] / (w[..., j] - w[..., i]) off the diagonal, 0 on it: how the
    eigenvectors (singular vectors: w their squares) of a spectrum w turn. Where
    two values of w are equal (to rounding) the quotient is 0, or raises
    ``ppto.LinAlgError`` naming the operator ``of`` (see above)."""
    gaps = xp.expand_dims(w, -2) - xp.expand_dims(w, -1)
    size = w.shape[-1]
    tolerance = _tolerance(xp, w)
    tied = (xp.abs(gaps) <= tolerance[..., None]) & ~xp.eye(size, dtype=bool)
    if xp.any(tied):
        read, any_read = _read(xp, used)
        at_zero = (xp.abs(w) <= tolerance) & any_read
        needed = read | at_zero
        if xp.any(tied & (xp.expand_dims(needed, -1) | xp.expand_dims(needed, -2))):
            raise refuse_undefined(of)
    ignored = tied | xp.eye(size, dtype=bool)
    quotient = xp.where(ignored, 0.0, K) / xp.where(ignored, 1.0, gaps)
    return quotient.astype(K.dtype, copy=False)  # (a Python float never widens it)


@divide_by_gaps.grad_rule
def _(K, w, used, of="eigh", out=None):
    def backward(dY):
        # d out_ij = F_ij dK_ij - out_ij F_ij (dw_j - dw_i), F_ij = 1 / (w_j - w_i)
        turned = dY * divide_by_gaps(out, w, used, of=of)
        dw = reduce_sum(turned, -1) - reduce_sum(turned, -2)
        return divide_by_gaps(dY, w, used, of=of), dw, None

    return backward


@divide_by_gaps.jvp_rule
def _(K, w, used, of="eigh", out=None):
    def tangent(dK, dw, dused):
        moved = expand_dims(dw, -2) - expand_dims(dw, -1)
        quotient = divide_by_gaps(dK, w, used, of=of)
        return quotient - divide_by_gaps(out, w, used, of=of) * moved

    return tangent


@primitive("(Tensor[...,M,K], Tensor[...,K], Tensor[...,K]) -> Tensor[...,M,K]")
def divide_by_values(xp, X, s, used, of="svd"):
    """X's columns divided by the singular values s (X / s[..., None, :]): the
    part of a non-square matrix's singular vectors off the other side's span. A
    value 0 (to rounding) gives 0 where the function reads no vector, else raises
    ``ppto.LinAlgError`` naming the operator ``of`` (see above)."""
    vanishing = s <= _tolerance(xp, s)
    if xp.any(vanishing):
        _, any_read = _read(xp, used)
        if xp.any(vanishing & any_read):
            raise refuse_undefined(of)
    safe = xp.where(vanishing, 1.0, s)
    quotient = xp.where(
        xp.expand_dims(vanishing, -2), 0.0, X / xp.expand_dims(safe, -2)
    )
    return quotient.astype(X.dtype, copy=False)


@divide_by_values.grad_rule
def _(X, s, used, of="svd", out=None):
    def backward(dY):
        quotient = divide_by_values(dY, s, used, of=of)
        return quotient, -reduce_sum(quotient * out, -2), None

    return backward


@divide_by_values.jvp_rule
def _(X, s, used, of="svd", out=None):
    def tangent(dX, ds, dused):
        return divide_by_values(dX - out * expand_dims(ds, -2), s, used, of=of)

    return tangent


# --- symmetric matrices: eigh, eigvalsh --------------------------------------------

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


def check_uplo(UPLO, op_name: str) -> None:
    if UPLO not in ("L", "U"):
        raise ShapeError(
            f"ppto.{op_name}: UPLO must be 'L' (read the lower triangle) or 'U' "
            f"(the upper one), got {UPLO!r}"
        )


@primitive("(Tensor[...,N,N]) -> Tensor[...] tuple")
def eigh(xp, A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix (of each in a stack),
    like np.linalg.eigh (fields ``.eigenvalues`` and ``.eigenvectors`` too): the
    eigenvalues in ascending order, the eigenvectors as columns. Only the triangle
    ``UPLO`` names is read ('L': the lower one), so the gradient is there."""
    check_uplo(UPLO, "eigh")
    w, V = xp.linalg.eigh(A, UPLO=UPLO)
    return EighResult(w, V)


eigh.result_fields = EighResult._fields


@shape_helper
def read_triangle(A, UPLO):
    """1 on the triangle of A's matrices that ``UPLO`` names, 1/2 on the diagonal,
    0 elsewhere: a change dA read as the symmetric matrix P + P.T, P = dA * mask;
    a symmetric gradient G read back onto that triangle as (G + G.T) * mask."""
    lower = halved_lower(A)
    return lower if UPLO == "L" else lower.T


# With A = V diag(w) V.T and X = V.T dA V (dA symmetric): dw = diag(X), dV = V (F∘X)
# with F_ij = 1 / (w_j - w_i). The adjoint of dV is V (F∘(V.T dV̄)) V.T, whose
# symmetric part V (F∘(K)) V.T / 2, K = V.T V̄ - V̄.T V, is what the triangle read
# receives.


@eigh.grad_rule
def _(A, UPLO="L", out=None):
    def backward(dYs):
        w, V = out
        dw, dV = dYs
        turn = matrix_transpose(V) @ dV
        used = reduce_sum(dV * dV, -2)
        inner = divide_by_gaps(turn - matrix_transpose(turn), w, used, of="eigh")
        symmetric = (V * (2 * expand_dims(dw, -2)) + V @ inner) @ matrix_transpose(V)
        return symmetric * read_triangle(A, UPLO)

    return backward


@eigh.jvp_rule
def _(A, UPLO="L", out=None):
    def tangent(dA):
        w, V = out
        part = dA * read_triangle(A, UPLO)
        moved = (part + matrix_transpose(part)) @ V
        X = matrix_transpose(V) @ moved
        dw = reduce_sum(V * moved, -2)
        return dw, V @ divide_by_gaps(X, w, reduce_sum(X * X, -2), of="eigh")

    return tangent


@primitive("(Tensor[...,N,N]) -> Tensor[...]")
def eigvalsh(xp, A, UPLO="L"):
    """The eigenvalues of a symmetric matrix (of each in a stack), in ascending
    order, like np.linalg.eigvalsh; only the triangle ``UPLO`` names is read."""
    check_uplo(UPLO, "eigvalsh")
    return xp.linalg.eigvalsh(A, UPLO=UPLO)


# d w_i = v_i.T dA v_i: defined where eigenvalues repeat too (any basis of their
# space gives the same sum over it)


@eigvalsh.grad_rule
def _(A, UPLO="L"):
    def backward(dY):
        V = eigh(A, UPLO=UPLO)[1]
        symmetric = (V * (2 * expand_dims(dY, -2))) @ matrix_transpose(V)
        return symmetric * read_triangle(A, UPLO)

    return backward


@eigvalsh.jvp_rule
def _(A, UPLO="L"):
    def tangent(dA):
        V = eigh(A, UPLO=UPLO)[1]
        part = dA * read_triangle(A, UPLO)
        return reduce_sum(V * ((part + matrix_transpose(part)) @ V), -2)

    return tangent


# --- singular value decomposition: svd, svdvals -----------------------------------

SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


@primitive("(Tensor[...,M,N]) -> Tensor[...] tuple")
def svd(xp, A, full_matrices=True, compute_uv=True, hermitian=False):
    """``(U, S, Vh)`` with A = U @ (S[..., None] * Vh) of a matrix (of each in a
    stack), like np.linalg.svd (fields ``.U``, ``.S``, ``.Vh`` too): the singular
    values S in descending order; ``compute_uv=False`` gives S alone. Its gradient
    takes U and Vh as ``full_matrices=False`` makes them (NumPy's default makes
    the extra columns of a non-square matrix's U or rows of its Vh, which no
    derivative determines)."""
    if hermitian:
        raise ShapeError(
            "ppto.svd does not take hermitian=True: leave it out (the same singular "
            "values, from the general decomposition), or use np.linalg.eigh"
        )
    if not compute_uv:
        return xp.linalg.svd(A, compute_uv=False)
    U, S, Vh = xp.linalg.svd(A, full_matrices=full_matrices)
    return SVDResult(U, S, Vh)


svd.result_fields = SVDResult._fields
# np.linalg.svd(A, compute_uv=False) returns the singular values, not a tuple
svd.single_result = {"compute_uv": False}


@shape_helper
def reduced_factors(A, full_matrices):
    """Refuse the gradient of full_matrices=True factors of a non-square matrix."""
    rows, columns = np.shape(A)[-2:]
    if full_matrices and rows != columns:
        raise LinAlgError(
            f"ppto.svd: the derivative of U and Vh with full_matrices=True (the "
            f"default) is not defined for a {rows}x{columns} matrix: its extra "
            "singular vectors are any basis of the rest of the space. Write "
            "np.linalg.svd(A, full_matrices=False)"
        )
    return rows, columns


# With A = U diag(s) V.T (k = min(M, N) singular values) and dP = U.T dA V:
# ds = diag(dP); U.T dU = F∘(dP S + S dP.T) and V.T dV = F∘(S dP + dP.T S), with
# F_ij = 1 / (s_j² - s_i²); the parts of dU and dV off U's and V's columns are
# (I - U U.T) dA V / s and (I - V V.T) dA.T U / s (Townsend 2016). The gradient is
# that map's adjoint (the two turns divided as one).


@svd.grad_rule
def _(A, full_matrices=True, compute_uv=True, hermitian=False, out=None):
    def backward(dYs):
        if not compute_uv:
            U, s, Vh = svd(A, full_matrices=False)
            return (U * expand_dims(dYs, -2)) @ Vh
        rows, columns = reduced_factors(A, full_matrices)
        U, s, Vh = out
        dU, ds, dVh = dYs
        turn_U = matrix_transpose(U) @ dU
        turn_V = Vh @ matrix_transpose(dVh)
        used = reduce_sum(dU * dU, -2) + reduce_sum(dVh * dVh, -1)
        turns = (turn_U - matrix_transpose(turn_U)) * expand_dims(s, -2) + expand_dims(
            s, -1
        ) * (turn_V - matrix_transpose(turn_V))
        inner = divide_by_gaps(turns, s * s, used, of="svd")
        dA = (U @ inner + U * expand_dims(ds, -2)) @ Vh
        if rows > columns:  # (U's columns do not span the space: the rest's part)
            dA = dA + divide_by_values(dU - U @ turn_U, s, used) @ Vh
        if columns > rows:
            beyond = matrix_transpose(dVh - matrix_transpose(turn_V) @ Vh)
            dA = dA + U @ matrix_transpose(divide_by_values(beyond, s, used))
        return dA

    return backward


@svd.jvp_rule
def _(A, full_matrices=True, compute_uv=True, hermitian=False, out=None):
    def tangent(dA):
        if not compute_uv:
            U, s, Vh = svd(A, full_matrices=False)
            return reduce_sum(U * (dA @ matrix_transpose(Vh)), -2)
        rows, columns = reduced_factors(A, full_matrices)
        U, s, Vh = out
        V = matrix_transpose(Vh)
        moved_V, moved_U = dA @ V, matrix_transpose(dA) @ U
        dP = matrix_transpose(U) @ moved_V
        used = reduce_sum(moved_V * moved_V, -2) + reduce_sum(moved_U * moved_U, -2)
        column_s, row_s = expand_dims(s, -1), expand_dims(s, -2)
        turn_U = column_s * matrix_transpose(dP) + dP * row_s
        turn_V = column_s * dP + matrix_transpose(dP) * row_s
        dU = U @ divide_by_gaps(turn_U, s * s, used, of="svd")
        dV = V @ divide_by_gaps(turn_V, s * s, used, of="svd")
        if rows > columns:
            dU = dU + divide_by_values(moved_V - U @ dP, s, used)
        if columns > rows:
            dV = dV + divide_by_values(moved_U - V @ matrix_transpose(dP), s, used)
        ds = reduce_sum(U * moved_V, -2)
        return dU, ds, matrix_transpose(dV)

    return tangent


@primitive("(Tensor[...,M,N]) -> Tensor[...]")
def svdvals(xp, x):
    """The singular values of a matrix (of each in a stack), in descending order,
    like np.linalg.svdvals (NumPy 2): ``np.linalg.svd(x, compute_uv=False)``."""
    return xp.linalg.svd(x, compute_uv=False)


# d s_i = u_i.T dA v_i: defined where singular values repeat too (not at 0 for a
# square matrix, where |s| has a kink: there it is one of its subgradients)


@svdvals.grad_rule
def _(x):
    def backward(dY):
        U, s, Vh = svd(x, full_matrices=False)
        return (U * expand_dims(dY, -2)) @ Vh

    return backward


@svdvals.jvp_rule
def _(x):
    def tangent(dx):
        U, s, Vh = svd(x, full_matrices=False)
        return reduce_sum(U * (dx @ matrix_transpose(Vh)), -2)

    return tangent


# --- QR ---------------------------------------------------------------------------

QRResult = namedtuple("QRResult", ["Q", "R"])


@primitive("(Tensor[...,M,N]) -> Tensor[...] tuple")
def qr(xp, A, mode="reduced"):
    """``(Q, R)`` with A = Q @ R, Q's columns orthonormal and R upper triangular,
    of a matrix (of each in a stack), like np.linalg.qr (fields ``.Q`` and ``.R``
    too), in NumPy's default mode 'reduced' (the others are refused). It is
    differentiable for M >= N (R invertible: A of full column rank)."""
    if mode != "reduced":
        raise ShapeError(
            f"ppto.qr takes mode='reduced' (NumPy's default) only, got {mode!r}: "
            "for R alone, write np.linalg.qr(A)[1] (mode='complete' adds columns to "
            "Q that are any basis of the rest of the space: no derivative fixes them)"
        )
    Q, R = xp.linalg.qr(A, mode="reduced")
    return QRResult(Q, R)


qr.result_fields = QRResult._fields


@shape_helper
def tall_enough(A):
    """Refuse the derivative of the QR factors of a wide matrix."""
    rows, columns = np.shape(A)[-2:]
    if rows < columns:
        raise LinAlgError(
            f"ppto.qr: the derivative of the QR factors is taken for matrices with "
            f"at least as many rows as columns; this one is {rows}x{columns}: "
            "factor A[..., :, :M] (M rows) and solve for the rest, or take the QR "
            "factors of A.T"
        )
    return True


# With B = dA R⁻¹ and X = Q.T B: Q.T dQ = Ω = L - L.T (L = tril(X, -1)), dR = (X -
# Ω) R and dQ = B - Q (X - Ω). Its adjoint, with M = R̄ R.T - Q.T Q̄: Ā = (Q̄ + Q
# (triu(M) + triu(M, 1).T)) R⁻ᵀ.


@qr.grad_rule
def _(A, mode="reduced", out=None):
    def backward(dYs):
        Q, R = out
        dQ, dR = dYs
        tall_enough(A)
        M = dR @ matrix_transpose(R) - matrix_transpose(Q) @ dQ
        mirrored = triu(M) + matrix_transpose(triu(M, 1))
        return matrix_transpose(solve(R, matrix_transpose(dQ + Q @ mirrored)))

    return backward


@qr.jvp_rule
def _(A, mode="reduced", out=None):
    def tangent(dA):
        Q, R = out
        tall_enough(A)
        B = matrix_transpose(solve(matrix_transpose(R), matrix_transpose(dA)))
        X = matrix_transpose(Q) @ B
        upper = triu(X) + matrix_transpose(tril(X, -1))
        return B - Q @ upper, upper @ R

    return tangent
