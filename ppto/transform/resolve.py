"""What each called name in a function is, decided statically from its globals and
closure: a ppto operator (directly, as a NumPy function, a builtin or a tensor
method), another user function to differentiate, or an opaque callable that may only
see values that are not differentiated.
"""

from __future__ import annotations

import builtins
import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import gast
import numpy as np

from ppto.ops import arrange, elementwise, linalg, logic, numbers, reductions, shape
from ppto.ops.numpy_map import NUMPY_DOT, NUMPY_FUNCTIONS, split_interleaved
from ppto.ops.primitive import OperatorDef
from ppto.runtime import constructors

# Tensor methods and attributes that are operators, and those that are metadata.
METHOD_OPERATORS = {
    "sum": reductions.reduce_sum,
    "mean": reductions.reduce_mean,
    "max": reductions.reduce_max,
    "min": reductions.reduce_min,
    "prod": reductions.reduce_prod,
    "cumsum": reductions.cumsum,
    "cumprod": reductions.cumprod,
    "var": reductions.reduce_var,
    "std": reductions.reduce_std,
    "flatten": shape.flatten,
    "ravel": shape.flatten,
    "argmax": reductions.argmax,
    "argmin": reductions.argmin,
    "argsort": arrange.argsort,
    "repeat": arrange.repeat,
    "reshape": shape.reshape,
    "transpose": shape.transpose,
    "swapaxes": shape.swapaxes,
    "squeeze": shape.squeeze,
    "astype": shape.cast,
    "copy": shape.copy,
    "dot": linalg.dot,
    "trace": linalg.trace,
    "diagonal": linalg.diagonal,
    "clip": elementwise.clip,
    "round": logic.round,
    "exp": elementwise.exp,
    "log": elementwise.log,
    "item": numbers.item,
}
# an ndarray's .dot is np.dot (see NumpyAlias.rank_check)
METHOD_RANK_CHECKS = {"dot": NUMPY_DOT}
VARARG_METHODS = {"reshape": "shape", "transpose": "axes"}
METHOD_KEYWORDS = {"clip": {"min": "lo", "max": "hi"}}  # NumPy's names for ppto's
ATTRIBUTE_OPERATORS = {"T": shape.transpose, "mT": shape.matrix_transpose}
METADATA_ATTRIBUTES = {"shape", "ndim", "dtype", "size", "nbytes", "device", "layout"}

_BUILTIN_OPERATORS = {builtins.abs: elementwise.abs, builtins.float: numbers.to_float}
_CONSTRUCTOR_OPERATORS = {
    constructors.zeros_like: shape.zeros_like,
    constructors.ones_like: shape.ones_like,
}


@dataclass
class Callee:
    """The resolution of a call's function expression."""

    kind: str  # "operator", "function", "method" or "opaque"
    op: OperatorDef | None = None
    renames: dict = field(default_factory=dict)
    function: Any = None
    numpy: bool = False  # spelled the NumPy way (np.sum): NumPy's positional order
    leading: tuple = ()  # parameters NumPy takes before the arrays (np.einsum's)
    variadic: bool = False  # arrays given one by one, taken as a list (np.meshgrid)
    method: str = ""
    text: str = ""
    rank_check: Any = None  # (see NumpyAlias)
    defaults: dict = field(default_factory=dict)  # NumPy's, not the operator's
    parts_type: type | None = None  # (see NumpyAlias)
    rest: str | None = None  # (see NumpyAlias: np.gradient's spacings)


def static_value(node: gast.expr, namespace, local_names: set) -> tuple[bool, Any]:
    """``(True, value)`` if ``node`` names something outside the function."""
    if isinstance(node, gast.Name):
        if node.id in local_names or node.id not in namespace:
            return False, None
        return True, namespace[node.id]
    if isinstance(node, gast.Attribute):
        found, base = static_value(node.value, namespace, local_names)
        if found and hasattr(base, node.attr):
            return True, getattr(base, node.attr)
    return False, None


def resolve_call(node: gast.Call, namespace, local_names: set) -> Callee:
    """Decide what ``node.func`` calls (see the module docstring)."""
    text = expression_text(node.func)
    found, value = static_value(node.func, namespace, local_names)
    if not found:
        if isinstance(node.func, gast.Attribute):
            return Callee("method", method=node.func.attr, text=text)
        return Callee("opaque", text=text)
    callee = classify(value, text)
    alias = numpy_alias(value)
    if alias is not None and alias.single is not None:  # (np.einsum of one array)
        callee.op = alias.for_arrays(arrays_given(node, alias))
    if alias is not None and alias.listed is not None and listed_call(node):
        callee.op = alias.listed  # (np.choose(a, [x, 0.0]))
    if alias is not None and alias.several is not None:  # (np.gradient's several)
        callee.op = alias.for_axes(axes_written(node))
    for flag, variant in getattr(callee.op, "flags", {}).items():
        given = flag_argument(node, callee.op, flag)
        if isinstance(given, gast.Constant) and given.value is True:
            return Callee("operator", op=variant, text=text)
    return callee


