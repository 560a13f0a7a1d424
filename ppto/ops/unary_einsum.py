"""np.einsum of one operand (``np.einsum('ii->', x)``, ``'ii->i'``, ``'ij->j'``,
``'...ij->...ji'``): a diagonal, sums over indices and a transpose of one array.

Its gradient puts dY back where each result element came from: dY transposed to
x's order of indices and broadcast along the summed ones, or, where an index repeats
(a diagonal or trace), dY times a constant mask of x's shape that is 1 where the
repeated indices agree (``einsum(dY, mask, subscripts='i,ij->ij')`` for ``'ii->i'``).
"""

import string

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.linalg import einsum
from ppto.ops.primitive import primitive
from ppto.ops.rules import rank_helper, rank_of
from ppto.ops.shape import broadcast_to, expand_dims


@rank_helper("x")
def unary_subscripts(subscripts, x):
    """``subscripts`` of one operand with the result written out and ``...`` as
    letters of their own, one per axis it stands for: ``'ii'`` -> ``'ii->'``,
    ``'ji'`` -> ``'ji->ij'`` (NumPy's implicit result: the indices met once, in
    alphabetical order), ``'...ij->...ji'`` of a 3-axis x -> ``'aij->aji'``."""
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    _refuse_operands(subscripts, inputs)
    letters = inputs.replace("...", "")
    batch = max(rank_of(x) - len(letters), 0) if "..." in inputs else 0
    spare = [c for c in string.ascii_letters if c not in text]
    ellipsis = "".join(spare[:batch])
    inputs = inputs.replace("...", ellipsis)
    if arrow:
        output = output.replace("...", ellipsis)
    else:
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        output = ellipsis + "".join(once)
    return f"{inputs}->{output}"


def diagonals_first(subscripts: str) -> tuple[str, list] | None:
    """For np.einsum of two operands where one repeats an index (its diagonal or
    trace, ``'ii,i->i'``, which ppto.einsum does not take): the subscripts of the
    product of the operands' diagonals, its result written out (NumPy's implicit
    one where it is not), and each operand's unary subscripts taking its diagonal
    first (None for one that repeats none): ``'ii,i->i'`` -> ``('i,i->i',
    ['ii->i', None])``. None where no operand repeats an index, or one's ``...``
    is not in front."""
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    parts = inputs.split(",")
    if len(parts) != 2 or not any(_repeats(part) for part in parts):
        return None
    if any("..." in part.removeprefix("...") for part in parts):
        return None
    if not arrow:  # (the indices met once, in alphabetical order: as NumPy's)
        letters = inputs.replace("...", "").replace(",", "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        output = "..." * ("..." in inputs) + "".join(once)
    diagonals, firsts = [], []
    for part in parts:
        front = "..." * part.startswith("...")
        kept = front + "".join(dict.fromkeys(part.removeprefix("...")))
        diagonals.append(kept)
        firsts.append(f"{part}->{kept}" if _repeats(part) else None)
    return f"{diagonals[0]},{diagonals[1]}->{output}", firsts


def _repeats(part: str) -> bool:
    letters = part.replace("...", "")
    return len(set(letters)) != len(letters)


def _refuse_operands(subscripts, inputs) -> None:
    if "," in inputs:
        raise ShapeError(
            f"ppto.unary_einsum takes one operand; {subscripts!r} names "
            f"{inputs.count(',') + 1}: np.einsum of two is ppto.einsum"
        )


def _parts(subscripts, x) -> tuple:
    inputs, _, output = unary_subscripts(subscripts, x).partition("->")
    return inputs, output


@primitive("(Tensor[...]) -> Tensor[...]", tangent="linear")
def unary_einsum(xp, x, subscripts):
    """np.einsum of one operand: x's elements summed over the indices the result
    leaves out, along the diagonal of an index written twice, in the result's order
    (``'ii->'`` a trace, ``'ii->i'`` a diagonal, ``'ij->ji'`` a transpose)."""
    _refuse_operands(subscripts, subscripts.partition("->")[0])
    return xp.einsum(subscripts, x)


@unary_einsum.grad_rule
def _(x, subscripts):
    def backward(dY):
        if repeats_index(subscripts, x):  # (a diagonal: dY on it through a mask)
            mask = diagonal_mask(x, subscripts)
            return einsum(dY, mask, subscripts=masked_subscripts(subscripts, x))
        # dY back in x's order of indices, broadcast along those summed
        kept = (
            unary_einsum(dY, subscripts=kept_subscripts(subscripts, x))
            if reorders(subscripts, x)
            else dY
        )
        return (
            broadcast_to(expand_dims(kept, summed_axes(subscripts, x)), np.shape(x))
            if sums_an_index(subscripts, x)
            else kept
        )

    return backward


@rank_helper("x")
def repeats_index(subscripts, x) -> bool:
    """Whether an index is written twice for x (a diagonal)."""
    inputs, _ = _parts(subscripts, x)
    return len(set(inputs)) != len(inputs)


@rank_helper("x")
def kept_subscripts(subscripts, x):
    """For an x with no repeated index: the subscripts taking dY to x's order of the
    indices the result keeps (``'ij->ji'``'s ``'ji->ij'``, ``'ijk->ik'``'s
    ``'ik->ik'``)."""
    inputs, output = _parts(subscripts, x)
    return f"{output}->{''.join(c for c in inputs if c in output)}"


@rank_helper("x")
def reorders(subscripts, x) -> bool:
    """Whether the result's indices are in another order than x's."""
    inputs, output = _parts(subscripts, x)
    return output != "".join(c for c in inputs if c in output)


@rank_helper("x")
def sums_an_index(subscripts, x) -> bool:
    """Whether the result leaves out one of x's indices (summed over)."""
    inputs, output = _parts(subscripts, x)
    return any(c not in output for c in inputs)


@rank_helper("x")
def summed_axes(subscripts, x) -> tuple:
    """x's axes whose index the result leaves out (summed)."""
    inputs, output = _parts(subscripts, x)
    return tuple(axis for axis, c in enumerate(inputs) if c not in output)


@rank_helper("x")
def masked_subscripts(subscripts, x):
    """The subscripts of the gradient's einsum of dY and ``diagonal_mask``: x's
    indices with each repeat renamed (``'ii->i'`` -> ``'i,ij->ij'``)."""
    inputs, output = _parts(subscripts, x)
    text = f"{inputs}->{output}"
    spare = iter(c for c in string.ascii_letters if c not in text)
    distinct = ""
    for axis, c in enumerate(inputs):
        distinct += c if inputs.index(c) == axis else next(spare)
    return f"{output},{distinct}->{distinct}"


@primitive("(Tensor[...]) -> Tensor[...]", differentiable=False)
def diagonal_mask(xp, x, subscripts):
    """x's shape and dtype, 1 where the axes under each repeated index of
    ``subscripts`` are at the same place, else 0 (``'ii->'`` of a 3x3 x: eye(3))."""
    inputs, _ = _parts(subscripts, x)
    mask = xp.ones(x.shape, dtype=bool)
    for axis, c in enumerate(inputs):
        first = inputs.index(c)
        if first != axis:
            mask = mask & (_places(xp, x, first) == _places(xp, x, axis))
    return mask.astype(x.dtype)


def _places(xp, x, axis: int):
    """0, 1, ... along ``axis`` of x, shaped to broadcast against x."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return xp.reshape(xp.arange(x.shape[axis]), shape)
