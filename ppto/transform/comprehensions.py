"""Comprehensions as loops, right after parsing: ``[f(x) for x in xs]`` (and a
generator expression, ``f(x) for x in xs``) becomes a list built with ``append`` in a
for loop written just before the statement that held it, the builtin ``sum(...)``
an accumulation in such a loop, and ``max(items)`` (``min``) a loop keeping the
larger (normalize.py writes ``max(best, item)`` as ppto's ``larger``); the later
stages differentiate loops and lists. ``xs.extend(... for ...)`` appends the items
to ``xs`` in such a loop, and so does ``xs += [... for ...]`` where every
assignment of ``xs`` in the function makes it a list (else it may be an array, to
which ``+=`` adds the items); the builtin ``map(fn, xs)`` is first written as
``[fn(item) for item in xs]`` (a lambda's body as the item: ``map(lambda v: v * w,
xs)`` is ``[v * w for v in xs]``). An assignment expression, ``(y := f(x))``,
becomes an assignment written before its statement in the same way.

Python runs a comprehension in a scope of its own, so its variables are renamed
where the function uses their names for anything else. Dict comprehensions are
lists of their values by then (dicts.py); set comprehensions stay as written: the
fence refuses them.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import gast

from ppto.transform import trees
from ppto.transform.names import Namer, names_in

if TYPE_CHECKING:  # (source.py calls this module as it parses)
    from ppto.transform.source import SourceMap

_LISTED = (gast.ListComp, gast.GeneratorExp)
_COMPREHENSIONS = (gast.ListComp, gast.GeneratorExp, gast.SetComp, gast.DictComp)
_WRITTEN_BEFORE = (*_LISTED, gast.NamedExpr)  # (what takes statements before its own)


def rewritten_nodes(nodes: list) -> bool:
    """Whether any of a function's ``nodes`` is a list comprehension, a generator
    expression, an assignment expression or a call of ``sum``:
    ``comprehensions_as_loops`` has work (asked on every parse, of the nodes the
    parse walked anyway)."""
    for node in nodes:
        kind = type(node)
        if kind is gast.ListComp or kind is gast.GeneratorExp:
            return True
        if kind is gast.NamedExpr:
            return True
        if (
            kind is gast.Call
            and type(node.func) is gast.Name
            and node.func.id in ("sum", "map", "max", "min")
        ):
            return True
    return False


def comprehensions_as_loops(
    definition: gast.FunctionDef, namespace, source: SourceMap
) -> gast.FunctionDef:
    """``definition`` with its comprehensions and builtin ``sum`` calls written as
    loops, its assignment expressions as assignments (changed in place: the tree
    is the caller's own fresh parse). E.g.
    ``return sum(np.sum(w**2) for w in ws)`` becomes ``total = 0``, ``for w in ws:
    total = total + np.sum(w**2)``, ``return total``."""
    python = _python_builtins(definition, namespace)
    if "map" in python:
        _MapsAsComprehensions().visit(definition)
    if python & {"sum", "max", "min"} or _first_written_before(definition) is not None:
        definition.body = _LoopWriter(definition, namespace, source, python).block(
            definition.body
        )
    return definition


def _python_builtins(definition: gast.FunctionDef, namespace) -> set[str]:
    """Which of ``sum``, ``list``, ``tuple``, ``map``, ``max`` and ``min`` in the
    function are Python's (not a parameter, a local or a global of that name)."""
    parameters = set(trees.named_parameters(definition.args))
    local = parameters | trees.stores(definition.body)
    return {
        name
        for name in ("sum", "list", "tuple", "map", "max", "min")
        if name not in local and namespace.get(name) is getattr(builtins, name)
    }


class _LoopWriter:
    """Rewrites the statements of one function (see ``comprehensions_as_loops``)."""

    def __init__(self, definition, namespace, source: SourceMap, python: set[str]):
        self.source = source
        self.python = python  # (see _python_builtins)
        # a comprehension variable keeps its name where nothing else in the
        # function is called that, and nothing outside it (a global read in
        # another comprehension) is either
        outside = _names_outside_comprehensions(definition)
        kept = {
            node.id
            for node in trees.walk(definition)
            if isinstance(node, gast.Name)
            and node.id not in outside
            and node.id not in namespace
        }
        self.namer = Namer(names_in(definition) - kept)
        self.lists = _always_lists(definition, python)

    def block(self, body: list) -> list:
        out = []
        for statement in body:
            out.extend(self.statement(statement))
        return out

    def statement(self, node) -> list:
        """``node`` rewritten, after the loops it needs."""
        if isinstance(node, (gast.FunctionDef, gast.ClassDef)):
            return [node]  # (the fence refuses them)
        if isinstance(node, gast.While):
            found = _first_written_before(node.test)
            if found is not None:
                what = (
                    "an assignment expression (:=)"
                    if isinstance(found, gast.NamedExpr)
                    else "a comprehension"
                )
                raise self.source.error(
                    found,
                    f"ppto cannot differentiate {what} in a while condition (it "
                    "is evaluated again on every pass)",
                    "compute the value in a variable before the loop and again at "
                    "the end of its body, and test the variable",
                )
            node.body = self.block(node.body)
            return [node]
        lifted = _Statement(self)
        self.refuse_reordered_assignments(node)
        if isinstance(node, gast.If):
            node.test = lifted.expression(node.test)
            node.body = self.block(node.body)
            node.orelse = self.block(node.orelse)
        elif isinstance(node, gast.For):
            node.iter = lifted.expression(node.iter)
            node.body = self.block(node.body)
        elif isinstance(node, gast.Assert):
            node.test = lifted.expression(node.test)  # (msg only runs on failure)
        elif isinstance(node, (gast.Return, gast.Expr, gast.Raise, gast.Assign,
                               gast.AugAssign, gast.AnnAssign)):  # fmt: skip
            listed = self.listed(node.value) if isinstance(node, gast.Assign) else None
            if listed is not None and _builds_list_in_place(node, listed):
                return self.block(lifted.list_into(listed, node.targets[0].id))
            extended = self.extended(node)
            if extended is not None:
                return self.block(lifted.appended_to(*extended))
            joined = self.joined(node)
            if joined is not None:
                return self.block(lifted.joined_to(*joined))
            lifted.fields(node)
        return self.block(lifted.before) + [node]

    def fresh(self, base: str) -> str:
        return self.namer.fresh(base)

    def refuse_reordered_assignments(self, node) -> None:
        """Refuse ``(y := ...)`` in a statement that reads or assigns ``y`` before it
        (``f(y, (y := 2))``): written before the statement, it would change what
        that reads. Reads after it (``(h := f(x)) * h``) read what it assigns, as
        they do in Python. (A comprehension's own statements are checked when
        they are written: here it runs whole, before what follows it.)"""
        header = [
            value
            for field, value in gast.iter_fields(node)
            if field not in ("body", "orelse")
        ]
        value = node.value if isinstance(node, gast.Assign) else None
        evaluated_first = {id(n) for n in trees.walk(value)} if value else set()

        def position(child) -> tuple:
            # an assignment's targets are bound after its value is computed
            late = value is not None and id(child) not in evaluated_first
            return late, child.lineno, child.col_offset

        for assignment in _assignment_expressions(header):
            unit = _outermost_comprehension(header, assignment) or assignment
            inside = {id(n) for n in trees.walk(unit)}
            name = assignment.target.id
            if any(
                isinstance(n, gast.Name)
                and n.id == name
                and id(n) not in inside
                and position(n) < position(unit)
                for n in _walk_all(header)
            ):
                raise self.source.error(
                    assignment,
                    f"ppto cannot differentiate an assignment expression (:=) to "
                    f"{name} after {name} is used in the same statement (written "
                    "as an assignment before the statement, it would change what "
                    "that use reads)",
                    f"assign {name} in a statement of its own first",
                )

    def calls(self, node, function: str) -> bool:
        """Whether ``node`` calls Python's ``function`` (sum, list or tuple)."""
        return function in self.python and trees.called(node, function)

    def extended(self, node):
        """``(name, comprehension)`` for ``name.extend(... for ...)`` (or of a list
        comprehension) where the comprehension does not read ``name``: its items
        appended to the list one by one. Else None."""
        call = node.value if isinstance(node, gast.Expr) else None
        if not (
            isinstance(call, gast.Call)
            and isinstance(call.func, gast.Attribute)
            and call.func.attr == "extend"
            and isinstance(call.func.value, gast.Name)
            and len(call.args) == 1
            and not call.keywords
        ):
            return None
        argument = call.args[0]
        comprehension = argument if isinstance(argument, _LISTED) else None
        comprehension = comprehension or self.listed(argument)
        name = call.func.value.id
        if comprehension is None or _reads(comprehension, name):
            return None
        return name, comprehension

    def joined(self, node):
        """``(name, comprehension)`` for ``name += [... for ...]`` where ``name`` is
        always a list (see ``_always_lists``): its items appended to it. Else None
        (a name that may be an array adds the items, as NumPy does)."""
        if not (
            isinstance(node, gast.AugAssign)
            and isinstance(node.op, gast.Add)
            and isinstance(node.target, gast.Name)
        ):
            return None
        comprehension = self.listed(node.value)
        if comprehension is None:
            return None
        name = node.target.id
        if name not in self.lists:
            raise self.source.error(
                node,
                f"ppto cannot tell whether {name} += [... for ...] appends items to "
                f"a list or adds them to an array: {name} is not made a list by "
                "every assignment in the function (a parameter, or also an array)",
                f"for a list, extend a copy made in the function (items = "
                f"list({name})); for an array, write {name} = {name} + "
                "np.stack([... for ...])",
            )
        return name, comprehension

    def listed(self, node):
        """The comprehension whose items ``node`` is a new list of (``[... for
        ...]`` or ``list(... for ...)``), or None."""
        if isinstance(node, gast.ListComp):
            return node
        if (
            self.calls(node, "list")
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], _LISTED)
        ):
            return node.args[0]
        return None


