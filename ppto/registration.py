"""Public registration: gradient and tangent rules for operators, and backends.

``@ppto.grad_rule`` has three forms: bare (attaches to the operator defined just above
it in the same module), ``@ppto.grad_rule(op)``, and ``@op.grad_rule``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import BackendError, GradError
from ppto.ops.primitive import OPERATORS, OperatorDef, note_registration
from ppto.runtime import backends

_LAST_DEFINED: dict[str, OperatorDef] = {}


def note_definition(op: OperatorDef, module: str) -> None:
    """Remember ``op`` as the latest operator defined in ``module`` (for bare rules)."""
    _LAST_DEFINED[module] = op


def _resolve(target: Any, fn: Callable, decorator: str) -> OperatorDef:
    if isinstance(target, OperatorDef):
        return target
    if not callable(fn):
        raise GradError(
            f"@ppto.{decorator} takes an operator (@ppto.{decorator}(ppto.exp)) or "
            f"decorates a rule function, got {fn!r}"
        )
    op = _LAST_DEFINED.get(getattr(fn, "__module__", ""))
    if op is None:
        raise GradError(
            f"@ppto.{decorator} on {fn.__name__} found no operator defined above it in "
            f"module {fn.__module__}: write @ppto.{decorator}(your_operator)"
        )
    return op


def grad_rule(target: Any) -> Any:
    """Attach a gradient rule ``rule(*inputs, **params) -> backward(dY)``.

    >>> @ppto.grad_rule(ppto.exp)              # doctest: +SKIP
    ... def _(x):
    ...     def backward(dY):
    ...         return dY * ppto.exp(x)
    ...     return backward
    """
    if isinstance(target, OperatorDef):
        return lambda fn: target.grad_rule(fn)
    return _resolve(None, target, "grad_rule").grad_rule(target)


def jvp_rule(target: Any) -> Any:
    """Attach a tangent rule ``rule(*inputs, **params) -> tangent(*input_tangents)``."""
    if isinstance(target, OperatorDef):
        return lambda fn: target.jvp_rule(fn)
    return _resolve(None, target, "jvp_rule").jvp_rule(target)


def get_grad_rule(op: Any):
    """The gradient rule of ``op`` (an operator or its name): ``rule(*args)(dY)``."""
    op = OPERATORS.get(op, op) if isinstance(op, str) else op
    rule = getattr(op, "backward_rule", None)
    if rule is None:
        raise GradError(f"{op!r} has no gradient rule")
    return rule


def get_jvp_rule(op: Any):
    """The tangent rule of ``op``: ``rule(*args)(*tangents)``."""
    op = OPERATORS.get(op, op) if isinstance(op, str) else op
    rule = getattr(op, "tangent_rule", None)
    if rule is None:
        raise GradError(f"{op!r} has no tangent rule")
    return rule


def register_backend(name: str, backend: Any) -> None:
    """Make ``device=name`` usable; ``backend`` provides ``<op>_impl`` functions.

    >>> class MyAccelerator:
    ...     xp = np                                 # namespace for other operators
    ...     @staticmethod
    ...     def dot_impl(A, B):
    ...         return A @ B
    >>> ppto.register_backend("my_hw", MyAccelerator)      # doctest: +SKIP
    """
    from ppto.ops import ALIASES

    implemented = backends.implemented_names(backend)
    names = {alias: ALIASES[alias] for alias in implemented if alias in ALIASES}
    unknown = [n for n in implemented if n not in OPERATORS and n not in ALIASES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*OPERATORS, *ALIASES], n=1)
        hint = f" (did you mean {close[0]}_impl?)" if close else ""
        raise BackendError(
            f"backend {name!r} has {unknown[0]}_impl, but ppto has no operator "
            f"{unknown[0]!r}{hint}: ppto ops lists the operators"
        )
    backends.register_backend(name, backend, names, check_output)
    note_registration()
    for op in OPERATORS.values():
        clear = getattr(op, "clear_cache", None)
        if clear is not None:
            clear()


_EXPECTED: dict = {}  # (op, argument shapes and dtypes, parameters) -> result shapes
_EXPECTED_LIMIT = 1024


def check_output(kind: str, op_name: str, args: tuple, params: dict, out: Any) -> None:
    """Raise ``BackendError`` where a backend's ``<op>_impl`` returned a result of
    another shape than the operator's own implementation gives for the same inputs
    (found once per kind of input by running that on arrays of zeros that take no
    memory)."""
    expected = _expected_shapes(OPERATORS.get(op_name), args, params)
    if expected is None:
        return
    got = _shapes(out)
    if got != expected:
        given = ", ".join(str(shape) for shape in _shapes(list(args)))
        raise BackendError(
            f"backend {kind!r}: {op_name}_impl returned a result of shape {got} for "
            f"inputs of shape {given}, but ppto.{op_name} gives {expected}"
        )


def _expected_shapes(op: Any, args: tuple, params: dict):
    generic = getattr(op, "impl", None)
    if generic is None:
        return None
    try:
        key = (op.name, _signature_of(args), tuple(sorted(params.items())))
        hash(key)
    except (TypeError, ValueError):
        return None  # (an index array among the parameters: not checked)
    if key not in _EXPECTED:
        try:
            with np.errstate(all="ignore"):
                result = generic(np, *_probes(args), **params)
            _EXPECTED[key] = _shapes(result)
        except Exception:  # the probe is only a reference: without it, no check
            _EXPECTED[key] = None
        if len(_EXPECTED) > _EXPECTED_LIMIT:
            _EXPECTED.pop(next(iter(_EXPECTED)))
    return _EXPECTED[key]


def _signature_of(value: Any):
    if isinstance(value, (list, tuple)):
        return tuple(_signature_of(item) for item in value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return ("array", tuple(value.shape), np.dtype(value.dtype).str)
    return ("value", value)


def _probes(value: Any):
    """NumPy stand-ins of ``value``'s arrays: zeros of their shape and dtype whose
    elements are all one element."""
    if isinstance(value, (list, tuple)):
        return type(value)(_probes(item) for item in value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape, dtype = tuple(value.shape), np.dtype(value.dtype)
        zero = np.zeros(1, dtype)
        return np.lib.stride_tricks.as_strided(zero, shape, (0,) * len(shape))
    return value


def _shapes(value: Any):
    if isinstance(value, (list, tuple)):
        return tuple(_shapes(item) for item in value)
    return tuple(np.shape(value))