def arrays_given(node: gast.Call, alias) -> int:
    """How many arrays a call of a NumPy function taking parameters before them
    gives: np.einsum's operands, after its subscripts or interleaved with their
    axes (``np.einsum(a, [0, 1], b, [1, 2], [0, 2])``)."""
    if interleaved_call(node):
        return len(split_interleaved(node.args)[0])
    return len(node.args) - len(alias.leading)


def interleaved_call(node: gast.Call) -> bool:
    """Whether a call of np.einsum is written in its interleaved form: an
    operand, then its axes as a list or tuple written out."""
    return len(node.args) >= 2 and isinstance(node.args[1], (gast.List, gast.Tuple))


def listed_call(node: gast.Call) -> bool:
    """Whether a call gives its second argument (np.choose's choices) as a list
    or tuple written out."""
    given = node.args[1] if len(node.args) > 1 else None
    given = next((k.value for k in node.keywords if k.arg == "choices"), given)
    return isinstance(given, (gast.List, gast.Tuple))


def axes_written(node: gast.Call) -> int:
    """How many axes a call of np.gradient asks for where it is written: a
    spacing for each, or a tuple axis written out (one where neither says: an
    array of several axes without axis= is refused when it runs)."""
    axis = next((k.value for k in node.keywords if k.arg == "axis"), None)
    written = len(axis.elts) if isinstance(axis, (gast.Tuple, gast.List)) else 1
    return max(len(node.args) - 1, written)


def flag_argument(node: gast.Call, op: OperatorDef, flag: str):
    """The argument a call of ``op`` writes for the parameter ``flag`` (by name,
    or at its place in ``op.positional``), or None (see ``OperatorDef.flags``)."""
    positional = op.positional
    place = positional.index(flag) if flag in positional else len(node.args)
    if place < len(node.args):
        return node.args[place]
    return next((k.value for k in node.keywords if k.arg == flag), None)


def expression_text(node) -> str:
    """``gast.unparse(node).strip()``, written directly for a name or dotted name
    (what nearly every call's function is: unparsing converts the tree first, and
    the first use imports gast's unparser, both a first call's time)."""
    parts = []
    part = node
    while type(part) is gast.Attribute:
        parts.append(part.attr)
        part = part.value
    if type(part) is gast.Name:
        return ".".join([part.id, *reversed(parts)])
    return gast.unparse(node).strip()


def classify(value: Any, text: str = "") -> Callee:
    """The Callee for a Python object found at a call site."""
    if isinstance(value, OperatorDef):
        return Callee("operator", op=value, text=text)
    alias = numpy_alias(value)
    if alias is not None:
        return Callee(
            "operator",
            op=alias.op,
            renames=dict(alias.renames),
            text=text,
            numpy=True,
            rank_check=alias.rank_check,
            leading=alias.leading,
            variadic=alias.variadic,
            defaults=dict(alias.defaults),
            parts_type=alias.parts_type,
            rest=alias.rest,
        )
    if hashable(value) and value in _BUILTIN_OPERATORS:
        return Callee("operator", op=_BUILTIN_OPERATORS[value], text=text)
    if hashable(value) and value in _CONSTRUCTOR_OPERATORS:
        return Callee("operator", op=_CONSTRUCTOR_OPERATORS[value], text=text)
    if inspect.isfunction(value) and not is_library(value):
        return Callee("function", function=value, text=text)
    return Callee("opaque", function=value, text=text)


def numpy_alias(value: Any):
    """The NumpyAlias of a NumPy function or ufunc with a ppto operator, else None."""
    if not hashable(value):
        return None
    try:
        return NUMPY_FUNCTIONS.get(value)
    except TypeError:
        return None


def hashable(value: Any) -> bool:
    """Whether ``value`` can be looked up in a dict or set (a callable may not:
    an object with ``__call__`` and ``__eq__``)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def is_library(function: Any) -> bool:
    module = getattr(function, "__module__", "") or ""
    return module.split(".")[0] in {"ppto", "numpy", "cupy", "math", "builtins"}


def is_numpy_module(value: Any) -> bool:
    return isinstance(value, ModuleType) and value.__name__.split(".")[0] == "numpy"


__all__ = [
    "Callee",
    "classify",
    "flag_argument",
    "flag_argument",
    "is_library",
    "numpy_alias",
    "resolve_call",
    "static_value",
    "np",
]