class _Statement:
    """The comprehensions of one statement's expressions, replaced by the names of
    the lists or sums that loops written before it (``before``) compute."""

    def __init__(self, writer: _LoopWriter) -> None:
        self.writer = writer
        self.before: list = []

    def fields(self, node) -> None:
        for field, value in gast.iter_fields(node):
            if isinstance(value, gast.expr):
                setattr(node, field, self.expression(value))
            elif isinstance(value, list):
                value[:] = [
                    self.expression(item) if isinstance(item, gast.expr) else item
                    for item in value
                ]

    def expression(self, node):
        if isinstance(node, gast.NamedExpr):
            value = self.expression(node.value)
            self.before.append(_assign(node.target.id, value, node))
            return _load(node.target.id, node)
        listed = node if isinstance(node, _LISTED) else self.writer.listed(node)
        if listed is not None:
            return self.new_list(listed)
        if self.writer.calls(node, "sum"):
            return self.sum(node)
        if self.extreme_of_items(node):
            return self.extreme(node)
        if (
            self.writer.calls(node, "tuple")
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], _LISTED)
        ):  # (an assignment of its own: the later stages take tuple(items) there)
            items = _located(
                gast.Call(node.func, [self.new_list(node.args[0])], []), node
            )
            name = self.writer.fresh("items")
            self.before.append(_assign(name, items, node))
            return _load(name, node)
        if isinstance(node, gast.IfExp) and self.lifts(node.body, node.orelse):
            return self.conditional(node)
        if isinstance(node, gast.BoolOp) and self.lifts(*node.values[1:]):
            return self.either(node)
        if isinstance(node, (gast.Lambda, *_COMPREHENSIONS)):
            return node  # (the fence refuses lambdas; dict and set comprehensions)
        self.fields(node)
        return node

    def new_list(self, node) -> gast.Name:
        """The name of a list of ``node``'s items, built by loops written before."""
        name = self.writer.fresh("items")
        self.before += self.list_into(node, name)
        return _load(name, node)

    def lifts(self, *nodes) -> bool:
        """Whether rewriting ``nodes`` writes loops, which must then run only where
        Python evaluates them (one branch of ``a if c else b``)."""
        return any(
            _first_written_before(node) is not None
            or any(
                self.writer.calls(n, "sum") or self.extreme_of_items(n)
                for n in trees.walk(node)
            )
            for node in nodes
        )  # fmt: skip

    def list_into(self, node, name: str) -> list:
        """``name = []`` and the loops appending the comprehension's items to it."""
        empty = gast.List([], gast.Load())
        return [_assign(name, empty, node)] + self.appended_to(name, node)

    def appended_to(self, name: str, node) -> list:
        """The loops appending the comprehension's items to the list ``name``."""
        append = gast.Attribute(_load(name, node), "append", gast.Load())
        return self.loops(
            node, lambda item: _located(gast.Expr(gast.Call(append, [item], [])), node)
        )

    def joined_to(self, name: str, node) -> list:
        """``name += [... for ...]``: the comprehension's items appended to the list
        ``name``; made first where it reads ``name`` (Python makes the whole list
        before extending, so it sees none of its own items)."""
        if not _reads(node, name):
            return self.appended_to(name, node)
        items = self.new_list(node)
        item = self.writer.fresh("item")
        append = gast.Attribute(_load(name, node), "append", gast.Load())
        step = _located(gast.Expr(gast.Call(append, [_load(item, node)], [])), node)
        loop = gast.For(_store(item, node), items, [step], [], None)
        return self.before + [_located(loop, node)]

    def sum(self, node):
        """``sum(items, start)`` as ``total = start`` and a loop adding each item (a
        comprehension's items are added as its loops make them: no list)."""
        arguments = list(node.args)
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        if len(arguments) == 1 and set(keywords) <= {"start"}:
            arguments.append(keywords.get("start", gast.Constant(0, None)))
        elif keywords or len(arguments) != 2:
            self.fields(node)  # (a call Python refuses: it says so when it runs)
            return node
        items, start = arguments
        total = self.writer.fresh("total")
        if isinstance(items, _LISTED):
            loops = self.loops(items, lambda item: _add_to(total, item, items))
        else:
            items = self.expression(items)
            item = self.writer.fresh("item")
            step = [_add_to(total, _load(item, node), node)]
            loops = [
                _located(gast.For(_store(item, node), items, step, [], None), node)
            ]
        self.before.append(_assign(total, self.expression(start), node))
        self.before += loops
        return _load(total, node)

    def extreme_of_items(self, node) -> bool:
        """Whether ``node`` is Python's ``max(items)`` or ``min(items)`` of one
        iterable given by a name or expression (a list written out, or several
        arguments, are a chain of calls as written: normalize.py)."""
        return (
            (self.writer.calls(node, "max") or self.writer.calls(node, "min"))
            and len(node.args) == 1
            and not node.keywords
            and not isinstance(node.args[0], (gast.List, gast.Tuple, gast.Starred))
        )

    def extreme(self, node):
        """``max(items)`` (``min``) as ``best = items[0]`` and a loop taking
        ``best = max(best, item)`` for each item: what Python returns (the first
        item compared with itself stays), its gradient going to that item."""
        items = node.args[0]
        if isinstance(items, _LISTED):
            listed = self.new_list(items)
        else:
            listed = _load(self.writer.fresh("items"), node)
            self.before.append(_assign(listed.id, self.expression(items), node))
        best, item = self.writer.fresh("best"), self.writer.fresh("item")
        first = _located(
            gast.Subscript(listed, gast.Constant(0, None), gast.Load()), node
        )
        self.before.append(_assign(best, first, node))
        call = _located(
            gast.Call(node.func, [_load(best, node), _load(item, node)], []), node
        )
        step = [_assign(best, call, node)]
        loop = gast.For(_store(item, node), _load(listed.id, node), step, [], None)
        self.before.append(_located(loop, node))
        return _load(best, node)

    def conditional(self, node):
        """``a if c else b`` as an if statement assigning a variable, so that each
        branch's loops run only on its path."""
        value = self.writer.fresh("chosen")
        test = self.expression(node.test)
        body = self.writer.block([_assign(value, node.body, node)])
        orelse = self.writer.block([_assign(value, node.orelse, node)])
        self.before.append(_located(gast.If(test, body, orelse), node))
        return _load(value, node)

    def either(self, node):
        """``a and b`` (``or``) as ``v = a`` then ``if v: v = b`` (``if not v``): ``b``
        evaluated only where Python does."""
        value = self.writer.fresh("either")
        self.before.append(_assign(value, self.expression(node.values[0]), node))
        for operand in node.values[1:]:
            test = _load(value, node)
            if isinstance(node.op, gast.Or):
                test = _located(gast.UnaryOp(gast.Not(), test), node)
            body = self.writer.block([_assign(value, operand, node)])
            self.before.append(_located(gast.If(test, body, []), node))
        return _load(value, node)

    def loops(self, node, innermost) -> list:
        """The comprehension's ``for`` and ``if`` clauses as nested statements around
        ``innermost(item)``, the statement that takes each item."""
        renames: dict = {}
        clauses = []
        for generator in node.generators:
            if generator.is_async:
                raise self.writer.source.error(
                    node,
                    "ppto cannot differentiate an async comprehension",
                    "differentiate synchronous code",
                )
            iterated = _renamed(generator.iter, renames)
            for bound in sorted(trees.stores(generator.target)):
                renames[bound] = self.writer.fresh(bound)
            target = _renamed(generator.target, renames)
            tests = [_renamed(test, renames) for test in generator.ifs]
            clauses.append((target, iterated, tests))
        body = [innermost(_renamed(node.elt, renames))]
        for target, iterated, tests in reversed(clauses):
            for test in reversed(tests):
                body = [_located(gast.If(test, body, []), node)]
            body = [_located(gast.For(target, iterated, body, [], None), node)]
        return body


