"""Loop accumulators added into in place in the code that runs on the CPU.

A reversed loop's gradient of a weight read every turn is a sum over the turns:
``dW = zeros_like(W)`` before the loop, ``dW = dW + h.T @ dt`` in it. Written so,
each turn allocates a new ``dW`` and copies the old one into the sum; hand-written
NumPy writes ``dW += h.T @ dt``. (Measured on the benchmark RNN, 50 steps of a
128x128 weight: 4% of the whole gradient.) Where nothing else can see ``dW``'s
array (it is made as zeros just before the loop, and in the loop only that one
statement reads or writes the name), adding into it in place changes no value:
``dW = add_into(dW, v)`` writes ``dW + v`` into ``dW`` when the sum has its
shape and dtype, and makes the sum as before otherwise.

Only in lowered CPU code: code that is differentiated again keeps its functional
form, and another backend may run ``+`` as its own operator.
"""

from __future__ import annotations

from collections.abc import Callable

import gast
import numpy as np

from ppto.transform import trees
from ppto.transform.trees import loads, single_target, stores


def add_into(total, value):
    """``total + value``, written into ``total`` where that is the same array: NumPy
    arrays of one shape (not 0-d: a sum of those is a scalar) and dtype, ``total``
    writeable (the caller guarantees nothing else refers to it). The checks are
    attribute reads: this runs once per loop turn, where ``np.result_type`` and
    ``np.shape`` cost as much as the saved copy of a small gradient."""
    if (
        type(value) is np.ndarray
        and type(total) is np.ndarray
        and value.shape == total.shape
        and value.dtype == total.dtype
        and total.ndim
        and total.flags.writeable
    ):
        np.add(total, value, out=total)
        return total
    return total + value


def accumulate_in_place(definition, is_zeros: Callable, bind: Callable) -> None:
    """Rewrite ``definition``'s loop accumulators (see the module docstring).
    ``is_zeros(call)`` tells whether an expression makes new zeros;
    ``bind(function, name)`` gives the name the code calls ``function`` by."""
    _block(definition.body, is_zeros, bind)


def _block(body: list, is_zeros, bind) -> None:
    for position, statement in enumerate(body):
        for _, inner in trees.nested_blocks(statement):
            _block(inner, is_zeros, bind)
        if isinstance(statement, gast.For):
            _loop(body[:position], statement, is_zeros, bind)


def _loop(before: list, loop: gast.For, is_zeros, bind) -> None:
    outside = loads([loop.target, loop.iter]) | stores([loop.target])
    outside |= loads(loop.orelse) | stores(loop.orelse)
    for position, statement in enumerate(loop.body):
        found = _accumulation(statement)
        if found is None:
            continue
        total, value = found
        others = loop.body[:position] + loop.body[position + 1 :]
        if total in loads(others) | stores(others) | loads(value) | outside:
            continue  # (another read could keep the array the sum is written into)
        if not _zeros_before(before, total, is_zeros):
            continue
        statement.value = gast.Call(
            gast.Name(bind(add_into, "add_into"), gast.Load(), None, None),
            [gast.Name(total, gast.Load(), None, None), value],
            [],
        )


def _accumulation(statement):
    """``(total, v)`` for ``total = total + v``."""
    target = single_target(statement)
    value = getattr(statement, "value", None)
    if (
        target is not None
        and isinstance(value, gast.BinOp)
        and isinstance(value.op, gast.Add)
        and isinstance(value.left, gast.Name)
        and value.left.id == target
    ):
        return target, value.right
    return None


def _zeros_before(before: list, total: str, is_zeros) -> bool:
    """Whether the last statement before the loop that mentions ``total`` makes it
    new zeros (so no other name holds its array)."""
    for statement in reversed(before):
        if total not in loads(statement) | stores(statement):
            continue
        return single_target(statement) == total and is_zeros(statement.value)
    return False
