"""Norms: ``np.linalg.norm`` with every ``ord`` NumPy takes, of vectors (over one
axis) and of matrices (over two axes, of each in a stack), with their gradients and
tangents. Where a norm has a kink (a 1-norm at a zero element, a largest element or
row sum reached twice, the spectral norm's largest singular value repeated) the
gradient is one of its subgradients, as in PyTorch; at a zero 2-norm it is zero.
"""

import math

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.decompositions import svd
from ppto.ops.elementwise import abs, where
from ppto.ops.logic import sign
from ppto.ops.primitive import primitive
from ppto.ops.reductions import REDUCE, reduce_sum, unreduce
from ppto.ops.rules import rank_helper, rank_of
from ppto.ops.shape import cast, dtype_of, expand_dims, moveaxis, zeros_like


@primitive(REDUCE)
def norm(xp, x, ord=None, axis=None, keepdims=False):
    """``np.linalg.norm``: over one axis, the vector norms (ord None or 2, 1, inf,
    -inf, 0 (the count of non-zero elements), any other p: (sum |x|**p)**(1/p));
    over two axes, the matrix norms (None or 'fro', 'nuc', 2 and -2 (the largest
    and smallest singular values), 1 and -1 (column sums), inf and -inf (row
    sums)); with ord None, the 2-norm of all the elements over any axes."""
    norm_kind(x, ord, axis)  # (refusing what NumPy refuses, saying what it takes)
    return xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


@rank_helper("x")
def norm_kind(x, ord, axis) -> str:
    """Which norm ``ord`` names over ``axis`` of x (see ``norm``)."""
    if ord is None:
        return "euclidean"
    axes = rank_of(x) if axis is None else len(np.atleast_1d(axis))
    if axes == 1 and not isinstance(ord, str):
        vector_kinds = {2: "euclidean", 0: "count", 1: "sum"}
        vector_kinds.update({math.inf: "largest", -math.inf: "smallest"})
        return vector_kinds.get(ord, "power")
    matrix_kinds = {"fro": "euclidean", "nuc": "nuclear"}
    matrix_kinds.update({2: "spectral_largest", -2: "spectral_smallest"})
    matrix_kinds.update({1: "columns_largest", -1: "columns_smallest"})
    matrix_kinds.update({math.inf: "rows_largest", -math.inf: "rows_smallest"})
    if axes == 2 and ord in matrix_kinds:
        return matrix_kinds[ord]
    raise ShapeError(
        f"ppto.norm: ord={ord!r} over {axes} {'axis' if axes == 1 else 'axes'} is "
        "not a norm NumPy takes: over "
        "one axis a number (2, 1, inf, -inf, 0, any p); over two axes 'fro', "
        "'nuc', 2, -2, 1, -1, inf or -inf; over more, ord=None"
    )


@rank_helper("x")
def matrix_axes(x, axis) -> tuple:
    """The two axes a matrix norm is taken over, from 0 (None for a vector norm:
    its rules read them in a branch it does not take; a number's, 0-d, too)."""
    rank = rank_of(x)
    pair = (rank - 2, rank - 1) if axis is None else np.atleast_1d(axis)
    if len(pair) != 2 or rank == 0:
        return None
    return tuple(int(a) % rank for a in pair)


@rank_helper("x")
def line_axes(x, ord, axis) -> tuple:
    """(the axis a matrix norm over rows or columns sums |x| along, the axis it
    takes the extremum of those sums along): down the columns for ord 1 and -1,
    along the rows for inf and -inf."""
    pair = matrix_axes(x, axis)
    return pair if ord in (1, -1) or pair is None else pair[::-1]


# Every norm but the 2-norm is a sum or an extremum of |x| (of its rows' or
# columns' sums), or of the singular values: its gradient is the sign of x where
# the extremum is reached (shared among ties; 0 at 0, as abs's), or U V.T of the
# singular vectors concerned (u_1 v_1.T for the largest).


