"""What a ``vjp``'s pullback reads, kept as it was when ``vjp`` ran.

A pullback runs the backward pass later, after the caller may have written into
arrays the forward pass read: its arguments (``W -= lr * dW``), a module-level
array or one a closure holds (``W *= 2``), an object's attribute array
(``model.W[...] = 0``), or the list or dict of arrays a function reads
(``PARAMS[0] += 1``). The backward must see them as the forward did, or the
gradient is silently wrong (PyTorch refuses there; JAX's arrays cannot be
written). Two routes reach such arrays, and each is handled here:

- the saved values the forward hands the backward (``saved``), which hold the
  arrays the forward read through attributes and arguments, and views of them:
  ``of_their_own`` copies those that something outside ``saved`` also holds;
- names the backward's code reads from its namespace (a global ``W`` read as
  ``dt * W``): ``as_read_now`` gives the backward a namespace with copies of
  those, taken at ``vjp``.
"""

from __future__ import annotations

import copy
import sys
import types
import weakref

import numpy as np

from ppto.runtime.tensor import Tensor


def of_their_own(saved):
    """``saved`` (arrays, nested in tuples and lists) with a copy of each array
    that is referenced from outside ``saved``, or that is a view of such an array.

    An array the forward pass made is held by ``saved`` alone (and by the views
    of it there); one that the caller can reach (an argument, the result handed
    back, a global, an attribute, or a view of one) has references beyond those,
    so reference counts tell them apart without knowing where each came from.
    Arrays of their own, the common case, are not copied."""
    arrays, held = {}, {}  # id -> array; id -> references ``saved`` accounts for
    _gather(saved, arrays, held)
    pending = list(arrays.values())
    while pending:  # (a view holds one reference to its base)
        base = _base(pending.pop())
        if base is not None:
            held[id(base)] = held.get(id(base), 0) + 1
            if id(base) not in arrays:
                arrays[id(base)] = base
                pending.append(base)
    reached = _reached_from_outside(arrays, held)
    if not reached:
        return saved
    return _copied(saved, reached)


def _gather(value, arrays: dict, held: dict) -> None:
    kind = type(value)
    if kind is list or kind is tuple:
        for item in value:
            _gather(item, arrays, held)
    elif _mutable_array(value):
        arrays[id(value)] = value
        held[id(value)] = held.get(id(value), 0) + 1


def _reached_from_outside(arrays: dict, held: dict) -> set:
    """The ids of the arrays with references ``held`` does not account for, and of
    the views of those (memory the caller can write)."""
    probe = np.empty(0)
    key = id(probe)
    arrays[key] = probe
    del probe
    # (what holding an array in ``arrays`` and counting it adds, measured the
    # same way, rather than assumed: interpreters differ in what they count)
    baseline = _references(arrays, key)
    del arrays[key]
    outside = {
        key for key in arrays if _references(arrays, key) - baseline > held.get(key, 0)
    }
    if not outside:
        return outside
    reached = set(outside)
    for key, array in arrays.items():
        base = _base(array)
        while base is not None and key not in reached:
            if id(base) in outside:
                reached.add(key)
            base = _base(base)
    return reached


def _references(arrays: dict, key: int) -> int:
    return sys.getrefcount(arrays[key])


def _base(array):
    base = getattr(array, "base", None)
    return base if _mutable_array(base) else None


def _mutable_array(value) -> bool:
    if value is None or isinstance(value, (np.generic, int, float, complex, bool)):
        return False
    if isinstance(value, np.ndarray):
        return True
    return type(value).__module__.startswith("cupy") and hasattr(value, "shape")


def _copied(saved, reached: set):
    kind = type(saved)
    if kind is list or kind is tuple:
        return kind(_copied(item, reached) for item in saved)
    return saved.copy() if id(saved) in reached else saved


def with_own_lists(saved):
    """``saved`` with a copy of every list in it (the arrays themselves shared):
    a backward pass pops what its loops saved from their tapes, so a pullback
    called again would find them empty ("pop from empty list")."""
    if type(saved) is list:
        return [with_own_lists(item) for item in saved]
    if type(saved) is tuple:
        return tuple(with_own_lists(item) for item in saved)
    return saved


def as_read_now(backward, read: list):
    """``backward`` (a generated function), or, where its code names values of
    ``read`` (the user's globals and closure values the program read) that hold
    arrays, a copy of it reading copies of those as they are now."""
    names = _names_to_copy.get(backward)
    if names is None:
        # (lowered code reads a Tensor's array: see ppto.transform.lower)
        ids = {id(v.data if isinstance(v, Tensor) else v) for v in read}
        names = _names_to_copy[backward] = names_to_copy(backward, ids)
    if not names:
        return backward
    namespace = backward.__globals__
    copies = dict(namespace)
    copies.update({name: _copy_of(namespace[name]) for name in names})
    for name, value in namespace.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is namespace:
            function = types.FunctionType(
                value.__code__,
                copies,
                value.__name__,
                value.__defaults__,
                value.__closure__,
            )
            function.__kwdefaults__ = value.__kwdefaults__
            copies[name] = function
    return copies[backward.__name__]


_names_to_copy = weakref.WeakKeyDictionary()  # backward -> its names_to_copy


def names_to_copy(backward, read: set) -> list:
    """The names the backward's code (and the generated functions it calls)
    reads from its namespace whose values (their ids) are among ``read`` and
    hold arrays."""
    namespace = backward.__globals__
    codes, seen, names = [backward.__code__], set(), []
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            if name in seen or name not in namespace:
                continue
            seen.add(name)
            value = namespace[name]
            if isinstance(value, types.FunctionType) and value.__globals__ is namespace:
                codes.append(value.__code__)
            elif id(value) in read and _holds_arrays(value):
                names.append(name)
    return names


def _holds_arrays(value) -> bool:
    kind = type(value)
    if kind is list or kind is tuple:
        return any(map(_holds_arrays, value))
    if kind is dict:
        return any(map(_holds_arrays, value.values()))
    return _mutable_array(value) or isinstance(value, Tensor)


def _copy_of(value):
    """``value`` with each array in it (in lists, tuples and dicts) copied."""
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(map(_copy_of, value))
    if kind is dict:
        return {key: _copy_of(item) for key, item in value.items()}
    if _mutable_array(value) or isinstance(value, Tensor):
        return copy.copy(value)  # (a Tensor's copy has memory of its own)
    return value
