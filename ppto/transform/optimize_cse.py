"""Common-subexpression elimination on generated statements: an expression computed
again while the name that holds its first value still holds it is read from that
name (the forward's ``t6 = t3 * t5`` read by the backward instead of recomputing
``dt5 * t5`` with ``dt5 = t3``). Only expressions of built-in operators, arithmetic
and reads; never across a store to an operand or a write in place.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import gast

from ppto.ops.primitive import Primitive
from ppto.transform import trees
from ppto.transform.lower import FRESH
from ppto.transform.optimize import rename
from ppto.transform.trees import single_target, stores

# expressions whose value is a new immutable value (or a view read) of their operands
_PURE_NODES = (
    gast.BinOp,
    gast.UnaryOp,
    gast.Compare,
    gast.BoolOp,
    gast.IfExp,
    gast.Attribute,
    gast.Subscript,
    gast.Slice,
    gast.Tuple,
)
_ATOMS = (gast.Name, gast.Constant)
# statements after which nothing known before holds: ``_Eliminator._changed``
_REBINDING = {gast.AugAssign, gast.Delete, gast.FunctionDef}
_VIEWS = {gast.Subscript, gast.Attribute}  # a store into one writes an array in place
_COMPOUND = (gast.If, gast.For, gast.While)


def eliminate_common_subexpressions(
    body: list, namespace: dict, temporaries: set[str]
) -> list:
    """Read repeated pure expressions from the name holding their first value.

    ``t3 = x - mu`` after ``t1 = x - mu`` (neither ``x`` nor ``mu`` nor ``t1``
    stored in between) makes later reads of the temporary ``t3`` read ``t1``; a name
    that is not a temporary becomes a copy (``y = t1``). Sub-expressions match too:
    ``dx = -(dt5 * t5)`` with ``dt5 = t3`` and ``t6 = t3 * t5`` available is
    ``dx = -t6``."""
    eliminator = _Eliminator(namespace, temporaries)
    return eliminator.block(body, _Table())


@dataclass
class _Table:
    """What is available at a point: expression key -> the name holding its value
    (with the names it depends on), and copies ``a = b`` (a -> b)."""

    values: dict = field(default_factory=dict)  # key -> (holder, depends)
    copies: dict = field(default_factory=dict)

    def without(self, names: set) -> _Table:
        """The entries that stay true when ``names`` are stored (or written)."""
        return _Table(
            {k: (h, d) for k, (h, d) in self.values.items() if not d & names},
            {a: b for a, b in self.copies.items() if a not in names and b not in names},
        )

    def canonical(self, identifier: str) -> str:
        return self.copies.get(identifier, identifier)


class _Eliminator:
    def __init__(self, namespace: dict, temporaries: set[str]):
        self.namespace = namespace
        self.temporaries = temporaries

    def block(self, body: list, table: _Table) -> list:
        for position, statement in enumerate(body):
            if isinstance(statement, _COMPOUND):
                table = self._compound(statement, table)
                continue
            target = single_target(statement)
            if target is None or not self._pure(statement.value):
                changed = self._changed(statement)
                table = _Table() if changed is None else table.without(changed)
                if isinstance(statement, gast.Return):
                    break
                continue
            computed = not isinstance(statement.value, _ATOMS)
            keys = _Keys(table.canonical)
            statement.value = self._replace(statement.value, table, keys)
            self._assigned(target, statement.value, computed, body[position + 1 :])
            before = len(table.copies)
            table = table.without({target})
            if len(table.copies) != before:  # (names read through other copies now)
                keys = _Keys(table.canonical)
            self._record(target, statement.value, table, keys)
        return body

    def _compound(self, statement, table: _Table) -> _Table:
        """Its blocks see what stays true through every turn and branch; after it,
        what nothing in it changed."""
        changed = self._changed(statement)
        table = _Table() if changed is None else table.without(changed)
        for _, block in trees.nested_blocks(statement):
            self.block(block, table)
        return table

    def _assigned(self, target, value, computed: bool, rest: list) -> None:
        """A temporary whose computation became a read of the name that held the
        same value is read as that name for the rest of the block (the copy goes
        where nothing else reads it), as long as neither is stored again there."""
        if not (computed and isinstance(value, gast.Name)):
            return
        holder = value.id
        if target in self.temporaries and target != holder:
            if not {target, holder} & stores(rest):
                rename(rest, target, holder, gast.Load)

    def _record(self, target: str, value, table: _Table, keys: _Keys) -> None:
        if isinstance(value, gast.Name):
            table.copies[target] = table.canonical(value.id)
            return
        if isinstance(value, _ATOMS):
            return
        reads = trees.loads(value)
        if not reads:  # (a literal, ``()``: as cheap written out again, and what
            return  # the reader expects there, not a user's name that holds one)
        if target not in reads and not self._allocates(value):
            reads.add(target)  # (what it depends on)
            table.values.setdefault(keys.of(value), (target, reads))

    def _changed(self, statement) -> set | None:
        """The names whose values ``statement`` (and what it holds) may change:
        those it stores and those its calls of anything but built-in operators read
        (a method's object, a helper's lists); None where it writes into an array
        or attribute, which may change what any view of it reads."""
        changed = set()
        for node in trees.walk(statement):
            kind = type(node)  # (gast's node classes have no subclasses)
            if kind is gast.Name:
                if type(node.ctx) is not gast.Load:
                    changed.add(node.id)
            elif kind is gast.Call:
                if not self._pure_call(node):
                    changed |= trees.loads(node)
            elif kind in _REBINDING:
                return None
            elif kind in _VIEWS and type(node.ctx) is gast.Store:
                return None
        return changed

    def _replace(self, node, table: _Table, keys: _Keys):
        """``node`` with its largest available sub-expressions read from their
        holders."""
        kind = type(node)
        if kind is gast.Constant or (kind is gast.Name and node.annotation is None):
            return node  # (nothing inside to replace)
        if not isinstance(node, _ATOMS):
            found = table.values.get(keys.of(node))
            if found is not None:
                keys.forget()  # (the keys known spelled the part replaced)
                return gast.Name(found[0], gast.Load(), None, None)
        for name_, value in gast.iter_fields(node):
            if isinstance(value, gast.expr):
                setattr(node, name_, self._replace(value, table, keys))
            elif isinstance(value, list):
                value[:] = [
                    self._replace(v, table, keys) if isinstance(v, gast.expr) else v
                    for v in value
                ]
        return node

    def _pure(self, node) -> bool:
        if isinstance(node, _ATOMS):
            return True
        if isinstance(node, gast.Call):
            return self._pure_call(node) and all(
                self._pure(part)
                for part in [*node.args, *(k.value for k in node.keywords)]
            )
        if not isinstance(node, _PURE_NODES):
            return False
        return all(
            self._pure(child)
            for child in gast.iter_child_nodes(node)
            if isinstance(child, gast.expr)
        )

    def _allocates(self, node) -> bool:
        """Whether ``node`` makes a new array to be written (``zeros_like(x)``):
        lowering adds into one made as an argument in place, so each stays its
        own."""
        return any(
            isinstance(call, gast.Call)
            and isinstance(call.func, gast.Name)
            and getattr(self.namespace.get(call.func.id), "name", None) in FRESH
            for call in trees.walk(node)
        )

    def _pure_call(self, node: gast.Call) -> bool:
        """A call of a built-in operator or helper of ``ppto.ops`` (none keeps
        state; none returns a list): the same arguments give the same value."""
        if not isinstance(node.func, gast.Name):
            return False
        function = self.namespace.get(node.func.id)
        if isinstance(function, Primitive):
            function = function.impl
        if not isinstance(function, types.FunctionType):
            return False  # (a user's operator, a class, a generated function)
        # (a function made by exec, as a helper's lifted copy, has no module)
        return (function.__module__ or "").startswith("ppto.ops.")


class _Keys:
    """The keys of one statement's sub-expressions, each made once from its
    children's: ``_replace`` asks at every level from the top down and ``_record``
    for the whole again, and made anew each time a key cost the depth of the tree
    over again. Kept while the tree is unchanged: a replacement forgets them."""

    def __init__(self, canonical):
        self.canonical = canonical
        self.known: dict = {}  # id(node) -> (node, key); the node kept: ids unique

    def of(self, node) -> tuple:
        """A hashable key of ``node``: its kind and fields, names read through
        ``canonical``, numbers and strings by ``repr`` (1, 1.0, True and -0.0
        differ). (The fields read as ``gast.iter_fields`` reads them, without its
        generator: this runs for every sub-expression of every pure statement.)"""
        kind = type(node)
        if kind is gast.Name:
            read = type(node.ctx) is gast.Load
            return (
                "Name",
                self.canonical(node.id) if read else node.id,
                type(node.ctx),
            )
        if isinstance(node, gast.AST):
            found = self.known.get(id(node))
            if found is not None:
                return found[1]
            key = [kind]
            attributes = node.__dict__
            for field in kind._fields:
                value = attributes.get(field, _MISSING)
                if value is _MISSING:
                    value = getattr(node, field, _MISSING)  # (a class's default)
                    if value is _MISSING:
                        continue  # (as iter_fields leaves out a field not set)
                key.append(self.of(value))
            key = tuple(key)
            if isinstance(node, gast.expr):  # (not a context: Load, Store)
                self.known[id(node)] = (node, key)
            return key
        if kind is list:
            return tuple(self.of(value) for value in node)
        return (kind, repr(node))

    def forget(self) -> None:
        """Forget every key: a part of the tree changed (a key of each node that
        holds it, shared or not, spelled it)."""
        self.known.clear()


_MISSING = object()