@norm.grad_rule
def _(x, ord=None, axis=None, keepdims=False, out=None):
    def backward(dY):
        spread = unreduce(dY, x, axis, keepdims)
        if norm_kind(x, ord, axis) == "count":
            return zeros_like(x)
        if norm_kind(x, ord, axis) == "sum":
            return spread * sign(x)
        if norm_kind(x, ord, axis) == "power":
            powered = spread * abs(x) ** (ord - 1)
            peak = unreduce(where(out == 0, 1, out), x, axis, keepdims)
            scaled = powered / peak ** (ord - 1)
            return scaled * sign(x)
        if norm_kind(x, ord, axis) in ("largest", "smallest"):
            hit = abs(x) == unreduce(out, x, axis, keepdims)
            share = dY / cast(reduce_sum(hit, axis, keepdims), dtype_of(x))
            shared = where(hit, unreduce(share, x, axis, keepdims), 0.0)
            return shared * sign(x)
        if norm_kind(x, ord, axis) in (
            "nuclear",
            "spectral_largest",
            "spectral_smallest",
        ):
            pair = matrix_axes(x, axis)
            U, s, Vh = svd(moveaxis(x, pair, (-2, -1)), full_matrices=False)
            if norm_kind(x, ord, axis) == "spectral_largest":
                U = U[..., :1]
                Vh = Vh[..., :1, :]
            if norm_kind(x, ord, axis) == "spectral_smallest":
                U = U[..., -1:]
                Vh = Vh[..., -1:, :]
            return spread * moveaxis(U @ Vh, (-2, -1), pair)
        if norm_kind(x, ord, axis) in (
            "columns_largest",
            "columns_smallest",
            "rows_largest",
            "rows_smallest",
        ):
            summed, compared = line_axes(x, ord, axis)
            kept = out if keepdims else expand_dims(out, matrix_axes(x, axis))
            reached = cast(reduce_sum(abs(x), summed, True) == kept, dtype_of(x))
            part = reached / reduce_sum(reached, compared, True)
            return spread * part * sign(x)
        scale = dY / where(out == 0, 1, out)  # (x is all zeros where out is)
        return unreduce(scale, x, axis, keepdims) * x

    return backward


@norm.jvp_rule
def _(x, ord=None, axis=None, keepdims=False, out=None):
    def tangent(dx):
        signed = dx * sign(x)
        if norm_kind(x, ord, axis) == "count":
            return zeros_like(out)
        if norm_kind(x, ord, axis) == "sum":
            return reduce_sum(signed, axis, keepdims)
        if norm_kind(x, ord, axis) == "power":
            change = reduce_sum(signed * abs(x) ** (ord - 1), axis, keepdims)
            return change / where(out == 0, 1, out) ** (ord - 1)
        if norm_kind(x, ord, axis) in ("largest", "smallest"):
            hit = cast(abs(x) == unreduce(out, x, axis, keepdims), dtype_of(x))
            total = reduce_sum(signed * hit, axis, keepdims)
            return total / reduce_sum(hit, axis, keepdims)
        if norm_kind(x, ord, axis) in (
            "nuclear",
            "spectral_largest",
            "spectral_smallest",
        ):
            pair = matrix_axes(x, axis)
            U, s, Vh = svd(moveaxis(x, pair, (-2, -1)), full_matrices=False)
            if norm_kind(x, ord, axis) == "spectral_largest":
                U = U[..., :1]
                Vh = Vh[..., :1, :]
            if norm_kind(x, ord, axis) == "spectral_smallest":
                U = U[..., -1:]
                Vh = Vh[..., -1:, :]
            return reduce_sum(moveaxis(U @ Vh, (-2, -1), pair) * dx, pair, keepdims)
        if norm_kind(x, ord, axis) in (
            "columns_largest",
            "columns_smallest",
            "rows_largest",
            "rows_smallest",
        ):
            pair = matrix_axes(x, axis)
            summed, compared = line_axes(x, ord, axis)
            kept = out if keepdims else expand_dims(out, pair)
            reached = cast(reduce_sum(abs(x), summed, True) == kept, dtype_of(x))
            part = reached / reduce_sum(reached, compared, True)
            return reduce_sum(signed * part, pair, keepdims)
        return reduce_sum(x * dx, axis, keepdims) / where(out == 0, 1, out)

    return tangent
