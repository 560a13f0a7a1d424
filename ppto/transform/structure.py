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
