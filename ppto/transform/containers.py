"""Which names of a function may be bound to a list, tuple or dict, and which to
one whose items may be such containers. ``ys.copy()`` and ``ys * 2`` of a list hold
the very arrays ``ys`` holds (a shallow copy, a repetition), where those of an
array are new arrays: ``aliases`` tells the two apart with this. Cautious: a name
bound anywhere to what may be a container (a parameter not described as an array, a
user's function's result) may be one.
"""

from __future__ import annotations

from dataclasses import dataclass

import gast

from ppto.transform.trees import stores

NEITHER = (False, False)
EITHER = (True, True)
# NumPy's functions that return a list or tuple of arrays (``np.split(y, 2)``)
SEQUENCE_RESULTS = {
    "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack",
    "broadcast_arrays", "meshgrid", "nonzero", "atleast_1d", "atleast_2d",
    "atleast_3d",
}  # fmt: skip
# builtins whose result is a container, and those whose result is never one
_MAKING = {"list", "tuple", "sorted", "reversed", "set", "frozenset", "zip"}
_NEVER = {"len", "float", "int", "abs", "round", "bool", "range", "sum", "print"}
_ARRAY_ATTRIBUTES = {"T", "mT", "real", "imag", "size", "ndim"}
# modules whose functions are called by name (``np.split``, ``copy.copy``)
_MODULES = {"np", "numpy", "ppto", "copy", "math"}


