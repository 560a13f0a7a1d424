"""Helpers that generated code calls for Python lists of arrays (a list's adjoint is a
list with one adjoint per element). They work on tensors and on raw NumPy or CuPy
arrays, so lowered code can use them unchanged.
"""

from __future__ import annotations

from ppto.errors import GradError
from ppto.ops.rules import shape_helper
from ppto.runtime.tensor import Tensor, array_module


def _zeros_like(value):
    if isinstance(value, (tuple, list)):  # (an item of a list of pairs: (x, 1.0))
        return type(value)(_zeros_like(item) for item in value)
    if isinstance(value, Tensor):
        from ppto.ops.shape import zeros_like

        return zeros_like(value)
    return array_module(value).zeros_like(value)


@shape_helper
def zeros_like_list(values: list) -> list:
    """One zero adjoint per element of ``values``; none for None (a list one
    branch makes, unbound on the path taken, see ``pipeline._maybe_unbound``)."""
    if values is None:
        return []
    return [_zeros_like(value) for value in values]


@shape_helper
def zeros_like_items(value):
    """Zeros shaped like ``value`` item by item where it is a list or a tuple (one
    whose items differ in shape, such as a tape of inner loops' ranges, has no zeros
    as an array), else like ``value`` itself."""
    if isinstance(value, list):
        return [zeros_like_items(item) for item in value]
    if isinstance(value, tuple):
        return tuple(zeros_like_items(item) for item in value)
    return _zeros_like(value)


def add_lists(left: list, right) -> list:
    """Element-by-element sum of two lists of adjoints (of tuples item by item)."""
    return [add_adjoints(a, b) for a, b in zip(left, right)]


def add_at(values: list, index, addition) -> list:
    """A copy of ``values`` with ``addition`` added to element ``index`` (to each
    element of a slice, item by item: ``+`` would join the lists)."""
    out = list(values)
    if isinstance(index, slice):
        out[index] = add_lists(out[index], addition)
    else:  # (an item that is a tuple, (x, 1.0), takes its adjoints item by item)
        out[index] = add_adjoints(out[index], addition)
    return out


def extended(values, more):
    """What ``values += more`` leaves in ``values`` for ``more`` written out as a
    tuple or list: a list extended (Python's ``+=`` takes any iterable, where ``+``
    of a list and a tuple raises), a tuple joined, else ``values + more``."""
    if isinstance(values, (list, tuple)):
        return values + type(values)(more)
    return values + more


def replace_at(values: list, index, value, length_kept: bool = False) -> list:
    """A copy of ``values`` with element ``index`` replaced by ``value`` (``xs[i] =
    v`` on a list: the list holds v itself, whatever the other items are); a tuple
    refuses it, as Python's does. ``length_kept``: the gradient's code takes
    ``index`` for an item's or a slice's that keeps the list's length (an index in
    a variable, ``hs[s] = v``: only a slice written out, ``hs[1:] = v``, has the
    code that follows items moved), so a slice that changes it is refused."""
    if type(values) is tuple:
        raise TypeError("'tuple' object does not support item assignment")
    out = list(values)
    out[index] = value
    if length_kept and len(out) != len(values):
        raise GradError(
            f"ppto cannot differentiate a write into a slice of a list held in a "
            f"variable ({index}) that changes the list's length ({len(values)} "
            f"items, then {len(out)}): write the slice out (hs[1:3] = values)"
        )
    return out


def zero_at(adjoints: list, index) -> list:
    """A copy of ``adjoints`` with element ``index``'s made zero: the adjoint of
    the list ``replace_at`` was given (its item replaced reaches nothing after)."""
    out = list(adjoints)
    out[index] = _zeros_like(out[index])
    return out