def _always_lists(definition: gast.FunctionDef, python: set[str]) -> set[str]:
    """The names every assignment in the function makes a list (``xs = []``,
    ``[...]``, a list comprehension, Python's ``list(...)``, ``xs += [...]``):
    not parameters, nor names also bound another way (an array, a loop's item)."""
    bound_otherwise = set(trees.named_parameters(definition.args))
    lists = set()
    for node in trees.walk(definition):
        if isinstance(node, gast.Assign):
            target = node.targets[0] if len(node.targets) == 1 else None
            if isinstance(target, gast.Name) and _makes_list(node.value, python):
                lists.add(target.id)
                continue
            targets = node.targets
        elif isinstance(node, gast.AugAssign) and isinstance(node.op, gast.Add):
            if _makes_list(node.value, python):
                continue  # (a list stays one; a name that may be an array is kept
                # out by its other assignments)
            targets = [node.target]
        elif isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For)):
            targets = [node.target]
        elif isinstance(node, (gast.NamedExpr, gast.comprehension)):
            targets = [node.target]
        else:
            continue
        bound_otherwise |= trees.stores(targets)
    return lists - bound_otherwise


def _makes_list(node, python: set[str]) -> bool:
    if isinstance(node, (gast.List, gast.ListComp)):
        return True
    return trees.called(node, "list") and "list" in python


