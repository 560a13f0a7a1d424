"""Linear algebra: ``dot`` with NumPy matmul semantics (batched; 1-D operands are
vectors). Its gradient is the textbook pair, with batch axes reduced by unbroadcast.
Products of two operands (``einsum``, ``outer``, ``vdot``, ``cross``); those over
named axes (einsum, tensordot, inner) take their gradients as einsums. The diagonal
and triangle operators (diag, diagonal, trace, tril, triu) are their own adjoints up
to placing the diagonal back. Inverses, solves, determinants and the Cholesky factor
of (stacks of) square matrices, as ``np.linalg`` computes them; a singular matrix (or
one that is not positive definite) raises ``ppto.LinAlgError`` naming the operator.
"""

import string
from collections import namedtuple
from contextlib import contextmanager

import numpy as np

from ppto.errors import LinAlgError, PptoError, ShapeError
from ppto.ops.arrange import pad
from ppto.ops.elementwise import where
from ppto.ops.indexing import getitem
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.rules import rank_helper, rank_of, shape_helper
from ppto.ops.shape import (
    broadcast_to,
    cast,
    expand_dims,
    flatten,
    floating,
    matrix_transpose,
    moveaxis,
    reshape,
    squeeze,
    unbroadcast,
    zeros_like,
)
from ppto.runtime.tensor import array_module

ANY = "(Tensor[...]) -> Tensor[...]"


@primitive(
    "(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]", mode="matmul", tangent="bilinear"
)
def dot(xp, A, B):
    """Matrix product with matmul semantics: batched over leading axes, 1-D = vector."""
    return xp.matmul(A, B)


@rank_helper("x")
def ndim(x) -> int:
    """``x.ndim``, or NumPy's rank of a nested list (an operand NumPy's matmul
    reads as an array): decided where the rule is inlined if x's rank is known."""
    return rank_of(x)


@dot.grad_rule
def _dot_backward(A, B):
    def backward(dY):
        # a matrix and a vector: BLAS's products, not a broadcast product summed
        # (that is a temporary of the matrix's size and two passes over it)
        if ndim(A) == 2 and ndim(B) == 1:
            return expand_dims(dY, -1) * B, dY @ A
        if ndim(A) == 1 and ndim(B) == 2:
            return B @ dY, expand_dims(A, -1) * expand_dims(dY, -2)
        if ndim(B) == 1:
            dY_column = expand_dims(dY, -1)
            return unbroadcast(dY_column * B, A), unbroadcast(dY_column * A, B)
        if ndim(A) == 1 and ndim(B) > 2:  # (a vector and a stack of matrices)
            dY_row = expand_dims(dY, -2)
            return unbroadcast(reduce_sum(dY_row * B, -1), A), unbroadcast(
                expand_dims(A, -1) * dY_row, B
            )
        return unbroadcast(dY @ matrix_transpose(B), A), unbroadcast(
            matrix_transpose(A) @ dY, B
        )

    return backward


def numpy_dot_refusal(a_rank: int | None, b_rank: int | None) -> str | None:
    """Why ``np.dot(a, b)`` (or ``a.dot(b)``) of operands with these numbers of axes
    (None: not known) cannot run as ``dot``, or None where the two agree. NumPy's
    dot pairs every leading index of a with every leading index of b (a 2-d and a
    3-d array give a 4-d result) where ``dot`` batches them as ``np.matmul`` does,
    and multiplies by a 0-d operand: computing either as matmul would be a
    silently different value. Where a rank is not known, ranks are let through.

    >>> numpy_dot_refusal(2, 2) is None
    True
    """
    if a_rank == 0 or b_rank == 0:
        return "np.dot with a 0-d operand is a product: write a * b"
    if a_rank is not None and b_rank is not None and a_rank >= 2 and b_rank >= 3:
        return (
            f"np.dot of a {a_rank}-d and a {b_rank}-d array pairs every leading "
            "index of the first with every leading index of the second; ppto's dot "
            "batches them as np.matmul does: write np.matmul(a, b) or a @ b for "
            "batches, or reshape the operands to 2-d for NumPy's pairing"
        )
    return None


@primitive(
    "(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]", mode="matmul", tangent="bilinear"
)
def numpy_dot(xp, A, B):
    """``np.dot`` where the operands' numbers of axes were not known when the code
    was generated: ``dot``, refusing operands for which NumPy's dot means another
    product (see ``numpy_dot_refusal``)."""
    refusal = numpy_dot_refusal(np.ndim(A), np.ndim(B))
    if refusal is not None:
        raise PptoError(refusal)
    return xp.matmul(A, B)


