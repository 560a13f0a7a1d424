"""Linear algebra: ``dot`` with NumPy matmul semantics (batched; 1-D operands are
vectors). Its gradient is the textbook pair, with batch axes reduced by unbroadcast.
"""

import numpy as np

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
def _(A, B):
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
