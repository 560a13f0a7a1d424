"""Tensor arithmetic, indexing and NumPy-style methods, installed onto ``Tensor``.

Operators on tensors are ppto operators, so ``x * y`` dispatches like ``ppto.mul``, and
NumPy functions applied to tensors (``np.exp(x)``, ``np.sum(x, axis=1)``) are routed to
the matching operator through ``__array_ufunc__`` / ``__array_function__``.
"""

import functools
import inspect

import numpy as np

from ppto.errors import DTypeError, PptoError, ShapeError
from ppto.ops import arrange, indexing, linalg, logic, reductions, shape
from ppto.ops import elementwise as ew
from ppto.ops.numpy_map import (
    NUMPY_FUNCTIONS,
    NUMPY_QUERIES,
    NUMPY_UFUNCS,
    REDUCTION_OPTIONS,
    check_numpy_positionals,
    reduce_with_options,
)
from ppto.ops.primitive import OBSERVERS
from ppto.runtime import streams
from ppto.runtime.ledger import user_location
from ppto.runtime.tensor import Tensor, device_of, move, tensor


def _binary(op, reflected=False):
    if reflected:
        return lambda self, other: op(other, self)
    return lambda self, other: op(self, other)


_BITWISE = {"&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor", "~": "invert"}


def _logical(op, symbol: str, reflected: bool = False):
    """A tensor's ``&``, ``|``, ``^`` and ``~``: logical_and, logical_or,
    logical_xor and logical_not, for booleans. NumPy's on integers are bitwise,
    another result (``t & 1`` gave True for 2), so an operand that is not boolean
    is refused, as ``&=`` refuses it."""

    def method(self, *other):
        operands = (*other, self) if reflected else (self, *other)
        for operand in operands:
            if not _boolean(operand):
                raise DTypeError(
                    f"{symbol} of {_dtype_name(operand)} at {user_location()}: a "
                    f"tensor's {symbol} is logical (for booleans), where NumPy's on "
                    f"integers is bitwise; compute it in NumPy (np.{_BITWISE[symbol]}"
                    "(t.numpy(), ...)) or compare first (t > 0)"
                )
        return op(*operands)

    return method


def _bit_shift(symbol: str, numpy_name: str, reflected: bool = False):
    """A tensor's ``<<`` and ``>>``: ppto has no bitwise operator, so they are
    refused as ``&`` on integers is, saying what to write (Python's own TypeError,
    "unsupported operand type(s)", said nothing of it)."""

    def method(self, other):
        operands = (other, self) if reflected else (self, other)
        raise DTypeError(
            f"{symbol} of {_dtype_name(operands[0])} and {_dtype_name(operands[1])} "
            f"at {user_location()}: ppto has no bitwise shift; compute it in NumPy "
            f"(np.{numpy_name}(t.numpy(), ...)), or multiply by a power of two"
        )

    return method


def _boolean(value) -> bool:
    """Whether ``value`` is boolean, or may be (a symbolic expression's dtype is
    not known)."""
    if isinstance(value, (bool, np.bool_)) or getattr(value, "_ppto_symbolic", False):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    return np.dtype(dtype) == np.bool_


def _dtype_name(value) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return f"a tensor of {np.dtype(dtype)}"
    return f"{type(value).__name__} {value!r}"[:60]


def _reduction(op, name: str):
    def method(self, *axis, **options):
        check_numpy_positionals(op, 1 + len(axis), f".{name}()")
        if op in REDUCTION_OPTIONS and {"where", "initial", "dtype"} & {*options}:
            return reduce_with_options(op, (self, *axis), options, f".{name}()")
        return op(self, *axis, **options)

    method.__doc__ = op.__doc__
    return method


def _dtype_without_out(dtype, out, name: str):
    """``dtype``, where NumPy's method also takes ``out`` (which ppto does not)."""
    if out is not None:
        raise PptoError(
            f".{name}() takes no out= (ppto's results are new tensors): assign the "
            "result instead"
        )
    return dtype