def _builds_list_in_place(node: gast.Assign, comprehension) -> bool:
    """``xs = [... for ...]`` where the comprehension does not read ``xs``: built in
    ``xs`` itself (``xs = []``, ``xs.append(...)``), as the user would write it."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], gast.Name):
        return False
    return not _reads(comprehension, node.targets[0].id)


def _reads(node, name: str) -> bool:
    return any(isinstance(n, gast.Name) and n.id == name for n in trees.walk(node))


def _first_written_before(node, kinds=_WRITTEN_BEFORE):
    """The first list comprehension, generator expression or assignment expression
    (or of ``kinds``) in ``node``, or None."""
    for child in trees.walk(node):
        if isinstance(child, kinds):
            return child
    return None


class _MapsAsComprehensions(trees.Transformer):
    """``map(fn, xs, ys)`` as ``[fn(item, item_1) for item, item_1 in zip(xs,
    ys)]``; a lambda's parameters and body as the comprehension's (a list where
    Python gives an iterator: what reads it, a loop, ``list`` or ``sum``, reads the
    same items)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if not trees.called(node, "map") or len(node.args) < 2 or node.keywords:
            return node
        function, iterables = node.args[0], node.args[1:]
        arguments = getattr(function, "args", None)
        if (
            isinstance(function, gast.Lambda)
            and len(arguments.args) == len(iterables)
            and not (arguments.posonlyargs or arguments.kwonlyargs)
            and not (arguments.vararg or arguments.kwarg or arguments.defaults)
        ):
            names = [a.id for a in arguments.args]
            item = function.body
        else:
            names = ["item"] + [f"item_{i}" for i in range(1, len(iterables))]
            loads = [gast.Name(n, gast.Load(), None, None) for n in names]
            item = gast.Call(function, loads, [])
        stores = [gast.Name(n, gast.Store(), None, None) for n in names]
        target = stores[0] if len(stores) == 1 else gast.Tuple(stores, gast.Store())
        source = iterables[0]
        if len(iterables) > 1:
            source = gast.Call(gast.Name("zip", gast.Load(), None, None), iterables, [])
        loop = gast.comprehension(target, source, [], 0)
        listed = gast.ListComp(item, [loop])
        for part in trees.walk(listed):
            if isinstance(part, gast.expr) and getattr(part, "lineno", None) is None:
                gast.copy_location(part, node)
        return gast.copy_location(listed, node)