@dataclass(frozen=True)
class Containers:
    """``names``: those that may be bound to a list, tuple or dict; ``nested``:
    those whose items may be one (``rows = [[a, b], [c]]``)."""

    names: frozenset = frozenset()
    nested: frozenset = frozenset()
    # parameters given an array (not 0-d: an integer's rank is 0 too) and never
    # rebound: a list times one is NumPy's arithmetic (an array's operator comes
    # before the list's repetition), never a repetition (``x * s``, s perhaps a
    # list)
    numeric: frozenset = frozenset()

    def kind(self, value) -> tuple[bool, bool]:
        """Whether ``value`` may be a container, and whether its items may be.

        >>> Containers(frozenset({"ys"})).kind(gast.parse("ys.copy()").body[0].value)
        (True, False)
        """
        if isinstance(value, gast.Name):
            return value.id in self.names, value.id in self.nested
        if isinstance(value, (gast.List, gast.Tuple, gast.Set)):
            return True, any(self._item(item)[0] for item in value.elts)
        if isinstance(value, gast.Dict):
            return True, any(self._item(item)[0] for item in value.values)
        if isinstance(value, (gast.ListComp, gast.SetComp, gast.DictComp)):
            return EITHER
        if isinstance(value, gast.Subscript):
            owner = self.kind(value.value)
            if isinstance(value.slice, gast.Slice):
                return owner
            return owner[1], owner[1]  # (an item of nested lists: a list)
        if isinstance(value, gast.BinOp) and isinstance(value.op, gast.Mult):
            if self.repeated(value) is None:
                return NEITHER
            return _either(self.kind(value.left), self.kind(value.right))
        if isinstance(value, gast.BinOp) and isinstance(value.op, gast.Add):
            left, right = self.kind(value.left), self.kind(value.right)
            return (True, left[1] or right[1]) if left[0] and right[0] else NEITHER
        if isinstance(value, gast.IfExp):
            return _either(self.kind(value.body), self.kind(value.orelse))
        if isinstance(value, gast.BoolOp):
            return _either(*(self.kind(item) for item in value.values))
        if isinstance(value, gast.NamedExpr):
            return self.kind(value.value)
        if isinstance(value, gast.Call):
            return self._called(value)
        if isinstance(value, gast.Attribute):
            if _module_owner(value.value) or value.attr in _ARRAY_ATTRIBUTES:
                return NEITHER
            return (True, False) if value.attr == "shape" else EITHER
        return NEITHER

    def repeated(self, value):
        """The list or tuple ``value`` repeats (``[y] * 3``, ``2 * ys``: the same
        objects at several positions), else None: a product with a float written
        out (``ys * 2.0``), or with what may be a container (``u * u``), is
        arithmetic on arrays."""
        if not (isinstance(value, gast.BinOp) and isinstance(value.op, gast.Mult)):
            return None
        for sequence, count in ((value.left, value.right), (value.right, value.left)):
            if self.kind(sequence)[0] and self._may_be_whole(count):
                return sequence
        return None

    def _may_be_whole(self, count) -> bool:
        """Whether ``count`` may be a whole number (a list's repetition count)."""
        if isinstance(count, gast.Name) and count.id in self.numeric:
            return False
        return not self.kind(count)[0] and _counts_by_form(count)

    def _item(self, item) -> tuple[bool, bool]:
        """The kind of an item written in a list (``*ys``: each of ys's items)."""
        if isinstance(item, gast.Starred):
            held = self.kind(item.value)[1]
            return held, held
        return self.kind(item) if item is not None else NEITHER  # (``**d``)

    def _called(self, call) -> tuple[bool, bool]:
        function = call.func
        arguments = [self.kind(argument) for argument in call.args]
        if isinstance(function, gast.Attribute):
            if _module_owner(function.value):
                if function.attr in ("copy", "deepcopy") and arguments:
                    return arguments[0]  # (``copy.copy(ys)``)
                return (function.attr in SEQUENCE_RESULTS, False)
            owner = self.kind(function.value)
            if function.attr == "copy":
                return owner
            if function.attr == "tolist":
                return EITHER
            if not owner[0]:
                return NEITHER  # (an array's method: ``y.sum()``)
            if function.attr in ("keys", "values", "items"):
                return True, owner[1] or function.attr == "items"
            return owner[1], owner[1]  # (``d.get(k)``, ``c.pop()``: an item)
        name = getattr(function, "id", None)
        if name in _MAKING:
            return True, name == "zip" or any(held for _, held in arguments)
        if name == "dict":
            return EITHER
        if name in ("max", "min"):
            if len(arguments) == 1:  # (the largest item)
                return arguments[0][1], arguments[0][1]
            return _either(*arguments)
        if name in _NEVER:
            return NEITHER
        return EITHER  # (a user's function: what it returns is not known here)

    def elements(self, target, source) -> list:
        """``(name, kind)`` for each name ``target`` binds to (a part of) an
        element of ``source`` (a loop's ``for target in source``): ``for i, a in
        enumerate(c)`` binds ``a`` to an element of ``c`` and ``i`` to a number."""
        name = getattr(source, "func", None)
        name = getattr(name, "id", None) if isinstance(source, gast.Call) else None
        arguments = source.args if name else []
        if isinstance(target, (gast.Tuple, gast.List)):
            parts = target.elts
            if name == "enumerate" and len(parts) == 2 and len(arguments) == 1:
                numbers = [(n, NEITHER) for n in sorted(stores(parts[0]))]
                return numbers + self.elements(parts[1], arguments[0])
            if name == "zip" and len(parts) == len(arguments):
                pairs = zip(parts, arguments)
                return [found for t, s in pairs for found in self.elements(t, s)]
        if name in ("reversed", "sorted", "list", "tuple") and len(arguments) == 1:
            return self.elements(target, arguments[0])
        if name == "range":
            return [(n, NEITHER) for n in sorted(stores(target))]
        held = self.kind(source)[1]
        if isinstance(target, gast.Name):
            return [(target.id, (held, held))]
        return [(n, (held, held)) for n in sorted(stores(target))]  # (its parts)


def _either(*kinds) -> tuple[bool, bool]:
    return any(k[0] for k in kinds), any(k[1] for k in kinds)


def _module_owner(owner) -> bool:
    while isinstance(owner, gast.Attribute):
        owner = owner.value
    return isinstance(owner, gast.Name) and owner.id in _MODULES