numpy_dot.grad_rule(_dot_backward)  # (the products it lets through are dot's)


@primitive("(Tensor[...], Tensor[...]) -> Tensor[]", tangent="bilinear")
def vdot(xp, a, b):
    """Sum of the products of a's and b's elements, each flattened (``np.vdot`` of
    real arrays); a and b have as many elements."""
    return xp.vdot(a, b)


@vdot.grad_rule
def _(a, b):
    def backward(dY):
        return reshape(dY * flatten(b), np.shape(a)), reshape(
            dY * flatten(a), np.shape(b)
        )

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def vecdot(xp, a, b, axis=-1):
    """Products of a's and b's elements summed along ``axis`` of their broadcast
    shape (np.vecdot, np.linalg.vecdot, of real arrays)."""
    return xp.sum(xp.multiply(a, b), axis=axis)


@vecdot.grad_rule
def _(a, b, axis=-1):
    def backward(dY):
        spread = expand_dims(dY, axis)
        return unbroadcast(spread * b, a), unbroadcast(spread * a, b)

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[M,N]", tangent="bilinear")
def outer(xp, a, b):
    """Outer product of a's and b's elements, each flattened (``np.outer``)."""
    return xp.outer(a, b)


@outer.grad_rule
def _(a, b):
    def backward(dY):
        return (
            reshape(dY @ flatten(b), np.shape(a)),
            reshape(flatten(a) @ dY, np.shape(b)),
        )

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def kron(xp, a, b):
    """The Kronecker product (``np.kron``): a block of b for each of a's elements,
    scaled by it; the operand of fewer axes has leading axes of length 1 added."""
    return xp.kron(a, b)


@kron.grad_rule
def _(a, b):
    def backward(dY):
        # dY cut into blocks, a's axes and b's interleaved: each of a's elements
        # met every element of b in its block, each of b's elements every block
        blocks = reshape(dY, kron_blocks(a, b))
        da = reduce_sum(blocks * reshape(b, kron_spread(a, b, 1)), kron_axes(a, b, 1))
        db = reduce_sum(blocks * reshape(a, kron_spread(a, b, 0)), kron_axes(a, b, 0))
        return reshape(da, np.shape(a)), reshape(db, np.shape(b))

    return backward


def _kron_shapes(a, b) -> tuple[tuple, tuple]:
    """a's and b's shapes with leading 1s to the same number of axes, as np.kron
    reads them."""
    shape_a, shape_b = tuple(np.shape(a)), tuple(np.shape(b))
    count = max(len(shape_a), len(shape_b))
    return (
        (1,) * (count - len(shape_a)) + shape_a,
        (1,) * (count - len(shape_b)) + shape_b,
    )


@shape_helper
def kron_blocks(a, b) -> tuple:
    """np.kron(a, b)'s shape with each axis cut in two, (a0, b0, a1, b1, ...)."""
    shape_a, shape_b = _kron_shapes(a, b)
    return tuple(n for pair in zip(shape_a, shape_b) for n in pair)


@shape_helper
def kron_spread(a, b, which: int) -> tuple:
    """The shape that lays a (``which`` 0) or b (1) along its own axes of
    ``kron_blocks``, 1 along the other operand's."""
    shapes = _kron_shapes(a, b)
    return tuple(
        n if side == which else 1
        for pair in zip(*shapes)
        for side, n in enumerate(pair)
    )


@shape_helper
def kron_axes(a, b, which: int) -> tuple:
    """The axes of ``kron_blocks`` that belong to a (``which`` 0) or b (1)."""
    return tuple(range(which, 2 * len(_kron_shapes(a, b)[0]), 2))


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def einsum(xp, a, b, subscripts):
    """np.einsum of two operands (``np.einsum("bqd,bkd->bqk", q, k)``): products of
    a's and b's elements summed over the indices the result leaves out. An index
    repeated within one operand (a diagonal) is refused."""
    return xp.einsum(explicit_subscripts(subscripts, a, b), a, b)