def _reshape(self, *new_shape, order="C"):
    if len(new_shape) == 1 and isinstance(new_shape[0], (tuple, list)):
        new_shape = tuple(new_shape[0])
    return shape.reshape(self, new_shape, order=order)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return shape.transpose(self, axes or None)


def _iterate(self):
    if self.ndim == 0:  # (as NumPy: not an empty iteration, which hid the value)
        raise TypeError("iteration over a 0-d tensor: read it with .item()")
    return iter(shape.unstack(self))


def _clip(self, lo=None, hi=None, **bounds):
    """``x.clip(lo, hi)``, with NumPy's and PyTorch's keywords for the bounds
    (``min=``/``max=``, ``a_min=``/``a_max=``)."""
    for name, value in bounds.items():
        if name in ("min", "a_min") and lo is None:
            lo = value
        elif name in ("max", "a_max") and hi is None:
            hi = value
        else:
            raise PptoError(
                f".clip() got the bound {name}={value!r} twice or a keyword it does "
                "not take: write x.clip(lo, hi), or min= and max="
            )
    return ew.clip(self, lo, hi)


def _any(self, axis=None, keepdims=False):
    """Whether any element (along ``axis``) is nonzero, as ndarray.any."""
    nonzero = reductions.reduce_sum(logic.not_equal(self, 0), axis, keepdims)
    return logic.greater(nonzero, 0)


def _all(self, axis=None, keepdims=False):
    """Whether every element (along ``axis``) is nonzero, as ndarray.all."""
    zeros = reductions.reduce_sum(logic.equal(self, 0), axis, keepdims)
    return logic.equal(zeros, 0)


def _numpy_reduction(reduce, name: str):
    """``np.any`` / ``np.all`` of a tensor: the method's answer, as a tensor (NumPy's
    ``out=`` and ``where=`` are refused, as the methods' ``out=`` is)."""

    def numpy_function(a, axis=None, out=None, keepdims=False, **where):
        if where:
            raise PptoError(
                f"np.{name} of a tensor takes no {', '.join(where)}=: select the "
                "elements first (x[mask])"
            )
        _dtype_without_out(None, out, name)
        return reduce(a, axis, keepdims)

    return numpy_function


def _on_host(compare):
    """NumPy's ``compare`` (``np.allclose``, ``np.array_equal``) of the tensors'
    values on the host: its answer is one Python bool, as NumPy's."""

    def answer(*args, **kwargs):
        host = [np.asarray(v) if isinstance(v, Tensor) else v for v in args]
        named = {
            k: np.asarray(v) if isinstance(v, Tensor) else v for k, v in kwargs.items()
        }
        return compare(*host, **named)

    return answer


def _indices_of(find):
    """NumPy's ``find`` (``np.nonzero``, ``np.argwhere`` ...) of a tensor: the
    positions its values select, found on the host (their number depends on the
    values), as integer tensors on the tensor's device."""

    def indices(a, *args, **kwargs):
        found = find(np.asarray(a), *args, **kwargs)
        device = a.device if isinstance(a, Tensor) else None
        if isinstance(found, tuple):
            return tuple(tensor(part, device) for part in found)
        return tensor(found, device)

    return indices


def _isclose(a, b, *args, **kwargs):
    """``np.isclose`` of tensors: NumPy's flags, found on the host, as a bool
    tensor on the (first) tensor's device."""
    device = next(v.device for v in (a, b) if isinstance(v, Tensor))
    return tensor(_on_host(np.isclose)(a, b, *args, **kwargs), device)


def _contains(self, value) -> bool:
    """``value in x``: whether any element equals it, as NumPy answers (iterating
    compared whole rows, whose truth value is ambiguous)."""
    return bool(reductions.reduce_sum(logic.equal(self, value)) > 0)


