"""What shape and dtype an operator's result has, to check a registered backend's
own implementations (``<op>_impl``) against: a result of another shape or dtype
than the operator's raises ``BackendError`` where it is returned, not somewhere
later.

The expected shape comes from the operator's signature where its mode gives it
(broadcasting operators, matrix products), and otherwise from running the
operator's own implementation once per kind of input, on NumPy stand-ins that take
no memory, twice: filled with zeros and with ones. Where the two disagree the shape
depends on the values (``segment_sum`` counting its segments), and nothing is
checked; nor for inputs of more than ``PROBE_LIMIT`` elements, whose reference run
would cost more than a check is worth, nor for parameters that cannot be compared
(an index array). The expected dtype is the reference run's, on stand-ins of one
element per axis where the signature gave the shape; where that run fails, the
dtype is not checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppto.errors import BackendError
from ppto.ops.primitive import OPERATORS
from ppto.ops.signature import fills, matmul_shape

PROBE_LIMIT = 1 << 20  # input elements above which no reference run is made
_LIMIT = 1024  # kinds of input remembered
_EXPECTED: dict = {}  # (op, input shapes and dtypes, parameters) -> result
# shapes and dtypes (dtypes None where not known)


def check_output(kind: str, op_name: str, args: tuple, params: dict, out: Any) -> None:
    """Raise ``BackendError`` if ``out`` does not have the shape and dtype
    ``op_name`` gives for ``args`` and ``params`` (see the module docstring)."""
    try:
        key = (op_name, _signature_of(args), tuple(params.items()))
        expected = _EXPECTED.get(key, _UNKNOWN)
    except (TypeError, ValueError):
        return  # (an index array among the parameters: not checked)
    if expected is _UNKNOWN:
        expected = _EXPECTED[key] = _expected(OPERATORS.get(op_name), args, params)
        if len(_EXPECTED) > _LIMIT:
            _EXPECTED.pop(next(iter(_EXPECTED)))
    if expected is None:
        return
    shapes, dtypes = expected
    got = _shapes(out)
    if got != shapes:
        given = ", ".join(str(shape) for shape in _shapes(list(args)))
        raise BackendError(
            f"backend {kind!r}: {op_name}_impl returned a result of shape {got} for "
            f"inputs of shape {given}, but ppto.{op_name} gives {shapes}"
        )
    got = _dtypes(out)
    if dtypes is not None and got != dtypes:
        given = ", ".join(_named(_dtypes(arg)) for arg in args)
        raise BackendError(
            f"backend {kind!r}: {op_name}_impl returned a result of dtype "
            f"{_named(got)} for inputs of dtype {given}, but ppto.{op_name} gives "
            f"{_named(dtypes)}: return its result in that dtype (.astype)"
        )


_UNKNOWN = object()


def _expected(op: Any, args: tuple, params: dict):
    """The result shape(s) and dtype(s) ``op`` gives, or None where the shapes
    cannot be told (the dtypes None where they cannot)."""
    generic = getattr(op, "impl", None)
    shape = from_signature(op, args, params)
    if shape is not None:
        return shape, _reference_dtypes(generic, _one_element(args), params)
    if generic is None or elements(args) > PROBE_LIMIT:
        return None
    try:
        with np.errstate(all="ignore"):
            zeros = generic(np, *filled(args, 0), **params)
            ones = _shapes(generic(np, *filled(args, 1), **params))
    except Exception:  # the reference run is only a reference: without it, no check
        return None
    return (_shapes(zeros), _dtypes(zeros)) if _shapes(zeros) == ones else None


def _reference_dtypes(generic, args, params: dict):
    """The dtype(s) of ``generic``'s result on ``args``, or None where it fails."""
    if generic is None:
        return None
    try:
        with np.errstate(all="ignore"):
            return _dtypes(generic(np, *args, **params))
    except Exception:  # (as in _expected: no reference, no check)
        return None


def _one_element(value: Any):
    """Stand-ins of ``value``'s arrays with one element per axis (what a dtype
    depends on: dtypes and numbers of axes)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_one_element(item) for item in value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return stand_in((1,) * len(value.shape), value.dtype)
    return value


def from_signature(op: Any, args, params: dict | None = None) -> tuple | None:
    """The result shape of a broadcasting operator, a matrix product or a
    reduction, from its inputs' shapes (and a reduction's ``axis`` and
    ``keepdims``); None for other operators, or shapes that do not fit."""
    from ppto.ops.reductions import REDUCTIONS, reduced_shape

    mode = getattr(getattr(op, "signature", None), "mode", "")
    try:
        # (inside: an operator of a list of arrays, multi_dot's, has no shape
        # from NumPy for that list, its items' shapes differing)
        shapes = [np.shape(arg) for arg in args]
        if mode == "broadcast":
            return tuple(np.broadcast_shapes(*shapes))
        if mode == "matmul":
            return matmul_shape(*shapes)
        if mode == "fill":
            fitting = all(fills(shapes[0], shape) for shape in shapes[1:])
            return tuple(shapes[0]) if fitting else None
        if getattr(op, "name", None) in REDUCTIONS and params is not None:
            return reduced_shape(
                shapes[0], params.get("axis"), params.get("keepdims", False)
            )
    except (ValueError, TypeError):
        return None  # (shapes the operator refuses: it says so itself)
    return None


def _signature_of(value: Any):
    if isinstance(value, (list, tuple)):
        return tuple(_signature_of(item) for item in value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return (tuple(value.shape), value.dtype)
    return value


def elements(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(elements(item) for item in value)
    return int(np.prod(np.shape(value))) if hasattr(value, "shape") else 0


def filled(value: Any, fill: int):
    """NumPy stand-ins of ``value``'s arrays: ``fill`` in their shape and dtype."""
    if isinstance(value, (list, tuple)):
        return type(value)(filled(item, fill) for item in value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return stand_in(tuple(value.shape), value.dtype, fill)
    return value


def stand_in(shape: tuple, dtype, fill: int = 0) -> np.ndarray:
    """A read-only array of ``shape`` holding ``fill`` that takes no memory: every
    element is the same one."""
    one = np.full(1, fill, np.dtype(dtype))
    strides = (0,) * len(shape)
    return np.lib.stride_tricks.as_strided(one, shape, strides, writeable=False)


def _shapes(value: Any):
    if isinstance(value, (list, tuple)):
        return tuple(_shapes(item) for item in value)
    return tuple(np.shape(value))


def _dtypes(value: Any):
    """The NumPy dtype(s) of an array, a Python number, or a tuple of them; None
    for what has no dtype NumPy knows."""
    if isinstance(value, (list, tuple)):
        return tuple(_dtypes(item) for item in value)
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        number = isinstance(value, (bool, int, float))
        return np.asarray(value).dtype if number else None
    try:
        return np.dtype(dtype)
    except TypeError:  # (a backend's own dtype object)
        return None


def _named(dtypes: Any) -> str:
    if isinstance(dtypes, tuple):
        return f"({', '.join(_named(dtype) for dtype in dtypes)})"
    return str(dtypes)
