"""Linear algebra: ``dot`` with NumPy matmul semantics (batched; 1-D operands are
vectors). Its gradient is the textbook pair, with batch axes reduced by unbroadcast.
"""

import numpy as np

from ppto.errors import PptoError
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.shape import (
    expand_dims,
    flatten,
    matrix_transpose,
    reshape,
    unbroadcast,
)


@primitive(
    "(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]", mode="matmul", tangent="bilinear"
)
def dot(xp, A, B):
    """Matrix product with matmul semantics: batched over leading axes, 1-D = vector."""
    return xp.matmul(A, B)


@dot.grad_rule
def _dot_backward(A, B):
    def backward(dY):
        # a matrix and a vector: BLAS's products, not a broadcast product summed
        # (that is a temporary of the matrix's size and two passes over it)
        if A.ndim == 2 and B.ndim == 1:
            return expand_dims(dY, -1) * B, dY @ A
        if A.ndim == 1 and B.ndim == 2:
            return B @ dY, expand_dims(A, -1) * expand_dims(dY, -2)
        if B.ndim == 1:
            dY_column = expand_dims(dY, -1)
            return unbroadcast(dY_column * B, A), unbroadcast(dY_column * A, B)
        if A.ndim == 1:
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
    refusal = numpy_dot_refusal(A.ndim, B.ndim)
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
