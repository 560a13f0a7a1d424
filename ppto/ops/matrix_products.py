"""Linear algebra: products of matrices as ``np.linalg`` writes them,
``matrix_power`` (a whole power of a square matrix, negative through its inverse)
and ``multi_dot`` (a chain of products), for a matrix or a stack of them.
"""

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.indexing import getitem
from ppto.ops.linalg import SQUARE, refusing_singular
from ppto.ops.primitive import primitive
from ppto.ops.rules import shape_helper
from ppto.ops.shape import (
    concat,
    expand_dims,
    matrix_transpose,
    reshape,
    zeros_like,
)


@primitive(SQUARE)
def matrix_power(xp, A, n):
    """A multiplied by itself, n factors, of a square matrix (of each in a stack),
    like np.linalg.matrix_power: n a whole number, 0 giving the identity and a
    negative n the power of A's inverse (a singular A raises ppto.LinAlgError)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ShapeError(f"ppto.matrix_power's n must be a whole number, got {n!r}")
    if n == 0:
        identity = xp.eye(A.shape[-1], dtype=A.dtype)
        return xp.broadcast_to(identity, A.shape).copy()
    base = A
    if n < 0:
        with refusing_singular("matrix_power", "invertible for a negative power"):
            base = xp.linalg.inv(A)
    # by squaring: the factors of n's binary digits
    result, power, remaining = None, base, abs(int(n))
    while True:
        if remaining & 1:
            result = power if result is None else xp.matmul(result, power)
        remaining >>= 1
        if not remaining:
            return result.copy() if result is A else result
        power = xp.matmul(power, power)


# The derivative of a power series f (A**n, any whole n) in the direction E is the
# upper right block of f([[A, E], [0, A]]) (Higham 2008, Functions of Matrices,
# 3.2); its adjoint is the derivative at A.T in the direction dY (f's coefficients
# are real), so both rules take a power of a matrix twice A's size.


@matrix_power.grad_rule
def _(A, n):
    def backward(dY):
        At = matrix_transpose(A)
        lower = concat([zeros_like(At), At], -1)
        block = concat([concat([At, dY], -1), lower], -2)
        return getitem(matrix_power(block, n), upper_right(A))

    return backward


@matrix_power.jvp_rule
def _(A, n):
    def tangent(dA):
        lower = concat([zeros_like(A), A], -1)
        block = concat([concat([A, dA], -1), lower], -2)
        return getitem(matrix_power(block, n), upper_right(A))

    return tangent


@shape_helper
def upper_right(A):
    """The index of the upper right block, of A's shape, of a block matrix twice
    the size of A's matrices."""
    size = np.shape(A)[-1]
    return (Ellipsis, slice(0, size), slice(size, None))


@primitive("([Tensor[...]]) -> Tensor[...]")
def multi_dot(xp, arrays):
    """The product of a chain of matrices, like np.linalg.multi_dot: the first may
    be a vector (a row) and the last a vector (a column); the others are matrices.
    Computed from the left (the value is NumPy's up to rounding: NumPy picks the
    cheapest order)."""
    check_chain(arrays)
    result = arrays[0]
    for array in arrays[1:]:
        result = xp.matmul(result, array)
    return result


def check_chain(arrays) -> None:
    """Refuse what np.linalg.multi_dot refuses: fewer than two arrays, a vector
    inside the chain, or an array of more than two axes."""
    ranks = [np.ndim(array) for array in arrays]
    inner_vector = any(rank != 2 for rank in ranks[1:-1])
    if len(ranks) < 2 or inner_vector or any(rank not in (1, 2) for rank in ranks):
        raise ShapeError(
            "ppto.multi_dot takes two or more arrays: matrices, the first and the "
            f"last of which may be vectors; got arrays of {ranks} axes (for stacks "
            "of matrices, write a @ b @ c)"
        )


# Each factor's gradient is the chain with the factors left of it and right of it
# transposed on either side of dY, with a vector at either end read as a row
# (first) or a column (last).


@multi_dot.grad_rule
def _(arrays):
    def backward(dY):
        factors = [expand_dims(arrays[0], 0) if arrays[0].ndim == 1 else arrays[0]]
        for middle in arrays[1:-1]:
            factors.append(middle)
        factors.append(
            expand_dims(arrays[-1], -1) if arrays[-1].ndim == 1 else arrays[-1]
        )
        seed = reshape(dY, chain_shape(arrays))
        grads = []
        for i in range(len(factors)):
            gradient = seed
            for j in range(i):  # (A_0 ... A_i-1).T dY
                gradient = matrix_transpose(factors[j]) @ gradient
            for j in range(len(factors) - 1, i, -1):  # ... (A_i+1 ... A_n-1).T
                gradient = gradient @ matrix_transpose(factors[j])
            grads.append(reshape(gradient, np.shape(arrays[i])))
        return grads

    return backward


@shape_helper
def chain_shape(arrays):
    """The shape of the chain's product with a vector at either end made a matrix
    (a row first, a column last)."""
    first, last = np.shape(arrays[0]), np.shape(arrays[-1])
    return (first[0] if len(first) == 2 else 1, last[-1] if len(last) == 2 else 1)


@multi_dot.jvp_rule
def _(arrays):
    def tangent(darrays):
        # the product rule: the chain with one factor's tangent in its place
        change = zeros_like(multi_dot(arrays))
        for i in range(len(arrays)):
            replaced = []
            for j in range(len(arrays)):
                replaced.append(darrays[j] if j == i else arrays[j])
            change = change + multi_dot(replaced)
        return change

    return tangent