def _walk_all(nodes: list):
    for node in nodes:
        if isinstance(node, list):
            yield from _walk_all(node)
        elif isinstance(node, gast.AST):
            yield from trees.walk(node)


def _assignment_expressions(nodes: list) -> list:
    """The ``:=`` in ``nodes``, not in lambdas (the fence refuses those)."""
    found, pending = [], list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, gast.NamedExpr):
            found.append(node)
            pending.append(node.value)
        elif isinstance(node, gast.AST) and not isinstance(node, gast.Lambda):
            pending.extend(gast.iter_child_nodes(node))
    return found


def _outermost_comprehension(nodes: list, inner):
    """The outermost comprehension in ``nodes`` that holds ``inner``, or None."""
    for node in _walk_all(nodes):
        if isinstance(node, _COMPREHENSIONS) and any(
            n is inner for n in trees.walk(node)
        ):
            return node
    return None


def _names_outside_comprehensions(definition) -> set[str]:
    found = set()
    pending = [definition]
    while pending:
        node = pending.pop()
        if isinstance(node, _COMPREHENSIONS):
            # (y := ...) inside binds y in the function, not the comprehension
            found |= {n.target.id for n in _assignment_expressions([node])}
            continue
        if isinstance(node, gast.Name):
            found.add(node.id)
        pending.extend(gast.iter_child_nodes(node))
    found.update(trees.named_parameters(definition.args))
    return found


