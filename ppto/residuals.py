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
    """``saved`` (arrays, nested in tuples, lists and dicts) with a copy of each
    array the caller can reach: one referenced from outside ``saved``, one inside
    a list or dict (or tuple) referenced from outside, and a view of such an array.

    An array the forward pass made is held by ``saved`` alone (and by the views
    of it there); one that the caller can reach (an argument, the result handed
    back, a global, an attribute, or a view of one) has references beyond those,
    so reference counts tell them apart without knowing where each came from.
    (A checkpointed step's saved state holds the attributes of the objects it
    reads, ``self.W``, in a dict the object's own ``vars`` shares: copied, so the
    recomputation reads them as they were.) Arrays of their own, the common case,
    are not copied."""
    found = _Found()
    whole = type(saved) in (list, tuple)  # (saved itself: held by the caller too)
    for item in saved if whole else (saved,):
        found.gather(item)
    found.count_views()
    reached = found.reached_from_outside()
    if not reached:
        return saved
    marked = reached | found.holding(reached) | ({id(saved)} if whole else set())
    return _copied(saved, marked, {})


class _Found:
    """The arrays and containers in ``saved`` (by id), how many references to each
    ``saved`` itself accounts for, and what each container holds."""

    def __init__(self) -> None:
        self.objects: dict = {}
        self.held: dict = {}
        self.items: dict = {}  # container id -> the ids of its arrays and containers

    def gather(self, value) -> int | None:
        """Count one reference to ``value`` and walk it (once); its id, or None
        for a value that is neither an array nor a container."""
        contents = _contents(value)
        if contents is None and not _mutable_array(value):
            return None
        key = id(value)
        self.held[key] = self.held.get(key, 0) + 1
        if key not in self.objects:
            self.objects[key] = value
            if contents is not None:
                inner = (
                    self.gather(item) for item in contents if type(item) not in PLAIN
                )
                self.items[key] = [k for k in inner if k is not None]
        return key

    def count_views(self) -> None:
        """A view holds one reference to its base (gathered, if not in saved)."""
        pending = [v for v in self.objects.values() if _mutable_array(v)]
        while pending:
            base = _base(pending.pop())
            if base is not None:
                key = id(base)
                self.held[key] = self.held.get(key, 0) + 1
                if key not in self.objects:
                    self.objects[key] = base
                    pending.append(base)

    def reached_from_outside(self) -> set:
        """The ids of what has references ``held`` does not account for, of what
        those hold, and of the views of arrays among them."""
        probe = np.empty(0)
        key = id(probe)
        self.objects[key] = probe
        del probe
        # (what holding a value in ``objects`` and counting it adds, measured the
        # same way, rather than assumed: interpreters differ in what they count)
        baseline = self._references(key)
        del self.objects[key]
        outside = [
            key
            for key in self.objects
            if self._references(key) - baseline > self.held[key]
        ]
        if not outside:
            return set()
        reached: set = set()
        while outside:
            key = outside.pop()
            if key not in reached:
                reached.add(key)
                outside.extend(self.items.get(key, ()))
        for key, value in self.objects.items():
            base = _base(value) if _mutable_array(value) else None
            while base is not None and key not in reached:
                if id(base) in reached:
                    reached.add(key)
                base = _base(base)
        return reached

    def holding(self, reached: set) -> set:
        """The ids of the containers with an array of ``reached`` inside."""
        holding: set = set()
        changed = True
        while changed:  # (containers nest a few levels deep: a few rounds)
            changed = False
            for key, inner in self.items.items():
                if key not in holding and any(
                    k in reached or k in holding for k in inner
                ):
                    holding.add(key)
                    changed = True
        return holding

    def _references(self, key: int) -> int:
        return sys.getrefcount(self.objects[key])


# values that are no array and hold none, told by their type alone (a random
# generator's state a checkpointed step keeps is a tuple of 625 ints)
PLAIN = frozenset({int, float, str, bool, type(None), bytes, complex})


def _contents(value):
    """The items of a list or tuple, the values of a dict (a plain one, or one of
    a subclass built as dict is); None for anything else."""
    kind = type(value)
    if kind is list or kind is tuple:
        return value
    if isinstance(value, dict) and kind.__init__ is dict.__init__:
        return value.values()
    return None


def _base(array):
    base = getattr(array, "base", None)
    return base if _mutable_array(base) else None


def _mutable_array(value) -> bool:
    if value is None or isinstance(value, (np.generic, int, float, complex, bool)):
        return False
    if isinstance(value, np.ndarray):
        return True
    return type(value).__module__.startswith("cupy") and hasattr(value, "shape")


def _copied(value, marked: set, made: dict):
    """``value`` with the arrays of ``marked`` copied (each once: ``made``), and
    the containers of ``marked`` (those holding such arrays) made again, of their
    type; the rest shared."""
    key = id(value)
    if key not in marked:
        return value
    if key in made:
        return made[key]
    kind = type(value)
    if kind is list or kind is tuple:
        result = kind([_copied(item, marked, made) for item in value])
    elif _contents(value) is not None:
        result = kind({k: _copied(item, marked, made) for k, item in value.items()})
    else:
        result = value.copy()
    made[key] = result
    return result


def with_own_lists(saved):
    """``saved`` with a copy of every list in it (the arrays themselves shared):
    a backward pass pops what its loops saved from their tapes, so a pullback
    called again would find them empty ("pop from empty list")."""
    if type(saved) is list:
        return [with_own_lists(item) for item in saved]
    if type(saved) is tuple:
        return tuple(with_own_lists(item) for item in saved)
    return saved


def as_read_now(backward, program):
    """``backward`` (a generated function of ``program``), or, where its code
    names values the program read (the user's globals and closure values) that
    hold arrays, a copy of it reading copies of those as they are now. Which
    names those are is found once per backward (``vjp`` asks on every call)."""
    names = _names_to_copy.get(backward)
    if names is None:
        # (lowered code reads a Tensor's array: see ppto.transform.lower)
        read = program.values_read()
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