def _setitem(self, index, value):
    """``x[index] = value`` writes on x's own device: a value on another is copied
    to it (an implicit transfer), not x to its device and back (a GPU scalar
    written into a large CPU tensor copied the whole tensor twice); index tensors
    go where the operator runs, as every parameter does. It writes into x's
    memory, as NumPy does: a tensor made from x by indexing, ``.T`` or
    ``.reshape`` (a view of it, as in NumPy) sees the write (not while a rule
    tape records: see there)."""
    value = _moved_to(self.device, value)
    updated = indexing.setitem(self, value, index)
    tapes = [o for o in OBSERVERS if getattr(o, "tells_values_by_identity", False)]
    if tapes:  # a rule tape (ppto.ruletape) tells values by identity: x keeps
        # its own, with new memory (the tape's records keep the old values)
        for tape in tapes:
            tape.rebind(self, updated)
        self.data = updated.to(self.device).data
        return
    _write_into(self, updated)


def _write_into(self, updated) -> None:
    """Put ``updated`` (a tensor of self's shape and dtype) in self's memory; where
    that memory cannot be written (read-only NumPy data), self takes new memory."""
    updated = updated.to(self.device)
    if getattr(getattr(self.data, "flags", None), "writeable", True):
        self.data[...] = updated.data
    else:
        self.data = updated.data
    if streams.in_use:  # x now holds data a stream may still be writing
        streams.same_origin(self, updated)


def _in_place(op, symbol: str):
    """``x += y`` (``-=``, ``*=`` ...) on a tensor: the result written into x's
    memory in x's dtype and shape, with NumPy's rules (a cast other than
    'same_kind', floats into an integer tensor, raises ``DTypeError``; a result
    broadcast to another shape ``ShapeError``), so that ``for p in params: p -= lr
    * g`` updates the tensors in ``params``. While a rule tape records operators
    (ppto.ruletape), which tells values by their identity, x is not changed: the
    result is a new tensor, as ``x = x + y`` would make."""

    def method(self, other):
        result = op(self, other)
        if any(getattr(o, "tells_values_by_identity", False) for o in OBSERVERS):
            return result
        try:
            kept = shape.cast_in_place(result, self)
        except (DTypeError, ShapeError):  # again, naming the user's line
            shape.cast_in_place(result, self, f"{symbol} at {user_location()}")
            raise
        _write_into(self, kept)
        return self

    method.__name__ = f"__i{op.name.rsplit('.', 1)[-1]}__"
    return method


def _logical_in_place(op, symbol: str, name: str):
    """``x &= y`` / ``x |= y`` on a boolean tensor, in place as ``_in_place``.
    Tensor's ``&`` and ``|`` are logical_and and logical_or: on integers, where
    NumPy's are bitwise, the result would be another, so they are refused."""
    in_place = _in_place(op, symbol)

    def method(self, other):
        if np.dtype(self.dtype) != np.bool_:
            bitwise = {"&=": "bitwise_and", "|=": "bitwise_or"}[symbol]
            raise DTypeError(
                f"{symbol} on a tensor of {np.dtype(self.dtype)} at "
                f"{user_location()}: a tensor's & and | are logical_and and "
                f"logical_or (for booleans), where NumPy's on integers are "
                f"bitwise; compute it in NumPy instead (t = ppto.tensor(np."
                f"{bitwise}(t.numpy(), other)))"
            )
        return in_place(self, other)

    method.__name__ = name
    return method


def _sort(self, axis=-1, kind=None, *, stable=None):
    """``x.sort(axis)`` sorts x in place, as ndarray.sort does (``np.sort(x)`` is a
    sorted copy): in x's memory, so that views of x, and the tensor x is a view
    of, see the order."""
    if axis is None:  # (the flattened x would not fit x's shape)
        raise PptoError(
            "x.sort() sorts along one axis, not axis=None (as ndarray.sort): "
            "np.sort(x, axis=None) is the flattened x sorted"
        )
    ordered = arrange.sort(self, axis, kind, stable)
    if any(getattr(o, "tells_values_by_identity", False) for o in OBSERVERS):
        self.data = ordered.data  # (as _setitem: x keeps its own, new memory)
        if streams.in_use:  # x now holds data a stream may still be writing
            streams.same_origin(self, ordered)
        return
    _write_into(self, ordered)  # (in x's memory: views of it see the order)


