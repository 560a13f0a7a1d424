"""Pytrees: (nested) dicts, lists and tuples of arrays and numbers, differentiated
as their leaves. ``structure`` describes one (hashable: code is specialised on it),
``leaves`` lists its values in order and ``rebuilt`` makes the same structure of
other values (its gradients). ``leaf_call`` makes a call with the leaves, of the
function ``ppto.transform.pytrees.stand_in`` makes to take them.

>>> structure({"W": w, "b": [b1, b2]})           # doctest: +SKIP
('dict', (('W', None), ('b', ('list', (None, None)))))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ppto.errors import GradError
from ppto.transform import pytrees as transform_pytrees
from ppto.transform.source import signature

CONTAINERS = (dict, list, tuple)
LEAF = None


def is_pytree(value) -> bool:
    """Whether ``value`` is a dict, list or tuple (not a subclass: a named tuple's
    fields or a class's attributes are read another way)."""
    return type(value) in CONTAINERS


def structure(value, where: str = "the argument"):
    """``("dict", ((key, structure), ...))``, ``("list" | "tuple", (structure,
    ...))`` or ``LEAF``; keys are strings or integers (they name parameters)."""
    kind = type(value)
    if kind is dict:
        for key in value:
            if type(key) not in (str, int):
                raise GradError(
                    f"cannot differentiate with respect to {where}: its key {key!r} "
                    f"is a {type(key).__name__}; differentiated dicts take string or "
                    "integer keys"
                )
        return (
            "dict",
            tuple(
                (key, structure(item, f"{where}[{key!r}]"))
                for key, item in value.items()
            ),
        )
    if kind in (list, tuple):
        return (
            kind.__name__,
            tuple(
                structure(item, f"{where}[{number}]")
                for number, item in enumerate(value)
            ),
        )
    return LEAF


def described(tree) -> str:
    """``tree`` in words: "a dict with keys 'W', 'b'", "a list of 3"."""
    return "a single value" if tree is LEAF else transform_pytrees.described(tree)


def leaves(value) -> list:
    """The leaves of ``value`` in order (a dict's in its keys' order)."""
    if type(value) is dict:
        return [leaf for item in value.values() for leaf in leaves(item)]
    if type(value) in (list, tuple):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def paths(tree, where: str) -> list[str]:
    """How the caller writes each leaf: ``params['W1']``, ``ws[0]``."""
    if tree is LEAF:
        return [where]
    kind, entries = tree
    if kind == "dict":
        return [p for key, item in entries for p in paths(item, f"{where}[{key!r}]")]
    return [p for n, item in enumerate(entries) for p in paths(item, f"{where}[{n}]")]


def rebuilt(tree, values: Iterator):
    """The structure ``tree`` holding the next values of ``values``."""
    if tree is LEAF:
        return next(values)
    kind, entries = tree
    if kind == "dict":
        return {key: rebuilt(item, values) for key, item in entries}
    items = [rebuilt(item, values) for item in entries]
    return items if kind == "list" else tuple(items)


@dataclass
class LeafCall:
    """A call with its pytree arguments (``trees``: parameter -> structure) passed
    as their leaves to ``function``, their stand-in."""

    function: Callable
    names: list  # the user function's parameters
    values: list  # what the call gives them
    trees: dict
    kinds: dict = field(default_factory=dict)  # the stand-in's parameter -> kind

    def arguments(self) -> tuple[list, dict]:
        """The stand-in's positional and keyword arguments."""
        positional, keywords = [], {}
        for name, leaf, _ in self.leaves():
            kind = self.kinds[name]
            if kind is kind.KEYWORD_ONLY:
                keywords[name] = leaf
            elif kind is kind.VAR_POSITIONAL:
                positional += leaf
            elif kind is kind.VAR_KEYWORD:
                keywords.update(leaf)
            else:
                positional.append(leaf)
        return positional, keywords

    def leaves(self, only: str | None = None) -> list[tuple]:
        """``(stand-in parameter, value, the caller's path to it)`` for every
        parameter of the stand-in (only those ``only`` expands to, if given)."""
        parameters = iter(signature_names(self.function))
        found = []
        for name, value in zip(self.names, self.values):
            tree = self.trees.get(name, LEAF)
            values = leaves(value) if tree is not LEAF else [value]
            where = paths(tree, name) if tree is not LEAF else [name]
            for leaf, path in zip(values, where):
                parameter = next(parameters)
                if only is None or only == name:
                    found.append((parameter, leaf, path))
        return found

    def gradient(self, name: str, by_leaf: dict):
        """The gradient of parameter ``name`` from those of the stand-in's
        parameters (``by_leaf``; None for a leaf not differentiated)."""
        parameters = [parameter for parameter, _, _ in self.leaves(name)]
        if name not in self.trees:
            return by_leaf.get(parameters[0])
        return rebuilt(self.trees[name], iter(by_leaf.get(p) for p in parameters))


def signature_names(function: Callable) -> list[str]:
    return list(signature(function).parameters)


def leaf_call(function: Callable, names: list, values: list, trees: dict) -> LeafCall:
    """The call of ``function`` with ``values`` (for parameters ``names``) made with
    the leaves of its arguments ``trees`` (see ``stand_in``)."""
    made = transform_pytrees.stand_in(function, trees)
    kinds = {p.name: p.kind for p in signature(made).parameters.values()}
    return LeafCall(made, list(names), list(values), trees, kinds)
