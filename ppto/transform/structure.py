"""Structural rewrites before renaming: a single exit, and conditional expressions
as statements.

``return`` in the middle of a function becomes an assignment to the result variable,
with the statements after an ``if`` that may return moved into its branches (so every
path ends by assigning the result once). ``a if c else b`` inside a statement becomes
an ``if`` statement assigning a temporary just before it.
"""

from __future__ import annotations

import gast

from ppto.transform.names import Namer


def single_exit(body: list, result: str) -> list:
    """``body`` with every ``return v`` turned into ``result = v`` (see module doc)."""
    out = []
    for position, statement in enumerate(body):
        if isinstance(statement, gast.Return):
            out.append(
                _assign(result, statement.value or gast.Constant(None, None), statement)
            )
            return out
        if isinstance(statement, gast.If) and _contains_return(statement):
            rest = body[position + 1 :]
            statement.body = single_exit(statement.body + rest, result)
            statement.orelse = single_exit(statement.orelse + rest, result)
            out.append(statement)
            return out
        out.append(statement)
    return out


def _contains_return(node) -> bool:
    return any(isinstance(child, gast.Return) for child in gast.walk(node))


def _assign(name: str, value, origin) -> gast.Assign:
    assign = gast.Assign(
        targets=[gast.Name(name, gast.Store(), None, None)],
        value=value,
        type_comment=None,
    )
    return gast.copy_location(assign, origin)


class _LiftConditionals(gast.NodeTransformer):
    """Replaces each IfExp of one statement by a temporary, collecting the ifs."""

    def __init__(self, namer: Namer, origin) -> None:
        self.namer = namer
        self.origin = origin
        self.lifted: list = []

    def visit_IfExp(self, node):
        self.generic_visit(node)
        name = self.namer.temporary()
        branch = gast.If(
            test=node.test,
            body=[_assign(name, node.body, self.origin)],
            orelse=[_assign(name, node.orelse, self.origin)],
        )
        self.lifted.append(gast.copy_location(branch, self.origin))
        return gast.Name(name, gast.Load(), None, None)


def lift_conditionals(body: list, namer: Namer) -> list:
    """Turn conditional expressions into if statements (see the module docstring)."""
    out = []
    for statement in body:
        if isinstance(statement, gast.If):
            lifter = _LiftConditionals(namer, statement)
            statement.test = lifter.visit(statement.test)
            statement.body = lift_conditionals(statement.body, namer)
            statement.orelse = lift_conditionals(statement.orelse, namer)
            out.extend(lifter.lifted)
            out.append(statement)
        elif isinstance(statement, (gast.For, gast.While)):
            lifter = _LiftConditionals(namer, statement)
            if isinstance(statement, gast.For):
                statement.iter = lifter.visit(statement.iter)
            statement.body = lift_conditionals(statement.body, namer)
            out.extend(lifter.lifted)
            out.append(statement)
        else:
            lifter = _LiftConditionals(namer, statement)
            rewritten = lifter.visit(statement)
            out.extend(lifter.lifted)
            out.append(rewritten)
    return out


def _assign_expr(name: str, value, origin) -> gast.Assign:
    return _assign(name, value, origin)


def _name(identifier: str):
    return gast.Name(identifier, gast.Load(), None, None)


def _call(function: str, *arguments):
    return gast.Call(_name(function), list(arguments), [])


def _contains(node, kinds) -> bool:
    """Whether ``node`` contains one of ``kinds`` outside nested loops."""
    for child in gast.iter_child_nodes(node):
        if isinstance(child, kinds):
            return True
        if isinstance(child, (gast.For, gast.While)):
            continue
        if _contains(child, kinds):
            return True
    return False


def _drop_continue(body: list) -> list:
    """A loop body with ``continue`` replaced by skipping the rest of the iteration."""
    out = []
    for position, statement in enumerate(body):
        if isinstance(statement, gast.Continue):
            return out
        if isinstance(statement, gast.If) and _contains(statement, gast.Continue):
            rest = body[position + 1 :]
            statement.body = _drop_continue(statement.body + rest)
            statement.orelse = _drop_continue(statement.orelse + rest)
            out.append(statement)
            return out
        out.append(statement)
    return out


def _lift_break(body: list, flag: str, origin) -> list:
    """A loop body whose ``break`` sets ``flag`` and skips the rest of the iteration;
    the caller adds ``if flag: break`` at the end."""
    out = []
    for position, statement in enumerate(body):
        if isinstance(statement, gast.Break):
            out.append(_assign(flag, gast.Constant(True, None), statement))
            return out
        if isinstance(statement, gast.If) and _contains(statement, gast.Break):
            rest = body[position + 1 :]
            statement.body = _lift_break(statement.body + rest, flag, origin)
            statement.orelse = _lift_break(statement.orelse + rest, flag, origin)
            out.append(statement)
            return out
        out.append(statement)
    return out


def loops(body: list, namer: Namer, source) -> list:
    """Loops in the one form later stages handle: ``for`` over a variable holding a
    range or sequence of indices, no ``continue``, and ``break`` only as the last
    statement ``if <flag>: break``."""
    out = []
    for statement in body:
        if isinstance(statement, gast.If):
            statement.body = loops(statement.body, namer, source)
            statement.orelse = loops(statement.orelse, namer, source)
            out.append(statement)
            continue
        if not isinstance(statement, (gast.For, gast.While)):
            out.append(statement)
            continue
        if _contains(statement, gast.Return):
            raise source.error(
                statement,
                "ppto cannot differentiate a return inside a loop",
                "set a result variable and break, then return after the loop",
            )
        prelude = []
        if isinstance(statement, gast.For):
            prelude, statement = _index_loop(statement, namer)
        statement.body = loops(statement.body, namer, source)
        statement.body = _drop_continue(statement.body)
        if _contains(statement, gast.Break):
            flag = namer.fresh("stop")
            prelude.append(_assign(flag, gast.Constant(False, None), statement))
            statement.body = _lift_break(statement.body, flag, statement)
            statement.body.append(
                gast.copy_location(gast.If(_name(flag), [gast.Break()], []), statement)
            )
        out.extend(prelude)
        out.append(statement)
    return out


def _index_loop(statement: gast.For, namer: Namer):
    """``for x in seq`` -> ``for i in range(len(seq)): x = seq[i]`` unless ``seq`` is
    a call of ``range``; the iterable is held in a variable either way."""
    iterable = statement.iter
    prelude = []
    is_range = (
        isinstance(iterable, gast.Call)
        and isinstance(iterable.func, gast.Name)
        and iterable.func.id == "range"
    )
    if is_range and isinstance(statement.target, gast.Name):
        steps = namer.fresh("steps")
        prelude.append(_assign(steps, iterable, statement))
        statement.iter = _name(steps)
        return prelude, statement
    if not isinstance(statement.target, gast.Name):
        raise ValueError("tuple loop targets")
    sequence = namer.fresh("sequence")
    index = namer.fresh("i")
    steps = namer.fresh("steps")
    prelude.append(_assign(sequence, iterable, statement))
    prelude.append(
        _assign(steps, _call("range", _call("len", _name(sequence))), statement)
    )
    element = gast.Subscript(_name(sequence), _name(index), gast.Load())
    first = _assign(statement.target.id, element, statement)
    statement.target = gast.Name(index, gast.Store(), None, None)
    statement.iter = _name(steps)
    statement.body = [first] + statement.body
    return prelude, statement