def _moved_to(device, value):
    """``value`` on ``device``: a tensor or array elsewhere copied there through the
    ledger; scalars, host lists and values already there as they are."""
    source = device_of(value)
    if source is None or source == device or isinstance(value, (list, tuple)):
        return value
    if isinstance(value, Tensor):
        if streams.in_use:
            streams.ready(value)  # (its stream may still be writing it)
        value = value.data
    return Tensor(move(value, source, device, "setitem", True), device)


def _divmod(a, b):
    """``divmod(a, b)``, as NumPy's: the floored quotient and the remainder."""
    return logic.floor_divide(a, b), ew.remainder(a, b)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    # np.maximum.reduce(x, axis=0), np.add.accumulate(x), np.multiply.outer(a, b)
    if method in ("reduce", "accumulate", "outer"):
        running = NUMPY_FUNCTIONS.get(getattr(ufunc, method))
        if running is not None:
            return running(*inputs, **kwargs)
    if ufunc is np.divmod and method == "__call__" and not kwargs:
        return _divmod(*inputs)  # (two results: no operator of its own)
    op = NUMPY_UFUNCS.get(ufunc)
    if method == "__call__" and op is not None and set(kwargs) == {"out"}:
        return _into_out(ufunc, op(*inputs), kwargs["out"])
    if method != "__call__" or op is None or kwargs:
        raise PptoError(
            f"np.{ufunc.__name__}{'.' + method if method != '__call__' else ''} "
            f"{'with ' + ', '.join(kwargs) + ' ' if kwargs else ''}has no ppto "
            "operator: call a ppto operator, or convert with np.asarray(tensor) first"
        )
    return op(*inputs)


def _into_out(ufunc, result, out: tuple):
    """``np.add(a, t, out=a)``, which ``a += t`` calls for a NumPy array a (a
    tensor's own ``+=`` is ``_in_place``): the operator's result written into
    ``out`` (a NumPy array or a tensor) in its dtype and shape, with NumPy's
    rules (see ``shape.cast_in_place``), and ``out`` returned, as NumPy does."""
    at = f"np.{ufunc.__name__}(..., out=) at {user_location()}"
    target = out[0] if len(out) == 1 else None
    if not isinstance(target, (np.ndarray, Tensor)):
        given = repr(out)[:100]
        raise PptoError(
            f"{at}: out= takes one NumPy array or tensor to write into, got {given}"
        )
    if isinstance(target, np.ndarray) and not target.flags.writeable:
        raise PptoError(f"{at}: the out= array is read-only")
    kept = shape.cast_in_place(result, target, at)
    if isinstance(target, Tensor):
        _write_into(target, kept)
    else:
        target[...] = np.asarray(kept)
    return target


def _array_function(self, func, types, args, kwargs):
    if func is np.where and len(args) == 1 and not kwargs:
        func = np.nonzero  # (NumPy's np.where(condition) alone)
    query = NUMPY_QUERIES.get(func) or _ANSWERS.get(func)
    if query is not None:
        return query(*args, **kwargs)
    adapter = NUMPY_FUNCTIONS.get(func)
    if adapter is None:
        raise PptoError(
            f"np.{func.__name__} has no ppto operator: use a ppto operator "
            "(ppto.ops lists them), or convert with np.asarray(tensor) first"
        )
    return adapter(*args, **kwargs)