@einsum.grad_rule
def _(a, b, subscripts):
    def backward(dY):
        # each operand's gradient is the einsum of dY with the other operand
        # (the subscripts are worked out when the code is generated where the
        # operands' ranks are known, or need not be: no "...")
        da = einsum(dY, b, subscripts=operand_subscripts(subscripts, a, b, 0))
        db = einsum(a, dY, subscripts=operand_subscripts(subscripts, a, b, 1))
        if summed_alone(subscripts, a, b, 0):  # (an index only a has: "ij,k->k")
            da = expand_dims(da, alone_axes(subscripts, a, b, 0))
            da = broadcast_to(da, np.broadcast_shapes(np.shape(da), a.shape))
        if summed_alone(subscripts, a, b, 1):
            db = expand_dims(db, alone_axes(subscripts, a, b, 1))
            db = broadcast_to(db, np.broadcast_shapes(np.shape(db), b.shape))
        return unbroadcast(da, a), unbroadcast(db, b)

    return backward


@shape_helper
def explicit_subscripts(subscripts, a, b):
    """``subscripts`` with its result written out and each ``...`` as letters of
    its own, one per axis it stands for (``"ij,jk"`` -> ``"ij,jk->ik"``)."""
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    parts = inputs.split(",")
    if len(parts) != 2:
        raise ShapeError(
            f"ppto.einsum takes two operands; {subscripts!r} names {len(parts)}: "
            "write the product in steps of two operands, or with @ and np.sum"
        )
    spare = [c for c in string.ascii_letters if c not in text]
    batch = max(_ellipsis_axes(part, x) for part, x in zip(parts, (a, b)))
    ellipsis = "".join(spare[:batch])
    for part in parts:
        letters = part.replace("...", "")
        if len(set(letters)) != len(letters):
            raise ShapeError(
                f"ppto.einsum: {subscripts!r} repeats an index within one operand "
                "(a diagonal or trace), which ppto cannot differentiate: take the "
                "diagonal first with np.diagonal (or its sum with np.trace), then "
                "the einsum without the repeated index"
            )
    # each operand's "..." is the last of those letters, as many as its axes left
    # (broadcast from the right)
    parts = [
        part.replace("...", ellipsis[len(ellipsis) - _ellipsis_axes(part, x) :])
        for part, x in zip(parts, (a, b))
    ]
    if not arrow:  # NumPy's implicit result: indices met once, in order
        counts = "".join(parts)
        output = ellipsis + "".join(
            sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ellipsis)
        )
    output = output.replace("...", ellipsis)
    return f"{parts[0]},{parts[1]}->{output}"


def _ellipsis_axes(part, x):
    """How many of x's axes the ``...`` of its subscripts ``part`` stands for."""
    if "..." not in part:
        return 0
    return max(rank_of(x) - len(part.replace("...", "")), 0)


def _split(subscripts, a, b):
    inputs, _, output = explicit_subscripts(subscripts, a, b).partition("->")
    first, second = inputs.split(",")
    return first, second, output


@rank_helper("a", "b")
def operand_subscripts(subscripts, a, b, which):
    """The subscripts of the gradient of operand ``which`` (0: a, 1: b), an einsum
    of dY and the other operand into the indices of ``which`` the two of them have
    (the first operand's gradient is einsum(dY, b), the second's einsum(a, dY))."""
    first, second, output = _split(subscripts, a, b)
    mine, other = (first, second) if which == 0 else (second, first)
    kept = "".join(c for c in mine if c in output or c in other)
    if which == 0:
        return f"{output},{other}->{kept}"
    return f"{other},{output}->{kept}"


@rank_helper("a", "b")
def summed_alone(subscripts, a, b, which):
    """Whether operand ``which`` has an index neither the result nor the other
    operand has (its gradient is the same along it)."""
    first, second, output = _split(subscripts, a, b)
    mine, other = (first, second) if which == 0 else (second, first)
    return any(c not in output and c not in other for c in mine)


@rank_helper("a", "b")
def alone_axes(subscripts, a, b, which):
    """The axes of operand ``which`` along the indices only it has: its gradient
    (an einsum into the indices it shares) is the same along them."""
    first, second, output = _split(subscripts, a, b)
    mine, other = (first, second) if which == 0 else (second, first)
    return tuple(
        axis for axis, c in enumerate(mine) if c not in output and c not in other
    )


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def tensordot(xp, a, b, axes=2):
    """Products of a's and b's elements summed over pairs of axes, like
    np.tensordot: ``axes`` is a number (a's last axes with b's first) or a pair of
    lists of axes (``([1, 0], [0, 1])``)."""
    return xp.tensordot(a, b, axes=axes)


