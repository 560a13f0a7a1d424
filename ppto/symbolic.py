"""Symbolic expressions: operators applied to ``ppto.symbol`` build ``Operator`` nodes
instead of computing, so users can inspect (``.op``, ``.args``), differentiate with
``ppto.get_grad_rule(expr.op)`` and ``ppto.evaluate`` them.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ppto.errors import DTypeError, PptoError, ShapeError
from ppto.ops import expected, indexing, methods
from ppto.runtime.dtypes import check_dtype
from ppto.runtime.tensor import tensor


class _Expression:
    _ppto_symbolic = True
    __hash__ = None

    @property
    def ndim(self) -> int:
        return len(_single(self).shape)

    @property
    def size(self) -> int:
        return int(np.prod(_single(self).shape))

    def __bool__(self):
        raise PptoError(
            f"{self!r} is symbolic and has no truth value: evaluate it first with "
            "ppto.evaluate(expr, values)"
        )

    def _no_number(self):
        raise PptoError(
            f"{self!r} is symbolic and has no value to read as a number: evaluate "
            "it first with ppto.evaluate(expr, values)"
        )

    __float__ = __int__ = __complex__ = _no_number

    def __array__(self, dtype=None, copy=None):
        raise PptoError(
            f"{self!r} is symbolic and has no values: evaluate it first with "
            "ppto.evaluate(expr, values)"
        )

    def __len__(self) -> int:
        probe = _probe(self)
        if isinstance(probe, tuple):  # (several results: ``w, v = ppto.eigh(a)``)
            return len(probe)
        shape = probe.shape
        if not shape:
            raise ShapeError(f"len() of {self!r}, which is 0-d")
        return shape[0]

    def __iter__(self):
        """Its elements along the first axis, as a tensor's (without this, Python
        iterated by indexing, and a symbolic index never ends the iteration)."""
        return (self[i] for i in range(len(self)))


class Symbol(_Expression):
    """A named placeholder: ``ppto.symbol("x", (3, 4))``."""

    def __init__(self, name: str, shape: tuple | None = None, dtype: str = "float64"):
        if not isinstance(name, str) or not name:
            raise PptoError(f"a symbol is named by a non-empty string, got {name!r}")
        self.name = name
        self.shape = None if shape is None else _checked_shape(name, shape)
        self.dtype = check_dtype(dtype, f"symbol {name!r} dtype")

    def __repr__(self) -> str:
        return self.name


class Operator(_Expression):
    """An applied operator: ``.op`` (its definition), ``.inputs`` (its tensor
    arguments) and ``.params`` (the others, by name); ``.args`` is both in the
    operator's order, so ``ppto.get_grad_rule(op)(*expr.args)`` and
    ``op.call_with_inputs(expr.inputs, expr.params)`` see the same call
    (``reduce_sum(e, axis=1)`` has args ``(e, 1, False)``; ``op(*expr.args)`` too,
    but for an operator whose calls by position take NumPy's order: average, pad,
    diff, median and the quantiles, see ``OperatorDef.positional``, which refuse
    it, naming ``call_with_inputs``); its repr is a call that builds it again;
    ``.shape``, ``.ndim`` and ``.dtype`` where its symbols' shapes are known (so a
    gradient rule that looks at them can be applied to expressions); a node of an
    operator with several results (eigh) has their number as ``len`` and unpacks
    into one node per result."""

    def __init__(self, op: Any, inputs: tuple, params: dict) -> None:
        self.op = op
        self.inputs = inputs
        self.params = params
        self._probe = None

    @property
    def args(self) -> tuple:
        # The seed's symbolic differentiator calls grad_rule(*expr.args): with the
        # tensor inputs alone, reduce_sum(e, axis=1)'s rule was built for axis=None.
        return self.inputs + tuple(self.params[name] for name in self.op.param_names)

    @property
    def shape(self) -> tuple:
        return tuple(_single(self).shape)

    @property
    def dtype(self) -> np.dtype:
        return _single(self).dtype

    def __repr__(self) -> str:
        # a call that builds this node again: the parameters in the operator's
        # order, and where calls by position take NumPy's order (pad, diff,
        # average), the inputs after the first by name, left out where they are
        # their default None: pad(x, 0.5, pad_width=1) read as NumPy's pad_width=0.5
        op = self.op
        parts = [repr(arg) for arg in self.inputs]
        if getattr(op, "positional", ()):
            defaults = getattr(op, "input_defaults", {})
            parts = parts[:1] + [
                f"{name}={value!r}"
                for name, value in zip(op.input_names[1:], self.inputs[1:])
                if not (value is None and defaults.get(name, 0) is None)
            ]
        order = {name: n for n, name in enumerate(getattr(op, "param_names", ()))}
        named = sorted(self.params.items(), key=lambda item: order.get(item[0], 0))
        parts += [f"{key}={value!r}" for key, value in named]
        return f"{op.name}({', '.join(parts)})"


def _checked_shape(name: str, shape: Any) -> tuple:
    try:
        checked = tuple(operator.index(n) for n in shape)
    except TypeError as error:
        raise ShapeError(
            f"symbol {name!r}: a shape is a tuple of integers, got {shape!r}"
        ) from error
    if any(n < 0 for n in checked):
        raise ShapeError(f"symbol {name!r}: shape {checked} has a negative length")
    return checked


def symbol(name: str, shape: tuple | None = None, dtype: str = "float64") -> Symbol:
    """A symbolic input.

    >>> x = ppto.symbol("x", (3,))
    >>> ppto.exp(x)
    exp(x)
    """
    return Symbol(name, shape, dtype)


def _probe(expr: Any) -> Any:
    """An array of ``expr``'s shape and dtype that takes no memory (every element
    is one element), standing in for it."""
    if isinstance(expr, Symbol):
        if expr.shape is None:
            raise PptoError(
                f"symbol {expr.name!r} has no shape, so the shape of an expression "
                f"using it is unknown: give one, ppto.symbol({expr.name!r}, shape)"
            )
        return expected.stand_in(expr.shape, np.dtype(expr.dtype))
    if isinstance(expr, Operator):
        if expr._probe is None:
            args = [_probe(arg) for arg in expr.inputs]
            params = {key: _probe(value) for key, value in expr.params.items()}
            for value in [*args, *params.values()]:
                if isinstance(value, _ValueDependent):
                    raise value.error()
            expr._probe = _result(expr, args, params)
        return expr._probe
    if isinstance(expr, (list, tuple)):
        return type(expr)(_probe(item) for item in expr)
    return expr


def _single(expr: Any) -> Any:
    """``_probe(expr)`` for an expression with one result; one with several has
    no shape of its own."""
    probe = _probe(expr)
    if isinstance(probe, _ValueDependent):
        raise probe.error()
    if isinstance(probe, tuple):
        shapes = ", ".join(
            "unknown" if isinstance(part, _ValueDependent) else str(part.shape)
            for part in probe
        )
        raise PptoError(
            f"{expr!r} has {len(probe)} results (shapes {shapes}), not one shape: "
            "read one, expr[0], or unpack them"
        )
    return probe


def _result(expr: Operator, args: list, params: dict):
    """A stand-in of ``expr``'s result: its shape from the operator's signature
    where that gives it (no computation), else from running the operator on the
    stand-ins of zeros and of ones (which must agree: a shape that depends on the
    values, as of ``y[y > 0.5]``, is not known). An operator with several results
    has a tuple of stand-ins; an item of it is read without running anything."""
    op = expr.op
    if op is indexing.getitem and isinstance(args[0], tuple):
        return args[0][params["index"]]
    shape = expected.from_signature(op, args, params)
    if shape is not None:
        small = [_first(arg) for arg in args]  # (one element each: the dtype)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (ddof on one element, and the like)
            try:
                dtype = np.asarray(op.apply(small, dict(params))).dtype
            except PptoError:  # (clip refuses bounds wider than a one-element x)
                dtype = None
        if dtype is not None:
            return expected.stand_in(shape, dtype)
    if expected.elements(args) > expected.PROBE_LIMIT:
        raise PptoError(
            f"the shape of {expr!r} is not computed for inputs this large: ppto "
            "would run the operator to find it"
        )
    try:
        results = _runs(expr, args, params, expected.filled, (0, 1))
    except (ShapeError, DTypeError):
        raise
    except PptoError as error:
        # values outside the operator's domain (inv or cholesky of a constant
        # matrix, average's weights summing to 0): once more on matrices that
        # are a multiple of the identity, invertible and positive definite
        try:
            results = _runs(expr, args, params, _diagonal, (0, 1))
        except PptoError:
            raise error from None
    else:  # (constant matrices have rank 1: lstsq's residuals of full rank differ)
        try:
            results += _runs(expr, args, params, _diagonal, (0,))
        except PptoError:
            pass
    if isinstance(results[0], tuple):  # (each result's shape known or not)
        return tuple(
            _stand_ins(parts[0])
            if all(_shapes(part) == _shapes(parts[0]) for part in parts)
            else _ValueDependent(f"{expr!r}[{number}]")
            for number, parts in enumerate(zip(*results))
        )
    if any(_shapes(result) != _shapes(results[0]) for result in results[1:]):
        raise _ValueDependent(repr(expr)).error()
    return _stand_ins(results[0])


class _ValueDependent:
    """The stand-in of one of an operator's results whose shape depends on the
    values (lstsq's residuals: none where the matrix has not full rank); reading
    it raises."""

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self) -> PptoError:
        return PptoError(
            f"the shape of {self.text} depends on its inputs' values, so it is not "
            "known until it is evaluated"
        )


def _runs(expr: Operator, args: list, params: dict, fill_with, fills) -> list:
    """The operator's results on stand-ins ``fill_with(value, fill)`` of its
    symbolic inputs, one per fill."""
    results = []
    for fill in fills:
        with np.errstate(all="ignore"):
            filled = [  # (what is given as a value stays as it is)
                fill_with(arg, fill) if isinstance(given, _Expression) else arg
                for arg, given in zip(args, expr.inputs)
            ]
            settings = {  # (a symbolic index array is a value too)
                key: fill_with(value, fill)
                if isinstance(expr.params[key], _Expression)
                else value
                for key, value in params.items()
            }
            results.append(_arrays(expr.op.apply(filled, settings)))
    return results


def _diagonal(value: Any, fill: int):
    """``fill + 1`` times the identity in the last two axes of ``value``'s arrays
    (``fill + 1`` everywhere for fewer axes), of their shapes and dtypes."""
    if isinstance(value, (list, tuple)):
        return type(value)(_diagonal(item, fill) for item in value)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        return value
    shape = tuple(value.shape)
    if len(shape) < 2:
        return np.full(shape, fill + 1, value.dtype)
    eye = np.eye(shape[-2], shape[-1]) * (fill + 1)
    return np.broadcast_to(eye, shape).astype(value.dtype)


def _arrays(result: Any):
    """An operator's result as NumPy arrays: a tuple of them for an operator with
    several results (eigh's values and vectors: as one array, NumPy refused them,
    their shapes differing)."""
    if isinstance(result, tuple):
        return tuple(_arrays(part) for part in result)
    return np.asarray(result)


def _shapes(value: Any):
    if isinstance(value, tuple):
        return tuple(_shapes(part) for part in value)
    return value.shape


def _stand_ins(value: Any):
    if isinstance(value, tuple):
        return tuple(_stand_ins(part) for part in value)
    return expected.stand_in(value.shape, value.dtype)


def _first(value: Any):
    """A one-element array of ``value``'s dtype with its number of axes."""
    if isinstance(value, np.ndarray):
        return np.zeros((1,) * value.ndim, value.dtype)
    return value


def evaluate(expr: Any, values: dict) -> Any:
    """Compute ``expr`` with each symbol's value taken from ``values`` by name.

    >>> ppto.evaluate(ppto.exp(ppto.symbol("x", (1,))), {"x": [0.0]})
    Tensor([1.], device='cpu', dtype=float64)
    """
    if not isinstance(values, Mapping):
        raise PptoError(
            f"evaluate takes a dict from symbol names to values, got a "
            f"{type(values).__name__}: write ppto.evaluate(expr, {{'x': value}})"
        )
    if isinstance(expr, Symbol):
        if expr.name not in values:
            raise PptoError(f"evaluate: no value given for symbol {expr.name!r}")
        value = tensor(values[expr.name])
        if expr.shape is not None and value.shape != expr.shape:
            raise ShapeError(
                f"evaluate: symbol {expr.name!r} has shape {expr.shape}, but its "
                f"value has shape {value.shape}"
            )
        return value
    if isinstance(expr, Operator):
        args = [evaluate(arg, values) for arg in expr.inputs]
        params = {key: evaluate(value, values) for key, value in expr.params.items()}
        if expr.op is indexing.getitem and isinstance(args[0], tuple):
            return args[0][params["index"]]  # (one of an operator's several results)
        return expr.op.apply(args, params)
    if isinstance(expr, (list, tuple)):
        return type(expr)(evaluate(item, values) for item in expr)
    return expr


for _name, _method in methods.expression_methods().items():
    setattr(_Expression, _name, _method)
