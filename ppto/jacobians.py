"""Whole Jacobians: ``jacobian`` (``jacrev``, ``jacfwd``), built on ``vjp`` and ``jvp``.

A Jacobian is assembled from the transformed code one basis vector at a time: reverse
mode runs the forward pass once and the generated backward pass once per output
element (a row each), forward mode runs the generated tangent code once per input
element (a column each). Which is cheaper depends on which side is smaller, as in JAX
(``jacrev`` for few outputs, ``jacfwd`` for few inputs); both give the same matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.api import (
    _Call,
    _device_of,
    _dict_result_keys,
    _observed,
    _target_function,
    _wrt_names,
    jvp,
    vjp,
)
from ppto.checkpoint import random_states, rewind
from ppto.errors import GradError
from ppto.runtime.device import CPU
from ppto.runtime.tensor import Tensor

MODES = ("reverse", "forward")


def jacobian(f: Callable, wrt: int | str | tuple | list = 0, mode: str = "reverse"):
    """``J(*args, **kwargs)``: the Jacobian of ``f``'s output with respect to
    ``args[wrt]``, of shape ``output.shape + argument.shape`` (JAX's layout). A tuple
    ``wrt`` gives a tuple of Jacobians, one per argument; a function returning a tuple
    gives a tuple per output (outer: outputs, inner: arguments). Each Jacobian is in
    its argument's dtype, as gradients are, on the argument's device."""
    if mode not in MODES:
        raise GradError(f"jacobian: mode={mode!r}; use 'reverse' or 'forward'")
    function = _target_function(f)
    if _dict_result_keys(f) is not None:  # (its code returns the list of values)
        raise GradError(
            f"jacobian: {function.__name__} returns a dict; take the Jacobian of a "
            "function returning one of its values (or a tuple of them), or use "
            "ppto.vjp / ppto.jvp, which hand back dicts"
        )
    names = _wrt_names(function, wrt)
    several = isinstance(wrt, (tuple, list))
    build = _reverse if mode == "reverse" else _forward

    def compute(*args: Any, **kwargs: Any):
        call = _Call(function, args, kwargs)
        positions = [call.names.index(name) for name in names]
        for name, position in zip(names, positions):
            _require_float(function.__name__, name, call.values[position])
        # (vjp and jvp bind positionally: keyword arguments become positional here)
        values = list(call.values)
        outputs, blocks = build(f, values, positions)
        per_output = [
            tuple(
                _as_result(block, values[position])
                for block, position in zip(row, positions)
            )
            for row in blocks
        ]
        result = [row if several else row[0] for row in per_output]
        result = tuple(result) if outputs else result[0]
        return _observed("Jacobian", function.__name__, result)

    compute.__name__ = f"jacobian_of_{function.__name__}"
    return compute


def jacrev(f: Callable, wrt: int | str | tuple | list = 0):
    """``jacobian`` in reverse mode: one backward pass per output element."""
    return jacobian(f, wrt, mode="reverse")


def jacfwd(f: Callable, wrt: int | str | tuple | list = 0):
    """``jacobian`` in forward mode: one tangent pass per input element."""
    return jacobian(f, wrt, mode="forward")


def _reverse(f: Callable, values: list, positions: list[int]):
    """(whether ``f`` returned a tuple, blocks[output][argument]) from one forward
    pass and a pullback of every output element's basis vector."""
    out, pullback = vjp(f, *values)
    outputs = out if isinstance(out, tuple) else (out,)
    shapes = [_host(o).shape for o in outputs]
    dtypes = [_host(o).dtype for o in outputs]
    blocks = []
    for which, shape in enumerate(shapes):
        rows = [[] for _ in positions]
        for index in range(int(np.prod(shape, dtype=np.int64))):
            cotangent = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
            cotangent[which].reshape(-1)[index] = 1
            grads = pullback(
                tuple(cotangent) if isinstance(out, tuple) else cotangent[0]
            )
            for row, position in zip(rows, positions):
                row.append(_flat(grads[position], values[position]))
        blocks.append(
            [
                _assembled(row, shape, _shape(values[position]), rows_first=True)
                for row, position in zip(rows, positions)
            ]
        )
    return isinstance(out, tuple), blocks


def _forward(f: Callable, values: list, positions: list[int]):
    """(whether ``f`` returned a tuple, blocks[output][argument]) from a tangent pass
    per element of each argument asked for, the others held constant."""
    columns_by_argument, shapes, tupled = [], None, False
    states = random_states(_target_function(f), *values)
    for position in positions:
        point = _host(values[position])
        columns = []
        for index in range(point.size):
            if index or position != positions[0]:  # (see checkpoint.rewind)
                rewind(states)
            basis = np.zeros(point.shape, point.dtype)
            basis.reshape(-1)[index] = 1
            tangents = [None] * len(values)
            tangents[position] = basis
            out, tangent = jvp(f, values, tangents)
            tupled = isinstance(out, tuple)
            outs = out if tupled else (out,)
            tangent = tangent if tupled else (tangent,)
            shapes = [_host(o).shape for o in outs]
            columns.append([_host(t).reshape(-1) for t in tangent])
        columns_by_argument.append(columns)
    if shapes is None:  # every argument asked for is empty: no column says the output
        out, _ = vjp(f, *values)
        tupled = isinstance(out, tuple)
        shapes = [_host(o).shape for o in (out if tupled else (out,))]
    blocks = [
        [
            _assembled(
                [column[which] for column in columns],
                shape,
                _shape(values[position]),
                rows_first=False,
            )
            for columns, position in zip(columns_by_argument, positions)
        ]
        for which, shape in enumerate(shapes)
    ]
    return tupled, blocks


def _assembled(parts: list, out_shape: tuple, in_shape: tuple, rows_first: bool):
    """The Jacobian block ``out_shape + in_shape`` from its rows (one flat gradient
    per output element) or its columns (one flat tangent per input element)."""
    if not parts:
        return np.zeros(out_shape + in_shape)
    return np.stack(parts, axis=0 if rows_first else -1).reshape(out_shape + in_shape)


def _flat(gradient, argument) -> np.ndarray:
    """A pullback's gradient as a flat host row (zeros where it gave None)."""
    if gradient is None:
        return np.zeros(int(np.prod(_shape(argument))))
    return np.asarray(_host(gradient), dtype=np.float64).reshape(-1)


def _shape(value) -> tuple:
    return tuple(getattr(value, "shape", ()))


def _host(value) -> np.ndarray:
    """``value``'s numbers on the host (a Tensor or CuPy array refuses np.asarray)."""
    if isinstance(value, Tensor):
        return value.numpy()
    if hasattr(value, "get") and type(value).__module__.startswith("cupy"):
        return value.get()
    return np.asarray(value)


def _as_result(block: np.ndarray, argument) -> Tensor:
    """A Jacobian block in its argument's floating dtype, on its device."""
    result = Tensor(
        np.asarray(block, dtype=getattr(argument, "dtype", np.float64)), CPU
    )
    device = _device_of(argument)
    return result if device == CPU else result.to(device)


def _require_float(function_name: str, name: str, value) -> None:
    dtype = getattr(value, "dtype", None)
    if isinstance(value, float) or (dtype is not None and np.dtype(dtype).kind == "f"):
        return
    what = f"dtype {dtype}" if dtype is not None else type(value).__name__
    raise GradError(
        f"jacobian of {function_name}: cannot differentiate with respect to "
        f"{name!r} ({what}); only floating point arguments have a Jacobian "
        f"(convert with .astype('float64'))"
    )