# NumPy functions of tensors that are no operator (the transformer does not read
# them: np.any and np.allclose in differentiated code are NumPy's own)
_ANSWERS = {
    np.any: _numpy_reduction(_any, "any"),
    np.all: _numpy_reduction(_all, "all"),
    np.allclose: _on_host(np.allclose),
    np.array_equal: _on_host(np.array_equal),
    np.array_equiv: _on_host(np.array_equiv),
    np.nonzero: _indices_of(np.nonzero),
    np.argwhere: _indices_of(np.argwhere),
    np.flatnonzero: _indices_of(np.flatnonzero),
    np.count_nonzero: _indices_of(np.count_nonzero),
    np.unique: _indices_of(np.unique),  # (values and counts: no derivative)
    np.isclose: _isclose,
}

_METHODS = {
    "__add__": _binary(ew.add),
    "__radd__": _binary(ew.add, True),
    "__sub__": _binary(ew.sub),
    "__rsub__": _binary(ew.sub, True),
    "__mul__": _binary(ew.mul),
    "__rmul__": _binary(ew.mul, True),
    "__truediv__": _binary(ew.div),
    "__rtruediv__": _binary(ew.div, True),
    "__floordiv__": _binary(logic.floor_divide),
    "__rfloordiv__": _binary(logic.floor_divide, True),
    "__mod__": _binary(ew.remainder),
    "__rmod__": _binary(ew.remainder, True),
    "__divmod__": _binary(_divmod),
    "__rdivmod__": _binary(_divmod, True),
    "__pow__": _binary(ew.pow),
    "__rpow__": _binary(ew.pow, True),
    "__matmul__": _binary(linalg.dot),
    "__rmatmul__": _binary(linalg.dot, True),
    "__neg__": lambda self: ew.neg(self),
    "__pos__": lambda self: shape.copy(self),  # (a copy, as NumPy's +a is)
    "__abs__": lambda self: ew.abs(self),
    "__lt__": _binary(logic.less),
    "__le__": _binary(logic.less_equal),
    "__gt__": _binary(logic.greater),
    "__ge__": _binary(logic.greater_equal),
    "__eq__": _binary(logic.equal),
    "__ne__": _binary(logic.not_equal),
    "__and__": _logical(logic.logical_and, "&"),
    "__rand__": _logical(logic.logical_and, "&", reflected=True),
    "__or__": _logical(logic.logical_or, "|"),
    "__ror__": _logical(logic.logical_or, "|", reflected=True),
    "__xor__": _logical(logic.logical_xor, "^"),
    "__rxor__": _logical(logic.logical_xor, "^", reflected=True),
    "__invert__": _logical(logic.logical_not, "~"),
    "__lshift__": _bit_shift("<<", "left_shift"),
    "__rlshift__": _bit_shift("<<", "left_shift", reflected=True),
    "__rshift__": _bit_shift(">>", "right_shift"),
    "__rrshift__": _bit_shift(">>", "right_shift", reflected=True),
    "__getitem__": lambda self, index: indexing.getitem(self, index),
    "__setitem__": _setitem,
    "__iadd__": _in_place(ew.add, "+="),
    "__isub__": _in_place(ew.sub, "-="),
    "__imul__": _in_place(ew.mul, "*="),
    "__itruediv__": _in_place(ew.div, "/="),
    "__ipow__": _in_place(ew.pow, "**="),
    "__imatmul__": _in_place(linalg.dot, "@="),
    "__ifloordiv__": _in_place(logic.floor_divide, "//="),
    "__imod__": _in_place(ew.remainder, "%="),
    "__iand__": _logical_in_place(logic.logical_and, "&=", "__iand__"),
    "__ior__": _logical_in_place(logic.logical_or, "|=", "__ior__"),
    "__iter__": _iterate,
    "__contains__": _contains,
    "__array_ufunc__": _array_ufunc,
    "__array_function__": _array_function,
    "T": property(lambda self: shape.transpose(self)),
    "mT": property(lambda self: shape.matrix_transpose(self)),
    "sum": _reduction(reductions.reduce_sum, "sum"),
    "mean": _reduction(reductions.reduce_mean, "mean"),
    "max": _reduction(reductions.reduce_max, "max"),
    "min": _reduction(reductions.reduce_min, "min"),
    "prod": _reduction(reductions.reduce_prod, "prod"),
    "var": _reduction(reductions.reduce_var, "var"),
    "std": _reduction(reductions.reduce_std, "std"),
    "cumsum": lambda self, axis=None, dtype=None, out=None: reductions.cumsum(
        self, axis, _dtype_without_out(dtype, out, "cumsum")
    ),
    "cumprod": lambda self, axis=None, dtype=None, out=None: reductions.cumprod(
        self, axis, _dtype_without_out(dtype, out, "cumprod")
    ),
    # (a copy, as ndarray.flatten is: ravel may be a view of the tensor's memory)
    "flatten": lambda self, order="C": shape.copy(shape.flatten(self, order)),
    "ravel": lambda self, order="C": shape.flatten(self, order),
    "argmax": _reduction(reductions.argmax, "argmax"),
    "argmin": _reduction(reductions.argmin, "argmin"),
    "argsort": lambda self, axis=-1, kind=None, *, stable=None: arrange.argsort(
        self, axis, kind, stable
    ),
    "sort": _sort,
    "repeat": lambda self, repeats, axis=None: arrange.repeat(self, repeats, axis),
    "reshape": _reshape,
    "transpose": _transpose,
    "swapaxes": lambda self, axis1, axis2: shape.swapaxes(self, axis1, axis2),
    "squeeze": lambda self, axis=None: shape.squeeze(self, axis),
    "astype": lambda self, dtype: shape.cast(self, dtype),
    "copy": lambda self: shape.copy(self),
    # copy.copy(t) made a tensor holding t's own array, so writes into the "copy"
    # changed t; NumPy's copy.copy(array) copies the values
    "__copy__": lambda self: shape.copy(self),
    "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None, out=None: (
        linalg.trace(
            self, offset, axis1, axis2, _dtype_without_out(dtype, out, "trace")
        )
    ),
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: linalg.diagonal(
        self, offset, axis1, axis2
    ),
    "exp": lambda self: ew.exp(self),
    "log": lambda self: ew.log(self),
    "clip": _clip,
    "round": lambda self, decimals=0: logic.round(self, decimals),
    "any": _any,
    "all": _all,
    "tolist": lambda self: self.numpy().tolist(),
    "dot": lambda self, other: NUMPY_FUNCTIONS[np.dot](self, other),  # (NumPy's)
}