@tensordot.grad_rule
def _(a, b, axes=2):
    def backward(dY):
        # the einsum that tensordot is, and that einsum's gradients (written as
        # calls within calls, so that each folds to its subscripts when the code is
        # generated, where the operands' ranks are known)
        return (
            einsum(
                dY,
                b,
                subscripts=operand_subscripts(
                    tensordot_subscripts(a, b, axes), a, b, 0
                ),
            ),
            einsum(
                a,
                dY,
                subscripts=operand_subscripts(
                    tensordot_subscripts(a, b, axes), a, b, 1
                ),
            ),
        )

    return backward


@rank_helper("a", "b")
def tensordot_subscripts(a, b, axes):
    """The einsum subscripts of ``tensordot(a, b, axes)`` (``2`` on two matrices:
    ``"ab,ab->"``)."""
    rank_a, rank_b = rank_of(a), rank_of(b)
    if isinstance(axes, (int, np.integer)):
        pairs = list(zip(range(rank_a - axes, rank_a), range(axes)))
    else:
        summed_a, summed_b = (
            [part] if isinstance(part, (int, np.integer)) else list(part)
            for part in axes
        )
        pairs = [(i % rank_a, j % rank_b) for i, j in zip(summed_a, summed_b)]
    letters = iter(string.ascii_letters)
    first = [next(letters) for _ in range(rank_a)]
    second = [next(letters) for _ in range(rank_b)]
    for i, j in pairs:
        second[j] = first[i]
    summed = {first[i] for i, _ in pairs}
    output = [c for c in first + second if c not in summed]
    return f"{''.join(first)},{''.join(second)}->{''.join(output)}"


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def inner(xp, a, b):
    """Products summed over a's and b's last axes, like np.inner (a number times an
    array where one is a number)."""
    return xp.inner(a, b)


@inner.grad_rule
def _(a, b):
    def backward(dY):
        # (calls within calls: each folds where the operands' ranks are known)
        return (
            einsum(
                dY,
                b,
                subscripts=operand_subscripts(
                    tensordot_subscripts(a, b, inner_axes(a, b)), a, b, 0
                ),
            ),
            einsum(
                a,
                dY,
                subscripts=operand_subscripts(
                    tensordot_subscripts(a, b, inner_axes(a, b)), a, b, 1
                ),
            ),
        )

    return backward


