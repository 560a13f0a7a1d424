"""Renaming so that no variable is assigned twice on any path.

A reassigned name gets a numbered version (``x``, then ``x_1``, ``x_2``), so every
value the derivative needs is still there when the backward pass runs, without a tape.
Both branches of an ``if`` may define the same version (only one runs); where they
end with different versions, the branch that differs copies its value into the one
that continues after the ``if``. Copies are made only for names that may be read
later (a conservative liveness check): copying a name that one path never assigned
would read an unbound variable where Python itself would not.
"""

from __future__ import annotations

import gast

from ppto.transform import trees
from ppto.transform.names import Namer
from ppto.transform.trees import clone


class Renamer:
    """Holds the current version of each user name while walking statements."""

    def __init__(self, namer: Namer, parameters: list[str], live_out: set) -> None:
        self.namer = namer
        self.env: dict[str, str] = {name: name for name in parameters}
        self.count: dict[str, int] = {name: 0 for name in parameters}
        self.created: set[str] = set()
        # what runs after the current statement: the rest of each enclosing block
        # (a list of statements) or a loop's next iteration (the names it may read)
        self.later: list = [live_out]

    def version(self, base: str) -> str:
        """A new version of ``base`` for an assignment."""
        if base not in self.count:
            self.count[base] = 0
            self.env[base] = base
            return base
        number = self.count[base]
        while True:
            number += 1
            name = f"{base}_{number}"
            if name not in self.namer.taken or name in self.created:
                break
        self.count[base] = number
        self.created.add(name)
        self.namer.reserve(name)
        self.env[base] = name
        return name

    def reads(self, node):
        """Rename the loaded names of an expression to their current versions."""
        for child in trees.walk(node):
            if isinstance(child, gast.Name) and isinstance(child.ctx, gast.Load):
                child.id = self.env.get(child.id, child.id)
        return node

    def targets(self, target):
        for child in trees.walk(target):
            if isinstance(child, gast.Name) and isinstance(child.ctx, gast.Store):
                child.id = self.version(child.id)
        return target

    def block(self, body: list) -> list:
        out = []
        for index, statement in enumerate(body):
            self.later.append(body[index + 1 :])
            out.extend(self.statement(statement))
            self.later.pop()
        return out

    def live(self) -> set:
        """Names the code after the current statement may read before assigning
        them (a superset: definite assignment only within each block)."""
        found = set()
        for after in self.later:
            found |= exposed(after)[0] if isinstance(after, list) else after
        return found

    def statement(self, node) -> list:
        if isinstance(node, gast.If):
            return [self._branch(node)]
        if isinstance(node, (gast.For, gast.While)):
            return self._loop(node)
        if isinstance(node, gast.Assign):
            if len(node.targets) == 1 and _is_subscript_of_name(node.targets[0]):
                return [self._subscript_write(node)]
            node.value = self.reads(node.value)
            node.targets = [self._store(target) for target in node.targets]
            return [node]
        if isinstance(node, gast.AugAssign):
            value = gast.BinOp(left=_load(node.target), op=node.op, right=node.value)
            gast.copy_location(value, node)
            assign = gast.Assign(targets=[node.target], value=value, type_comment=None)
            if isinstance(node.target, gast.Name):
                # NumPy's in-place operators keep the target's dtype: the version
                # written before (normalize casts back to its dtype)
                assign.in_place_of = self.env.get(node.target.id, node.target.id)
            elif _is_subscript_of_name(node.target):
                assign.in_place_of = node.target.value.id  # (checked: see in_place)
            return self.statement(gast.copy_location(assign, node))
        if isinstance(node, gast.AnnAssign):
            assign = gast.Assign(
                targets=[node.target], value=node.value, type_comment=None
            )
            return self.statement(gast.copy_location(assign, node))
        return [self.reads(node)]

    def _subscript_write(self, node) -> gast.Assign:
        """``x[i] = v`` -> ``x_1 = setitem(x, v, i)``: the write makes a new version."""
        from ppto.transform.normalize import slice_expr

        target = node.targets[0]
        value = self.reads(node.value)
        index = self.reads(slice_expr(target.slice))
        old = self.env.get(target.value.id, target.value.id)
        call = gast.Call(
            gast.Name(SETITEM, gast.Load(), None, None),
            [gast.Name(old, gast.Load(), None, None), value, index],
            [],
        )
        gast.copy_location(call, node)
        new = gast.Name(self.version(target.value.id), gast.Store(), None, None)
        assign = gast.copy_location(gast.Assign([new], call, None), node)
        if getattr(node, "in_place_of", None) is not None:  # (x[i] += v)
            assign.in_place_of = old
        assign.deletes = getattr(node, "deletes", False)  # (del x[a:b])
        return assign

    def _store(self, target):
        if isinstance(target, gast.Subscript):
            return target  # subscript writes are handled by the loop stage
        return self.targets(target)

    def _branch(self, node: gast.If) -> gast.If:
        node.test = self.reads(node.test)
        live = self.live()
        before_env, before_count = dict(self.env), dict(self.count)
        node.body = self.block(node.body)
        body_env, body_count = self.env, self.count
        self.env, self.count = dict(before_env), dict(before_count)
        node.orelse = self.block(node.orelse)
        else_env, else_count = self.env, self.count
        merged = dict(body_env)
        self.count = {
            base: max(body_count.get(base, 0), else_count.get(base, 0))
            for base in set(body_count) | set(else_count)
        }
        before = before_env.get
        for base in sorted(set(body_env) | set(else_env)):
            in_body, in_else = body_env.get(base), else_env.get(base)
            if in_body == in_else:
                continue
            if base not in live:  # no later read: keep either version, copy nothing
                merged[base] = in_body if in_body is not None else in_else
                continue
            if in_body is None or (in_else is not None and in_body == before(base)):
                merged[base] = in_else
                if in_body is not None:
                    node.body.append(_copy(in_else, in_body, node))
            elif in_else is None or in_else == before(base):
                merged[base] = in_body
                if in_else is not None:
                    node.orelse.append(_copy(in_body, in_else, node))
            else:  # both branches assign it: a fresh name, so neither loses a value
                merged[base] = self.version(base)
                node.body.append(_copy(merged[base], in_body, node))
                node.orelse.append(_copy(merged[base], in_else, node))
        self.env = merged
        return node

    def _loop(self, node) -> list:
        """A loop: values carried from one iteration to the next live in a header
        variable, copied in before the loop and at the end of each iteration."""
        if isinstance(node, gast.For):
            node.iter = self.reads(node.iter)
        assigned = _stored_names(node.body)
        target = _stored_names([node.target]) if isinstance(node, gast.For) else set()
        head = set() if isinstance(node, gast.For) else _loaded_names(node.test)
        next_iteration = exposed(node.body, target)[0] | head
        live = next_iteration | self.live()
        carried = sorted(name for name in assigned if name in self.env and name in live)
        prelude, headers = [], {}
        for base in carried:
            previous = self.env[base]
            headers[base] = self.version(base)
            prelude.append(_copy(headers[base], previous, node))
        if isinstance(node, gast.For):
            node.target = self.targets(node.target)
        else:
            node.test = self.reads(node.test)
        self.later.append(next_iteration)
        body = self.block(node.body)
        self.later.pop()
        tail = []
        if body and _is_break_if(body[-1]):
            tail = [body.pop()]
        for base in carried:
            if self.env[base] != headers[base]:
                body.append(_copy(headers[base], self.env[base], node))
            self.env[base] = headers[base]
        node.body = body + tail
        return prelude + [node]