def install() -> None:
    for name, value in _METHODS.items():
        if not name.startswith("__") and callable(value):
            value = _arguments_checked(name, value)
        setattr(Tensor, name, value)


def _arguments_checked(name: str, method):
    """``method``, raising a ppto error, not Python's TypeError, for arguments it
    does not take (NumPy's methods take more: ``x.cumprod(0, dtype, out)``)."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except TypeError as error:
            try:  # (checked after the fact: a call that binds costs nothing more)
                signature.bind(self, *args, **kwargs)
            except TypeError:
                parameters = list(signature.parameters)[1:]
                raise PptoError(
                    f"Tensor.{name}() takes ({', '.join(parameters)}): {error}; "
                    "pass the arguments ppto takes, by name"
                ) from error
            raise

    return checked


def expression_methods() -> dict:
    """The methods that also make sense on symbolic expressions."""
    skip = {
        "__setitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ipow__",
        "__imatmul__",
        "__ifloordiv__",
        "__imod__",
        "__iand__",
        "__ior__",
        "sort",
        "__iter__",
        "__contains__",
        "tolist",
        "__array_ufunc__",
        "__array_function__",
        "__copy__",
    }
    methods = {name: value for name, value in _METHODS.items() if name not in skip}
    # (expressions are never written into: no copy needed)
    methods["__pos__"] = lambda self: self
    methods["flatten"] = _METHODS["ravel"]
    return methods