@rank_helper("a", "b")
def inner_axes(a, b):
    """The tensordot axes of ``inner(a, b)``: the last of each (none for a number)."""
    if rank_of(a) == 0 or rank_of(b) == 0:
        return 0
    return ([-1], [-1])


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="bilinear")
def cross(xp, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors along ``axisa`` of a and ``axisb`` of b,
    broadcasting the other axes, with the result's vectors along ``axisc``, like
    np.cross (``axis``, where given, is all three): as NumPy, each operand's own
    axis holds its vectors (a of shape (3, 4) and b of shape (3,) with axis=0 are
    four vectors and one), and the rest broadcast."""
    axisa, axisb, axisc = cross_axes(axisa, axisb, axisc, axis)
    check_three_vectors(a, b, axisa, axisb)
    return xp.cross(a, b, axisa=axisa, axisb=axisb, axisc=axisc)


@shape_helper
def cross_axes(axisa, axisb, axisc, axis):
    """The axes of a's, b's and the result's vectors: ``axis`` for all three where
    given (as in NumPy), else each its own."""
    if axis is not None:
        return axis, axis, axis
    return axisa, axisb, axisc


def check_three_vectors(a, b, axisa, axisb):
    """Refuse what ``cross`` does not take: other than 3 components along the
    operands' axes."""
    for name, x, axis in (("a", a, axisa), ("b", b, axisb)):
        shape = tuple(np.shape(x))
        if not shape or not -len(shape) <= axis < len(shape) or shape[axis] != 3:
            raise ShapeError(
                f"ppto.cross: {name} of shape {shape} has no axis {axis} of 3 "
                "components: ppto.cross takes 3-vectors (for 2-vectors, the "
                "z component is a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0])"
            )
    try:
        np.broadcast_shapes(vector_batch(a, axisa), vector_batch(b, axisb))
    except ValueError as error:
        along = f"axis {axisa}" if axisa == axisb else f"axes {axisa} and {axisb}"
        raise ShapeError(
            f"ppto.cross: the vectors of a {tuple(np.shape(a))} and b "
            f"{tuple(np.shape(b))} along {along} do not broadcast: {error}"
        ) from error


def vector_batch(x, axis) -> tuple:
    """x's shape without ``axis``, the one holding its vectors."""
    shape = list(np.shape(x))
    del shape[axis]
    return tuple(shape)


@cross.grad_rule
def _(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    def backward(dY):
        # <dY, a x b> = <a, b x dY> = <b, dY x a>, each vector on the last axis:
        # NumPy moves each operand's own axis there before broadcasting the rest
        along_a, along_b, along_result = cross_axes(axisa, axisb, axisc, axis)
        a_last = moveaxis(a, along_a, -1)
        b_last = moveaxis(b, along_b, -1)
        dY_last = moveaxis(dY, along_result, -1)
        da = unbroadcast(cross(b_last, dY_last), a_last)
        db = unbroadcast(cross(dY_last, a_last), b_last)
        return moveaxis(da, -1, along_a), moveaxis(db, -1, along_b)

    return backward


# --- square matrices (np.linalg) --------------------------------------------------

SQUARE = "(Tensor[...,N,N]) -> Tensor[...,N,N]"


@contextmanager
def refusing_singular(op_name: str, what: str):
    """NumPy's LinAlgError as ``ppto.LinAlgError`` naming the operator and ``what``
    its matrix must be (CuPy, by default, returns NaN instead of raising)."""
    try:
        yield
    except np.linalg.LinAlgError as error:
        raise LinAlgError(
            f"ppto.{op_name}: {error}: the matrix (or a matrix of the stack) must "
            f"be {what}"
        ) from error


@primitive(SQUARE)
def inv(xp, A):
    """The inverse of a square matrix (of each in a stack), like np.linalg.inv."""
    # (slogdet's gradient and det's second derivative invert their matrix: said
    # for them too)
    with refusing_singular(
        "inv", "invertible (as for slogdet's gradient and det's second derivative)"
    ):
        return xp.linalg.inv(A)


@inv.grad_rule
def _(A, out):
    def backward(dY):
        return -(matrix_transpose(out) @ dY @ matrix_transpose(out))

    return backward


@inv.jvp_rule
def _(A, out):
    def tangent(dA):
        return -(out @ dA @ out)

    return tangent


@primitive("(Tensor[...,N,N], Tensor[...]) -> Tensor[...]")
def solve(xp, A, b):
    """x with A @ x = b, like np.linalg.solve (NumPy 2's rule): b of shape (N,) is
    one vector (for every matrix of a stack), else (..., N, K) holds K columns;
    stacks broadcast."""
    check_right_side(A, b)
    column = b.ndim == 1
    B = b[:, None] if column else b
    batch = tuple(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    A = xp.broadcast_to(A, batch + A.shape[-2:])
    B = xp.broadcast_to(B, batch + B.shape[-2:])
    with refusing_singular("solve", "invertible"):
        x = xp.linalg.solve(A, B)
    return x[..., 0] if column else x


def check_right_side(A, b):
    """Refuse a right side ``solve`` cannot take, saying what it takes."""
    rows = np.shape(A)[-1]
    shape = tuple(np.shape(b))
    if not shape or shape[-1 if len(shape) == 1 else -2] != rows:
        raise ShapeError(
            f"ppto.solve: a right side of shape {shape} for matrices of shape "
            f"{tuple(np.shape(A))}: it must be a vector of shape ({rows},) or "
            f"columns of shape (..., {rows}, K)"
        )
    try:
        np.broadcast_shapes(np.shape(A)[:-2], shape[:-2])
    except ValueError as error:
        raise ShapeError(
            f"ppto.solve: the stacks of {tuple(np.shape(A))} and {shape} do not "
            f"broadcast: {error}"
        ) from error


# solve's rules work on columns: a vector b is made one (a stack of vectors would
# read as columns (..., N, K) of another length)


@solve.grad_rule
def _(A, b, out):
    def backward(dY):
        if b.ndim == 1:
            dcolumn = solve(matrix_transpose(A), expand_dims(dY, -1))
            dA = -(dcolumn * expand_dims(out, -2))
            return unbroadcast(dA, A), unbroadcast(squeeze(dcolumn, -1), b)
        db = solve(matrix_transpose(A), dY)
        return unbroadcast(-(db @ matrix_transpose(out)), A), unbroadcast(db, b)

    return backward


@solve.jvp_rule
def _(A, b, out):
    def tangent(dA, db):
        if b.ndim == 1:
            moved = expand_dims(db, -1) - dA @ expand_dims(out, -1)
            return squeeze(solve(A, moved), -1)
        return solve(A, db - dA @ out)

    return tangent


@primitive("(Tensor[...,N,N]) -> Tensor[...]")
def det(xp, A):
    """The determinant of a square matrix (of each in a stack), like
    np.linalg.det. Its gradient is the matrix of cofactors, at a singular matrix
    too (where its second derivative raises ppto.LinAlgError)."""
    return xp.linalg.det(A)


@det.grad_rule
def _(A):
    def backward(dY):
        # d det / dA is the cofactors (det(A) inv(A).T where A is invertible)
        return expand_dims(expand_dims(dY, -1), -1) * cofactors(A)

    return backward


@det.jvp_rule
def _(A):
    def tangent(dA):
        return reduce_sum(cofactors(A) * dA, (-2, -1))

    return tangent


@primitive(SQUARE)
def cofactors(xp, A):
    """The matrix of cofactors of a square matrix (of each in a stack), det's
    gradient: det(A) inv(A).T where A is invertible; at a singular matrix, from
    its singular value decomposition A = U diag(s) Vh, det(U) det(Vh) U diag(c) Vh
    with c_i the product of the other values (their cofactors)."""
    try:
        inverse = xp.linalg.inv(A)
    except np.linalg.LinAlgError:  # (CuPy gives NaN instead)
        inverse = None
    if inverse is not None and bool(xp.all(xp.isfinite(inverse))):
        return xp.linalg.det(A)[..., None, None] * xp.swapaxes(inverse, -1, -2)
    U, s, Vh = xp.linalg.svd(A)
    one = xp.ones_like(s[..., :1])
    before = xp.cumprod(xp.concatenate([one, s[..., :-1]], -1), -1)
    after = xp.flip(
        xp.cumprod(xp.flip(xp.concatenate([s[..., 1:], one], -1), -1), -1), -1
    )
    signs = xp.linalg.det(U) * xp.linalg.det(Vh)
    return signs[..., None, None] * ((U * (before * after)[..., None, :]) @ Vh)


# With C = cofactors(A) = det(A) A⁻ᵀ, dC = tr(A⁻¹ dA) C - C dAᵀ A⁻ᵀ: where A is
# invertible (at a singular A, inv raises ppto.LinAlgError).


@cofactors.grad_rule
def _(A, out):
    def backward(dY):
        inverse = matrix_transpose(inv(A))
        scale = expand_dims(expand_dims(reduce_sum(dY * out, (-2, -1)), -1), -1)
        return scale * inverse - inverse @ matrix_transpose(dY) @ out

    return backward


@cofactors.jvp_rule
def _(A, out):
    def tangent(dA):
        inverse = matrix_transpose(inv(A))
        change = reduce_sum(inverse * dA, (-2, -1))
        scale = expand_dims(expand_dims(change, -1), -1)
        return scale * out - out @ matrix_transpose(dA) @ inverse

    return tangent


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


@primitive("(Tensor[...,N,N]) -> Tensor[...] tuple")
def slogdet(xp, A):
    """``(sign, log |det A|)`` of a square matrix (of each in a stack), like
    np.linalg.slogdet (fields ``.sign`` and ``.logabsdet`` too): the determinant's
    logarithm without overflow. The sign is not differentiated."""
    sign, logabsdet = xp.linalg.slogdet(A)
    return SlogdetResult(sign, logabsdet)


slogdet.result_fields = SlogdetResult._fields
# a field read where the transformer cannot see the call: how to write it instead
RESULT_FIELDS = {
    field: "sign, logabsdet = np.linalg.slogdet(A)" for field in SlogdetResult._fields
}


@slogdet.grad_rule
def _(A):
    def backward(dYs):
        # the sign is piecewise constant; d log|det A| / dA is inv(A).T
        if A.ndim == 2:  # (one matrix: its log-determinant is a number)
            return dYs[1] * inv(A).T
        scale = expand_dims(expand_dims(dYs[1], -1), -1)
        return scale * matrix_transpose(inv(A))

    return backward


@slogdet.jvp_rule
def _(A):
    def tangent(dA):
        dlog = reduce_sum(matrix_transpose(inv(A)) * dA, (-2, -1))
        return zeros_like(dlog), dlog

    return tangent


@primitive(SQUARE)
def cholesky(xp, A, upper=False):
    """The lower triangular L with L @ L.T = A, for a symmetric positive definite
    A (of each in a stack), like np.linalg.cholesky: only A's lower triangle is
    read, so its gradient is there (the upper triangle's is 0). With
    ``upper=True`` (NumPy 2's), the upper triangular U = L.T with U.T @ U = A,
    read from A's upper triangle: the factor of A.T transposed."""
    with refusing_singular("cholesky", "symmetric positive definite"):
        if upper:  # (CuPy's cholesky has no upper=)
            return xp.swapaxes(xp.linalg.cholesky(xp.swapaxes(A, -1, -2)), -1, -2)
        return xp.linalg.cholesky(A)


# With Φ(X) X's lower triangle and half its diagonal, a change dA (read from its
# lower triangle, S = Φ(dA) + Φ(dA).T) changes L by L Φ(L⁻¹ S L⁻ᵀ) (Murray 2016,
# arXiv:1602.07527); the gradient is that map's adjoint, G = L⁻ᵀ Φ(Lᵀ dL) L⁻¹,
# read back onto the lower triangle: Φ(G + G.T). The upper factor of A is the
# lower factor of A.T transposed: the same, with L, dL and the result transposed.


@cholesky.grad_rule
def _(A, upper=False, out=None):
    def backward(dY):
        lower = out
        dlower = dY
        if upper:
            lower = matrix_transpose(out)
            dlower = matrix_transpose(dY)
        halved = halved_lower(lower)
        inner = solve(
            matrix_transpose(lower), (matrix_transpose(lower) @ dlower) * halved
        )
        spread = matrix_transpose(
            solve(matrix_transpose(lower), matrix_transpose(inner))
        )
        gradient = (spread + matrix_transpose(spread)) * halved
        if upper:
            return matrix_transpose(gradient)
        return gradient

    return backward


@cholesky.jvp_rule
def _(A, upper=False, out=None):
    def tangent(dA):
        lower = out
        dlower_input = dA
        if upper:
            lower = matrix_transpose(out)
            dlower_input = matrix_transpose(dA)
        halved = halved_lower(lower)
        part = dlower_input * halved
        left = solve(lower, part + matrix_transpose(part))
        inner = matrix_transpose(solve(lower, matrix_transpose(left)))
        change = lower @ (inner * halved)
        if upper:
            return matrix_transpose(change)
        return change

    return tangent


@shape_helper
def halved_lower(L):
    """Φ's mask for matrices like L: 1 below the diagonal, 1/2 on it, 0 above, in
    L's dtype on L's device."""
    xp, size, dtype = array_module(L), np.shape(L)[-1], L.dtype
    return xp.tril(xp.ones((size, size), dtype=dtype)) - 0.5 * xp.eye(size, dtype=dtype)


# --- diagonals and triangles ------------------------------------------------------


@primitive(ANY, tangent="linear")
def diag(xp, x, k=0):
    """A vector's elements on the ``k``-th diagonal of a square matrix of zeros, or a
    matrix's ``k``-th diagonal as a vector, like np.diag."""
    if x.ndim not in (1, 2):
        raise ShapeError(
            f"ppto.diag takes a vector or a matrix, got an array of {x.ndim} axes: "
            "for the diagonal of each matrix in a stack, use "
            "np.diagonal(x, axis1=-2, axis2=-1)"
        )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ShapeError(f"ppto.diag's k must be a whole number, got {k!r}")
    return xp.diag(x, k)


@diag.grad_rule
def _(x, k=0):
    def backward(dY):
        if x.ndim == 1:  # (decided where x's rank is known)
            return diag(dY, k)
        # the diagonal set in a square matrix, padded or cut to x's shape
        square = diag(dY, k)
        widths = diagonal_padding(x, k)
        return getitem(pad(square, widths, constant_values=0.0), matrix_part(x))

    return backward


def _diagonal_length(rows, columns, k) -> int:
    """The length of the ``k``-th diagonal of a rows x columns matrix."""
    return max(0, min(rows, columns - k) if k >= 0 else min(rows + k, columns))


@shape_helper
def diagonal_padding(x, k):
    """The zeros to add after ``diag(diag(x, k), k)`` (a square matrix) for it to
    cover x's shape."""
    size = _diagonal_length(*np.shape(x), k) + abs(k)
    return tuple((0, max(n - size, 0)) for n in np.shape(x))


@shape_helper
def matrix_part(x):
    """The subscript of a padded square matrix that has x's shape."""
    return tuple(slice(0, n) for n in np.shape(x))


@primitive(ANY, tangent="linear")
def diagonal(xp, x, offset=0, axis1=0, axis2=1):
    """The ``offset``-th diagonal over axes ``axis1`` and ``axis2`` (of each matrix in
    a stack), as the last axis, like np.diagonal and x.diagonal()."""
    return xp.diagonal(x, offset=offset, axis1=axis1, axis2=axis2)


@diagonal.grad_rule
def _(x, offset=0, axis1=0, axis2=1):
    def backward(dY):
        # dY along the axis the diagonal is counted on, then kept on the diagonal
        widths = diagonal_filling(x, offset, axis1, axis2)
        column = expand_dims(pad(dY, widths, constant_values=0.0), -1)
        placed = moveaxis(column, (-2, -1), diagonal_axes(x, offset, axis1, axis2))
        return placed * diagonal_mask(x, offset, axis1, axis2)

    return backward


@shape_helper
def diagonal_axes(x, offset, axis1, axis2):
    """(the axis of x the ``offset``-th diagonal is counted along, the other one):
    axis1 from the main diagonal up, axis2 below it."""
    rank = np.ndim(x)
    first, second = axis1 % rank, axis2 % rank
    return (first, second) if offset >= 0 else (second, first)


@shape_helper
def diagonal_filling(x, offset, axis1, axis2):
    """The zeros to add after a diagonal's elements (its last axis) for them to
    fill the axis they are counted along (``diagonal_axes``)."""
    shape, rank = tuple(np.shape(x)), np.ndim(x)
    rows, columns = shape[axis1 % rank], shape[axis2 % rank]
    length = _diagonal_length(rows, columns, offset)
    along = rows if offset >= 0 else columns
    return ((0, 0),) * (rank - 2) + ((0, along - length),)


@primitive(ANY, tangent="linear")
def trace(xp, x, offset=0, axis1=0, axis2=1, dtype=None):
    """The sum of the ``offset``-th diagonal of x over axes ``axis1`` and ``axis2``
    (of each matrix in a stack), like np.trace (summed in ``dtype`` where given)."""
    return xp.trace(x, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype)


@trace.grad_rule
def _(x, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    def backward(dY):
        spread = expand_dims(dY, trace_axes(x, axis1, axis2))
        if dtype is not None:  # (in dtype: back to x's, none through ints)
            spread = where(floating(out), cast(spread, x.dtype), 0.0)
        return spread * diagonal_mask(x, offset, axis1, axis2)

    return backward


@shape_helper
def trace_axes(x, axis1, axis2):
    """The two axes ``trace`` sums over, from 0 and in increasing order."""
    rank = np.ndim(x)
    return tuple(sorted((axis1 % rank, axis2 % rank)))


@shape_helper
def diagonal_mask(x, offset, axis1, axis2):
    """Ones on the ``offset``-th diagonal of axes (axis1, axis2) of x, zeros
    elsewhere, of x's dtype and on its device, with size 1 along the other axes."""
    xp = array_module(x)
    shape, rank = tuple(np.shape(x)), np.ndim(x)
    first, second = axis1 % rank, axis2 % rank
    mask = xp.eye(shape[first], shape[second], k=offset, dtype=x.dtype)
    if first > second:
        mask = mask.T
    sizes = [1] * rank
    sizes[first], sizes[second] = shape[first], shape[second]
    return mask.reshape(sizes)


@primitive(ANY, tangent="linear")
def tril(xp, x, k=0):
    """x with the elements above its ``k``-th diagonal zeroed (of each matrix in a
    stack), like np.tril; a vector is each row of a square matrix first, as NumPy
    reads it."""
    check_not_a_number(x, "tril")
    return xp.tril(x, k)


@tril.grad_rule
def _(x, k=0):
    def backward(dY):
        if x.ndim == 1:  # (each row of dY came from x)
            return reduce_sum(tril(dY, k), 0)
        return tril(dY, k)

    return backward


def check_not_a_number(x, op_name: str) -> None:
    """Refuse the 0-d array np.tril and np.triu cannot take."""
    if np.ndim(x) == 0:
        raise ShapeError(
            f"ppto.{op_name} takes a vector, a matrix or a stack of them, got an "
            "array of 0 axes"
        )


@primitive(ANY, tangent="linear")
def triu(xp, x, k=0):
    """x with the elements below its ``k``-th diagonal zeroed (of each matrix in a
    stack), like np.triu; a vector is each row of a square matrix first, as NumPy
    reads it."""
    check_not_a_number(x, "triu")
    return xp.triu(x, k)


@triu.grad_rule
def _(x, k=0):
    def backward(dY):
        if x.ndim == 1:  # (each row of dY came from x)
            return reduce_sum(triu(dY, k), 0)
        return triu(dY, k)

    return backward