SETITEM = "__ppto_setitem__"  # resolved by normalization to the setitem operator


def _is_subscript_of_name(target) -> bool:
    return isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name)


def _stored_names(body: list) -> set:
    found = set()
    for statement in body:
        for child in trees.walk(statement):
            if isinstance(child, gast.Name) and isinstance(child.ctx, gast.Store):
                found.add(child.id)
            elif _is_subscript_of_name(child) and isinstance(child.ctx, gast.Store):
                found.add(child.value.id)
    return found


def _loaded_names(node) -> set:
    found = set()
    for child in trees.walk(node):
        if isinstance(child, gast.Name) and isinstance(child.ctx, gast.Load):
            found.add(child.id)
        elif isinstance(child, gast.AugAssign) and isinstance(child.target, gast.Name):
            found.add(child.target.id)  # x += 1 reads x
    return found


def exposed(body: list, assigned: set = frozenset()) -> tuple[set, set]:
    """``(names body may read before assigning them, names it surely assigns)``,
    given names already assigned on entry."""
    assigned, found = set(assigned), set()
    for statement in body:
        if isinstance(statement, gast.If):
            found |= _loaded_names(statement.test) - assigned
            read_body, sure_body = exposed(statement.body, assigned)
            read_else, sure_else = exposed(statement.orelse, assigned)
            found |= read_body | read_else
            assigned = sure_body & sure_else
        elif isinstance(statement, (gast.For, gast.While)):
            if isinstance(statement, gast.For):
                found |= _loaded_names(statement.iter) - assigned
                inner = assigned | _stored_names([statement.target])
            else:
                found |= _loaded_names(statement.test) - assigned
                inner = assigned
            found |= exposed(statement.body, inner)[0]
            found |= exposed(statement.orelse, assigned)[0]
        else:
            found |= _loaded_names(statement) - assigned
            assigned |= _stored_names([statement])
    return found, assigned


def _is_break_if(statement) -> bool:
    return (
        isinstance(statement, gast.If)
        and len(statement.body) == 1
        and isinstance(statement.body[0], gast.Break)
    )


def _load(target):
    loaded = clone(target)
    for child in trees.walk(loaded):
        if hasattr(child, "ctx"):
            child.ctx = gast.Load()
    return loaded


def _copy(target: str, source: str, origin) -> gast.Assign:
    assign = gast.Assign(
        targets=[gast.Name(target, gast.Store(), None, None)],
        value=gast.Name(source, gast.Load(), None, None),
        type_comment=None,
    )
    assign.synthetic = True  # a renaming copy, not a line the user wrote
    return gast.copy_location(assign, origin)


def rename(
    body: list, parameters: list[str], namer: Namer, live_out: set
) -> tuple[list, dict]:
    """Rename ``body`` so every assignment creates a new name (see module doc);
    ``live_out`` names what is read after it.

    Returns the renamed statements and the final version of each name.
    """
    renamer = Renamer(namer, parameters, live_out)
    return renamer.block(body), renamer.env