@shape_helper
def replaced_span(index, before: list, after: list):
    """Where the values ``xs[index] = values`` wrote lie in the list it left
    (``after``, or its adjoint: one per item), given the list it was written into
    (``before``): ``index`` itself for an extended slice (whose values must fill
    it exactly), and for a plain slice, which may grow or shrink the list, the
    slice of ``after`` the values took (``hs[1:1] = [v]`` put v at
    ``after[1:2]``; read with ``index`` itself, the adjoints were of the wrong
    items, or none)."""
    start, stop, step = index.indices(len(before))
    if step != 1:  # (``hs[::1] = ...`` may grow the list too: a plain slice)
        return index
    stop = max(start, stop)  # (hs[3:1] = [v] inserts at 3, as hs[3:3] would)
    written = len(after) - (len(before) - (stop - start))
    return slice(start, start + written)


@shape_helper
def item_position(index):
    """``index`` where ``xs[index] = value`` was taken for an item's write (the
    value not a list, the index not a slice written out: ``hs[i] = h``). A slice
    held in a variable (``hs[s] = array``) would take the array's rows as items,
    whose adjoints this code does not stack back: refused, not summed wrongly."""
    if isinstance(index, slice):
        raise GradError(
            "ppto cannot differentiate writing values that are not a list into a "
            f"slice of a list held in a variable ({index}): write the slice out "
            "(hs[1:3] = values) or write a list (hs[s] = list(values))"
        )
    return index


@shape_helper
def zeros_replaced(before: list, index):
    """Zero adjoints for the items ``xs[index] = values`` replaced in ``before``
    (a slice of it): shaped like the items replaced, not like the values that
    took their place."""
    return zeros_like_items(before[index])


def repeat(values: list, count: int) -> list:
    """``values * count``: the list repeated (Python's list repetition)."""
    return list(values) * count


def fold_repeats(adjoints: list, count: int) -> list:
    """The adjoint of ``repeat``: each element's adjoint summed over its copies."""
    size = len(adjoints) // count
    return [sum(adjoints[position::size]) for position in range(size)]


def stacked_like(adjoints: list, primal):
    """The adjoint of ``list(primal)`` or ``tuple(primal)`` from the list's: a tuple
    where ``primal`` is one (an operator's several results), the items stacked where
    it is an array (its rows). A list only popped from has adjoints for its last
    items only (pops take from the end): the first ones have zero adjoints."""
    missing = len(primal) - len(adjoints)
    if missing > 0:
        adjoints = [_zeros_like(item) for item in primal[:missing]] + list(adjoints)
    if isinstance(primal, (tuple, list)):
        return tuple(adjoints)
    if len(adjoints) == 0:
        return _zeros_like(primal)
    if isinstance(primal, Tensor):
        from ppto.ops.shape import stack

        return stack(list(adjoints))
    xp = array_module(primal)
    return xp.stack([xp.asarray(adjoint) for adjoint in adjoints])


def unstacked(adjoint, adjoints: list) -> list:
    """The transpose of ``stacked_like``: the items of ``adjoint`` (a tuple or an
    array's rows) for the list's entries, the last ``len(adjoints)`` of them."""
    items = list(adjoint)
    return items[len(items) - len(adjoints) :]


def add_adjoints(left, right):
    """Two adjoints of one value: item by item for tuples (``+`` would join them),
    else added."""
    if isinstance(left, (tuple, list)) and isinstance(right, (tuple, list)):
        return add_lists(left, right)
    return left + right


# Generated gradients call these; differentiating such a gradient again (forward
# mode) needs to know what each argument is. Each is linear in its list and tensor
# arguments (the "fixed" and "metadata" ones pass through, read for their type and
# shape only), so its tangent is the same call on the tangents.
zeros_like_list.linear_list = ("metadata",)  # (constant: its tangent is zeros too)
add_lists.linear_list = ("list", "list")
add_at.linear_list = ("list", "fixed", "value")
replace_at.linear_list = ("list", "fixed", "value", "fixed")
zero_at.linear_list = ("list", "fixed")
repeat.linear_list = ("list", "fixed")
fold_repeats.linear_list = ("list", "fixed")
stacked_like.linear_list = ("list", "metadata")
unstacked.linear_list = ("value", "metadata")
add_adjoints.linear_list = ("value", "value")
stacked_like.makes_list = add_adjoints.makes_list = False  # (arrays or tuples)