def _renamed(node, renames: dict):
    """A copy of ``node`` with the names in ``renames`` replaced, except where a
    nested comprehension or lambda binds the same name (it shadows them)."""
    node = trees.clone(node)
    _rename(node, renames)
    return node


def _rename(node, renames: dict) -> None:
    if not renames:
        return
    if isinstance(node, gast.Name):
        node.id = renames.get(node.id, node.id)
        return
    if isinstance(node, _COMPREHENSIONS):
        inner = dict(renames)
        for generator in node.generators:
            _rename(generator.iter, inner)  # (the first in the enclosing scope)
            for bound in trees.stores(generator.target):
                inner.pop(bound, None)
            for test in generator.ifs:
                _rename(test, inner)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                _rename(getattr(node, part), inner)
        return
    if isinstance(node, gast.Lambda):
        bound = set(trees.named_parameters(node.args))
        _rename(node.body, {k: v for k, v in renames.items() if k not in bound})
        return
    for child in gast.iter_child_nodes(node):
        _rename(child, renames)


def _add_to(total: str, value, origin) -> gast.Assign:
    step = gast.BinOp(_load(total, origin), gast.Add(), value)
    return _assign(total, _located(step, origin), origin)


def _assign(name: str, value, origin) -> gast.Assign:
    return _located(gast.Assign([_store(name, origin)], value, None), origin)


def _load(name: str, origin) -> gast.Name:
    return _located(gast.Name(name, gast.Load(), None, None), origin)


def _store(name: str, origin) -> gast.Name:
    return _located(gast.Name(name, gast.Store(), None, None), origin)


def _located(node, origin):
    return gast.copy_location(node, origin)
