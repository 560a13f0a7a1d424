"""Branches decided by a test of a dict's keys, which the code is made for: where
``"b" in d`` is known (d's keys are), only the branch taken is read and rewritten,
as only it runs (a read of ``d["b"]`` in the other would be refused).

``DecidedBranches`` is mixed into a rewriting ``gast.NodeTransformer`` whose
``visit_Compare`` writes such a test as a bool or as ``"b" in ("a",)``, the keys
written out.
"""

from __future__ import annotations

import gast


class DecidedBranches:
    """``if``, conditional expressions and ``and``/``or`` whose test a key decides
    (``"b" in p and p["b"] > 0``: what follows a False is not evaluated)."""

    def visit_If(self, node):
        return self.branches(node, self.block) or [
            gast.copy_location(gast.Pass(), node)
        ]

    def visit_IfExp(self, node):
        return self.branches(node, self.visit)

    def branches(self, node, visit):
        """``node`` (an ``if`` or a conditional expression) with its test and
        branches rewritten (by ``visit``), or the branch its test takes."""
        node.test = self.visit(node.test)
        truth = decided(node.test)
        if truth is None:
            node.body, node.orelse = visit(node.body), visit(node.orelse)
            return node
        return visit(node.body if truth else node.orelse)

    def visit_BoolOp(self, node):
        values = []
        for value in node.values:
            values.append(self.visit(value))
            if decided(values[-1]) is isinstance(node.op, gast.Or):
                break
        node.values = values
        return node if len(values) > 1 else values[0]

    def block(self, statements: list) -> list:
        """``statements`` rewritten (an ``if`` decided: its branch's, in place)."""
        out = []
        for statement in statements:
            visited = self.visit(statement)
            out += visited if isinstance(visited, list) else [visited]
        return out


def decided(test) -> bool | None:
    """The truth of a written True or False, of a key written out among keys
    written out (``"b" in ("a",)``), or of ``not`` of one; None for any other test.

    >>> decided(gast.parse('"b" not in ("a",)').body[0].value)
    True
    """
    if isinstance(test, gast.Constant) and type(test.value) is bool:
        return test.value
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        truth = decided(test.operand)
        return None if truth is None else not truth
    if not (
        isinstance(test, gast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (gast.In, gast.NotIn))
        and isinstance(test.left, gast.Constant)
        and isinstance(test.comparators[0], gast.Tuple)
        and all(isinstance(key, gast.Constant) for key in test.comparators[0].elts)
    ):
        return None
    found = test.left.value in [key.value for key in test.comparators[0].elts]
    return found == isinstance(test.ops[0], gast.In)
