"""Public registration: gradient and tangent rules for operators, and backends.

``@ppto.grad_rule`` has three forms: bare (attaches to the operator defined just above
it in the same module), ``@ppto.grad_rule(op)``, and ``@op.grad_rule``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from ppto.errors import BackendError, GradError
from ppto.ops.expected import check_output
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
        raise GradError(f"{op!r} has no gradient rule{_hint_for(op)}")
    return rule


def _hint_for(value: Any) -> str:
    """What to pass instead of a symbolic expression or an unknown name."""
    if getattr(value, "_ppto_symbolic", False) and hasattr(value, "op"):
        return ": it is an applied operator; pass its operator, expr.op"
    if getattr(value, "_ppto_symbolic", False):
        return ": it is a symbol, an input that no operator made"
    if isinstance(value, str):
        return ": no operator has that name (ppto ops lists them)"
    if getattr(value, "differentiated_from_body", False):
        return (
            " of its own: ppto differentiates it from its body (ppto.show_grad "
            "shows the code, ppto.vjp computes it); applied to symbols it builds "
            "its body's expression, whose operators have rules; or attach one "
            "with @ppto.grad_rule"
        )
    return ""


def get_jvp_rule(op: Any):
    """The tangent rule of ``op``: ``rule(*args)(*tangents)``."""
    op = OPERATORS.get(op, op) if isinstance(op, str) else op
    rule = getattr(op, "tangent_rule", None)
    if rule is None:
        raise GradError(f"{op!r} has no tangent rule{_hint_for(op)}")
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

    backends.check_backend_name(name)  # (first: the other messages quote it)
    implemented = backends.implemented_names(backend)
    names = {alias: ALIASES[alias] for alias in implemented if alias in ALIASES}
    unknown = [n for n in implemented if n not in OPERATORS and n not in ALIASES]
    twice = [alias for alias, op in names.items() if op in implemented]
    if twice:
        raise BackendError(
            f"backend {name!r} has both {names[twice[0]]}_impl and {twice[0]}_impl, "
            f"two implementations of ppto.{names[twice[0]]}: keep one"
        )
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*OPERATORS, *ALIASES], n=1)
        hint = f" (did you mean {close[0]}_impl?)" if close else ""
        raise BackendError(
            f"backend {name!r} has {unknown[0]}_impl, but ppto has no operator "
            f"{unknown[0]!r}{hint}: ppto ops lists the operators"
        )
    from ppto.runtime.streams import PROTOCOL

    missing = [m for m in PROTOCOL if m != "done" and not hasattr(backend, m)]
    if hasattr(backend, "new_stream") and missing:
        raise BackendError(
            f"backend {name!r} has new_stream but not {', '.join(missing)}: a "
            "backend with streams gives the whole stream protocol (see "
            "ppto.runtime.backends.Backend)"
        )
    backends.register_backend(name, backend, names, check_output)
    note_registration()
    for op in OPERATORS.values():
        clear = getattr(op, "clear_cache", None)
        if clear is not None:
            clear()
