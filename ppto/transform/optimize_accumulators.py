"""Loop gradients written as a person writes them: a reversed loop whose every turn
adds its step's slice into new zeros (``dx = dx + index_add(zeros_like(x), v, t)``,
the gradient of reading ``x[t]``) writes the slice instead (``dx = setitem(dx, v,
t)``), where the loop's steps are distinct and ``dx`` holds zeros before it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

import gast

from ppto.transform import trees
from ppto.transform.analyze import literal
from ppto.transform.trees import called, clone, single_target, stores


def write_distinct_slices(body: list, namespace: dict, refer: Callable) -> list:
    """``dx = zeros_like(x)`` before ``for t in reversed(steps):`` (``steps`` a
    range from 0 or above, or a slice of one), whose body adds into ``dx`` once,
    at its top level: ``dx = dx + index_add(zeros_like(x), v, t)``. Each turn's
    ``t`` is new, so ``dx[t]`` is still zero there and adding is writing:
    ``dx = setitem(dx, v, t)`` (one copy of ``dx`` a turn instead of new zeros,
    a write and a sum). ``refer(operator, name)`` gives the name the code calls an
    operator by."""
    functions = _Functions(namespace, refer)
    if functions.index_add is not None and functions.zeros_like is not None:
        _rewrite_block(body, functions)
    return body


def _rewrite_block(body: list, functions) -> None:
    for position, statement in enumerate(body):
        for _, inner in trees.nested_blocks(statement):
            _rewrite_block(inner, functions)
        if isinstance(statement, gast.For):
            _rewrite_loop(body[:position], statement, functions)


class _Functions:
    """The names the generated code calls these operators by (None: not called)."""

    def __init__(self, namespace: dict, refer: Callable):
        from ppto.ops.indexing import index_add
        from ppto.ops.shape import zeros_like

        by_value = {id(v): k for k, v in namespace.items()}
        self.namespace = namespace
        self.index_add = by_value.get(id(index_add))
        self.zeros_like = by_value.get(id(zeros_like))
        self.refer = refer

    def setitem(self) -> str:
        from ppto.ops.indexing import setitem

        return self.refer(setitem, "setitem")

    def builtin(self, identifier: str, function) -> bool:
        """Whether the code's ``identifier`` is the built-in ``function``."""
        found = self.namespace.get(identifier, getattr(builtins, identifier, None))
        return found is function

    def calls(self, node, function: str | None, arity: int) -> bool:
        return (
            function is not None
            and called(node, function)
            and len(node.args) == arity
            and not node.keywords
        )


def _rewrite_loop(before: list, loop: gast.For, functions: _Functions) -> None:
    if not isinstance(loop.target, gast.Name) or loop.orelse:
        return
    step = loop.target.id
    if not _distinct_steps(loop.iter, before, functions):
        return
    for position, statement in enumerate(loop.body):
        found = _accumulation(statement, step, functions)
        if found is None:
            continue
        gradient, like, values = found
        others = loop.body[:position] + loop.body[position + 1 :]
        if gradient in trees.loads(others) | stores(others) | trees.loads(values):
            continue  # (its turns must add into it alone)
        if {step, like} & stores(loop.body):
            continue
        if _zeros_before(before, gradient, like, functions):
            statement.value = gast.Call(
                gast.Name(functions.setitem(), gast.Load(), None, None),
                [
                    gast.Name(gradient, gast.Load(), None, None),
                    values,
                    clone(loop.target),
                ],
                [],
            )


def _accumulation(statement, step: str, functions: _Functions):
    """``(dx, x, v)`` for ``dx = dx + index_add(zeros_like(x), v, step)``."""
    target = single_target(statement)
    value = getattr(statement, "value", None)
    if target is None or not (
        isinstance(value, gast.BinOp)
        and isinstance(value.op, gast.Add)
        and isinstance(value.left, gast.Name)
        and value.left.id == target
        and functions.calls(value.right, functions.index_add, 3)
    ):
        return None
    zeros, values, index = value.right.args
    if not (
        functions.calls(zeros, functions.zeros_like, 1)
        and isinstance(zeros.args[0], gast.Name)
        and isinstance(index, gast.Name)
        and index.id == step
    ):
        return None
    return target, zeros.args[0].id, values


def _distinct_steps(iterable, before: list, functions: _Functions) -> bool:
    """Whether the loop runs over ``reversed(r)`` or ``reversed(r[:n])`` with ``r``
    a range of numbers from 0 up (distinct, and no two naming one row as ``-1``
    and ``n - 1`` do)."""
    if not (
        isinstance(iterable, gast.Call)
        and isinstance(iterable.func, gast.Name)
        and functions.builtin(iterable.func.id, reversed)
        and len(iterable.args) == 1
    ):
        return False
    steps = iterable.args[0]
    if isinstance(steps, gast.Subscript) and isinstance(steps.slice, gast.Slice):
        bounds = steps.slice
        if bounds.lower is not None or bounds.step is not None:
            return False
        steps = steps.value
    if not isinstance(steps, gast.Name):
        return False
    definition = _last_assignment(before, steps.id)
    if definition is None:
        return False
    made = definition.value
    if not (
        isinstance(made, gast.Call)
        and isinstance(made.func, gast.Name)
        and functions.builtin(made.func.id, range)
        and 1 <= len(made.args) <= 3
        and not made.keywords
    ):
        return False
    if len(made.args) == 1:
        return True
    start = literal(made.args[0])
    stride = literal(made.args[2]) if len(made.args) == 3 else 1
    return type(start) is int and start >= 0 and type(stride) is int and stride > 0


def _last_assignment(before: list, identifier: str):
    """The statement of ``before`` that last stores ``identifier``, if that is a
    plain ``identifier = ...`` at this level."""
    for statement in reversed(before):
        if identifier in stores(statement):
            return statement if single_target(statement) == identifier else None
    return None


def _zeros_before(before: list, gradient: str, like: str, functions) -> bool:
    """Whether ``gradient`` holds ``zeros_like(like)`` when the loop starts: the
    last statement before it that mentions ``gradient`` makes those zeros, and
    ``like`` is not stored after it."""
    for position in range(len(before) - 1, -1, -1):
        statement = before[position]
        if gradient not in trees.loads(statement) | stores(statement):
            continue
        value = getattr(statement, "value", None)
        return (
            single_target(statement) == gradient
            and functions.calls(value, functions.zeros_like, 1)
            and isinstance(value.args[0], gast.Name)
            and value.args[0].id == like
            and like not in stores(before[position + 1 :])
        )
    return False
