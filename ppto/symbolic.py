"""Symbolic expressions: operators applied to ``ppto.symbol`` build ``Operator`` nodes
instead of computing, so users can inspect (``.op``, ``.args``), differentiate with
``ppto.get_grad_rule(expr.op)`` and ``ppto.evaluate`` them.
"""

from __future__ import annotations

from typing import Any

from ppto.errors import PptoError
from ppto.ops import methods
from ppto.runtime.tensor import tensor


class _Expression:
    _ppto_symbolic = True
    __hash__ = None

    def __bool__(self):
        raise PptoError(
            f"{self!r} is symbolic and has no truth value: evaluate it first with "
            "ppto.evaluate(expr, values)"
        )


class Symbol(_Expression):
    """A named placeholder: ``ppto.symbol("x", (3, 4))``."""

    def __init__(self, name: str, shape: tuple | None = None, dtype: str = "float64"):
        self.name = name
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return self.name


class Operator(_Expression):
    """An applied operator: ``.op`` (its definition), ``.args`` and ``.params``."""

    def __init__(self, op: Any, args: tuple, params: dict) -> None:
        self.op = op
        self.args = args
        self.params = params

    def __repr__(self) -> str:
        parts = [repr(arg) for arg in self.args]
        parts += [f"{key}={value!r}" for key, value in self.params.items()]
        return f"{self.op.name}({', '.join(parts)})"


def symbol(name: str, shape: tuple | None = None, dtype: str = "float64") -> Symbol:
    """A symbolic input.

    >>> x = ppto.symbol("x", (3,))
    >>> ppto.exp(x)
    exp(x)
    """
    return Symbol(name, shape, dtype)


def evaluate(expr: Any, values: dict) -> Any:
    """Compute ``expr`` with each symbol's value taken from ``values`` by name."""
    if isinstance(expr, Symbol):
        if expr.name not in values:
            raise PptoError(f"evaluate: no value given for symbol {expr.name!r}")
        return tensor(values[expr.name])
    if isinstance(expr, Operator):
        args = [evaluate(arg, values) for arg in expr.args]
        return expr.op.apply(args, dict(expr.params))
    if isinstance(expr, (list, tuple)):
        return type(expr)(evaluate(item, values) for item in expr)
    return expr


for _name, _method in methods.expression_methods().items():
    setattr(_Expression, _name, _method)
