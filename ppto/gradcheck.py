"""``check_grad``: analytic derivatives against central differences in float64.

The function's output is reduced to a scalar ``S = <u, f(x)>`` with a random cotangent
``u``. Reverse-mode gradients of ``S`` are compared with central differences along
random directions and, for small inputs, element by element (the worst element is
reported). When tangent rules exist, the forward and reverse results must also satisfy
the dot-product identity ``<u, J v> == <J^T u, v>``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppto.errors import GradError
from ppto.runtime.tensor import Tensor, tensor

TOLERANCES = {np.dtype(np.float64): (1e-6, 1e-8), np.dtype(np.float32): (3e-3, 1e-4)}


@dataclass
class WorstElement:
    argument: str
    index: tuple
    analytic: float
    numeric: float


@dataclass
class GradCheckReport:
    """What ``check_grad`` found; true when every comparison is within tolerance."""

    ok: bool
    max_error: float
    worst: WorstElement | None
    directional_errors: list[float] = field(default_factory=list)
    identity_error: float | None = None
    dtype: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [
            f"check_grad ({self.dtype}): {'ok' if self.ok else 'FAILED'}, "
            f"worst normalized error {self.max_error:.3g} (1 = at tolerance)"
        ]
        if self.worst is not None:
            w = self.worst
            lines.append(
                f"  worst element: {w.argument}{list(w.index)} "
                f"analytic {w.analytic:.10g}"
                f" numeric {w.numeric:.10g}"
            )
        if self.directional_errors:
            shown = ", ".join(f"{e:.3g}" for e in self.directional_errors)
            lines.append(f"  along random directions: {shown}")
        if self.identity_error is not None:
            lines.append(
                f"  dot-product identity relative error {self.identity_error:.3g}"
            )
        return "\n".join(lines)


def check_grad(
    f: Callable,
    *args: Any,
    wrt: int | str | Sequence[int | str] = 0,
    directions: int = 3,
    max_elements: int = 400,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    forward: bool = True,
) -> GradCheckReport:
    """Compare ``f``'s analytic derivatives with central differences.

    >>> report = ppto.check_grad(ppto.tanh, ppto.tensor([0.5, -1.0]))
    >>> report.ok
    True
    """
    from ppto.ops.primitive import MissingTangentRule
    from ppto.ruletape import jvp_by_rules, vjp_by_rules

    _check_settings(f, directions, rtol, atol)
    indices = _wrt_indices(f, args, wrt)
    args = [_as_tensor(arg) if i in indices else arg for i, arg in enumerate(args)]
    for i in indices:
        if args[i].dtype.kind != "f":
            raise GradError(
                f"check_grad: argument {i} has dtype {args[i].dtype}; gradients need "
                "floating point inputs, e.g. ppto.tensor(x, dtype='float64')"
            )
    dtype = np.result_type(*[args[i].dtype for i in indices])
    default_rtol, default_atol = TOLERANCES.get(dtype, TOLERANCES[np.dtype(np.float32)])
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    rng = np.random.default_rng(seed)

    out, pullback = vjp_by_rules(f, args, indices)
    cotangent = _random_like(out, rng)
    grads = [
        np.asarray(g, dtype=np.float64) for g in pullback(_cast_like(cotangent, out))
    ]
    scalar = _scalarized(f, args, indices, cotangent)
    hosts = [np.asarray(args[i], dtype=np.float64) for i in indices]
    for name, host, grad in zip(_names(f, indices), hosts, grads):
        if grad.shape != host.shape:
            raise GradError(
                f"check_grad: the gradient of {name} has shape {grad.shape}, but "
                f"{name} has shape {host.shape}: a gradient rule gives a gradient "
                "of another shape than its input"
            )
    scale = max(1.0, max(float(np.max(np.abs(g), initial=0.0)) for g in grads))

    errors: list[float] = []
    worst, worst_error = None, -1.0
    max_error = 0.0
    for _ in range(directions):
        vectors = [rng.standard_normal(h.shape) for h in hosts]
        numeric = _central(scalar, hosts, vectors, 1e-6)
        analytic = sum(float(np.sum(g * v)) for g, v in zip(grads, vectors))
        error = _normalized_error(
            analytic, numeric, atol * scale + rtol * max(abs(numeric), scale)
        )
        errors.append(error)
        max_error = max(max_error, error)

    if sum(h.size for h in hosts) <= max_elements:
        names = _names(f, indices)
        for position, (host, grad) in enumerate(zip(hosts, grads)):
            for index in np.ndindex(host.shape):
                vectors = [np.zeros_like(h) for h in hosts]
                vectors[position][index] = 1.0
                step = 1e-6 * max(1.0, abs(host[index]))
                numeric = _central(scalar, hosts, vectors, step)
                error = _normalized_error(
                    float(grad[index]), numeric, atol * scale + rtol * abs(numeric)
                )
                if error > worst_error:
                    worst_error = error
                    worst = WorstElement(
                        names[position], index, float(grad[index]), numeric
                    )
                max_error = max(max_error, error)

    identity_error = None
    tangent_out = None
    if forward:
        vectors = [rng.standard_normal(h.shape) for h in hosts]
        tangents = {i: _cast_like(v, args[i]) for i, v in zip(indices, vectors)}
        try:
            _, tangent_out = jvp_by_rules(f, args, tangents)
        except MissingTangentRule:  # (a user operator with a backward rule only)
            pass
    if tangent_out is not None:
        forward_value = _inner(cotangent, tangent_out)
        reverse_value = sum(float(np.sum(g * v)) for g, v in zip(grads, vectors))
        identity_error = _normalized_error(
            forward_value,
            reverse_value,
            max(1e-30, abs(reverse_value), abs(forward_value)),
        )
        identity_tol = 1e-10 if dtype == np.float64 else 1e-3
        max_error = max(max_error, identity_error / identity_tol)

    return GradCheckReport(
        bool(max_error <= 1.0),
        float(max_error),
        worst,
        errors,
        identity_error,
        str(dtype),
    )


def _normalized_error(analytic: float, numeric: float, tolerance: float) -> float:
    """``|analytic - numeric| / tolerance``, where a NaN on one side only is a
    failure (infinite): NaN compared false with everything, so max() skipped it
    and a rule giving NaN passed the check. Equal values (infinities included)
    and NaN on both sides (a function undefined there) agree."""
    if analytic == numeric:
        return 0.0
    if math.isnan(analytic) or math.isnan(numeric):
        return 0.0 if math.isnan(analytic) and math.isnan(numeric) else math.inf
    error = abs(analytic - numeric) / tolerance
    return math.inf if math.isnan(error) else error  # (an infinity over one)


def _check_settings(f, directions, rtol, atol) -> None:
    """Refuse settings that would make the check pass without checking."""
    if not callable(f):
        raise GradError(f"check_grad needs a function, got {f!r}")
    if isinstance(directions, bool) or not isinstance(directions, int):
        raise GradError(f"check_grad: directions is a count, got {directions!r}")
    if directions < 0:
        raise GradError(f"check_grad: directions={directions} is negative")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (isinstance(value, (int, float)) and value >= 0):
            raise GradError(
                f"check_grad: {name}={value!r}; a tolerance is a number >= 0 (a "
                "negative one passed every gradient)"
            )


def _wrt_indices(f, args, wrt) -> list[int]:
    items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    names = _parameter_names(f)
    indices = []
    for item in items:
        if isinstance(item, str):
            if item not in names:
                raise GradError(f"check_grad: {f!r} has no parameter named {item!r}")
            item = names.index(item)
        if not 0 <= item < len(args):
            raise GradError(
                f"check_grad: wrt={item} but only {len(args)} arguments given"
            )
        indices.append(item)
    return indices


def _parameter_names(f) -> list[str]:
    names = getattr(f, "input_names", None)
    if names is not None:
        return list(names) + list(getattr(f, "param_names", ()))
    try:
        return list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return []


def _names(f, indices) -> list[str]:
    names = _parameter_names(f)
    return [names[i] if i < len(names) else f"arg{i}" for i in indices]


def _as_tensor(value):
    return value if isinstance(value, Tensor) else tensor(value)


def _random_like(out, rng):
    if isinstance(out, tuple):
        return tuple(_random_like(part, rng) for part in out)
    return rng.standard_normal(np.shape(out))


def _cast_like(values, like):
    if isinstance(like, tuple):
        return tuple(_cast_like(v, part) for v, part in zip(values, like))
    return tensor(values, device=like.device, dtype=like.dtype)


def _inner(cotangent, tangent) -> float:
    if isinstance(cotangent, tuple):
        return sum(_inner(c, t) for c, t in zip(cotangent, tangent))
    return float(np.sum(cotangent * np.asarray(tangent, dtype=np.float64)))


def _scalarized(f, args, indices, cotangent):
    """S(hosts) = <u, f(x)>, evaluated in float64 on the CPU."""

    def scalar(hosts):
        call = [
            np.asarray(arg, dtype=np.float64)
            if isinstance(arg, Tensor) and arg.dtype.kind == "f"
            else arg
            for arg in args
        ]
        for i, host in zip(indices, hosts):
            call[i] = host
        return _inner(cotangent, f(*[_to_cpu(v, arg) for v, arg in zip(call, args)]))

    return scalar


def _to_cpu(value, like=None):
    if isinstance(value, Tensor):
        return tensor(value, device="cpu")
    if isinstance(value, np.ndarray) and isinstance(like, Tensor):
        return tensor(value, layout=like.layout)
    if isinstance(value, np.ndarray):
        return tensor(value)
    return value


def _central(scalar, hosts, vectors, step) -> float:
    plus = [h + step * v for h, v in zip(hosts, vectors)]
    minus = [h - step * v for h, v in zip(hosts, vectors)]
    return (scalar(plus) - scalar(minus)) / (2 * step)