def _counts_by_form(count) -> bool:
    """Whether ``count`` may be a whole number (a list's repetition count)."""
    if isinstance(count, gast.Constant):
        return type(count.value) is int
    if isinstance(count, gast.UnaryOp):
        return _counts_by_form(count.operand)
    if isinstance(count, gast.BinOp):
        return _counts_by_form(count.left) and _counts_by_form(count.right)
    if isinstance(count, gast.Call):
        return not _module_owner(count.func)  # (``np.exp(x)``: an array)
    if isinstance(count, gast.Attribute):
        return count.attr not in ("T", "mT", "real", "imag")
    return not isinstance(count, (gast.List, gast.Tuple, gast.Dict))


def containers(
    parsed, nodes: dict, local: set, described: set | None, arrays=()
) -> Containers:
    """The ``Containers`` of the function ``parsed`` (its nodes by kind
    ``nodes``, its local names ``local``): parameters not among ``described``
    (those given arrays or numbers; None where nothing is known of them: each is
    taken for a list of arrays, not of lists), the module-level or enclosing
    values that are containers, and every name bound to what may be one (to a
    fixed point: ``zs = ys.copy()`` after ``ys = [a, b]``). ``arrays``: the
    parameters given arrays of one axis or more, which count no repetition."""
    names, nested = set(), set()
    for parameter in parsed.parameters:
        if parameter not in (described or ()):
            names.add(parameter)
            if described is not None:
                nested.add(parameter)
    for node in nodes.get(gast.Name, ()):
        if node.id in local or node.id in names:
            continue
        value = parsed.namespace.get(node.id)
        if isinstance(value, (list, tuple, dict)):
            names.add(node.id)
            items = value.values() if isinstance(value, dict) else value
            if any(isinstance(item, (list, tuple, dict)) for item in items):
                nested.add(node.id)
    rebound = {
        node.id
        for node in nodes.get(gast.Name, ())
        if isinstance(node.ctx, (gast.Store, gast.Del))
    }
    numeric = frozenset(set(arrays) & set(parsed.parameters) - rebound)
    found = Containers(frozenset(names), frozenset(nested), numeric)
    while True:
        for name, (container, holds) in _bound(found, nodes):
            if container:
                names.add(name)
            if holds:
                nested.add(name)
        if len(names) == len(found.names) and len(nested) == len(found.nested):
            return found
        found = Containers(frozenset(names), frozenset(nested), numeric)


def _bound(found: Containers, nodes: dict):
    """``(name, kind)`` for what each binding in ``nodes`` binds a name to."""
    for node in [*nodes.get(gast.Assign, ()), *nodes.get(gast.AnnAssign, ())]:
        targets = node.targets if isinstance(node, gast.Assign) else [node.target]
        for target in targets if node.value is not None else ():
            yield from _paired(found, target, node.value)
    for node in nodes.get(gast.For, ()):
        yield from found.elements(node.target, node.iter)
    for node in nodes.get(gast.AugAssign, ()):  # ``t += [h]`` keeps a list
        if isinstance(node.target, gast.Name):
            kind = found.kind(gast.BinOp(node.target, node.op, node.value))
            yield node.target.id, kind
    for node in nodes.get(gast.Call, ()):  # ``c.append([a, b])``: c holds a list
        function = node.func
        if (
            isinstance(function, gast.Attribute)
            and isinstance(function.value, gast.Name)
            and function.attr in ("append", "extend", "insert")
            and node.args
        ):
            kind = found.kind(node.args[-1])
            holds = kind[1] if function.attr == "extend" else kind[0]
            yield function.value.id, (False, holds)
    for node in nodes.get(gast.Assign, ()):  # ``c[0] = [a, b]``: c holds a list
        for target in node.targets:
            if isinstance(target, gast.Subscript) and isinstance(
                target.value, gast.Name
            ):
                yield target.value.id, (False, found.kind(node.value)[0])


def _paired(found: Containers, target, value):
    if isinstance(target, gast.Name):
        yield target.id, found.kind(value)
    elif isinstance(target, (gast.Tuple, gast.List)):
        if isinstance(value, (gast.Tuple, gast.List)) and len(value.elts) == len(
            target.elts
        ):
            for item_target, item in zip(target.elts, value.elts):
                yield from _paired(found, item_target, item)
        else:
            held = found.kind(value)[1]
            for name in sorted(stores(target)):
                yield name, (held, held)
