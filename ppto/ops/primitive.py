"""Operator definitions: ``Primitive`` (an array implementation plus rules) and the
registry of every operator by name.

A call binds the arguments, gathers the tensor inputs onto one device (runtime
dispatch), checks the signature, runs the backend's implementation on raw arrays and
wraps the result. Observers (the rule evaluator of the gradient checker, the memory
checker) see every application.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import DTypeError, GradError, PptoError, ShapeError
from ppto.ops.signature import Signature
from ppto.runtime import streams
from ppto.runtime.backends import backend_for
from ppto.runtime.dispatch import gather_inputs, implementation
from ppto.runtime.dtypes import check_dtype
from ppto.runtime.precision import tolerance_changes
from ppto.runtime.tensor import Tensor, move

OPERATORS: dict[str, OperatorDef] = {}
OBSERVERS: list[Callable] = []


def camel_case(name: str) -> str:
    """``reduce_sum`` -> ``ReduceSum``; a dimension suffix is written as such,
    ``conv2d`` -> ``Conv2D`` (as the memory report's operators are named)."""
    return "".join(
        _dimension_suffix(part[:1].upper() + part[1:]) for part in name.split("_")
    )


def _dimension_suffix(word: str) -> str:
    if len(word) > 2 and word.endswith("d") and word[-2].isdigit():
        return word[:-1] + "D"
    return word


class OperatorDef:
    """What every operator has: a name, a signature and (maybe) rules.

    ``backward_rule`` turns inputs into ``backward(dY)``; ``tangent_rule`` turns inputs
    into ``tangent(dx, ...)``. Attach them with ``@op.grad_rule`` / ``@op.jvp_rule``.
    """

    name: str
    signature: Signature
    differentiable: bool = True
    nondiff: frozenset = frozenset()
    input_names: tuple[str, ...] = ()
    # NumPy's order of the positional parameters where it is not the operator's
    # (its inputs, then its parameters): np.average(a, axis, weights) puts a
    # parameter between two inputs. Calls by position read it; rules, generated
    # code and ``bind`` keep the operator's order (see Primitive.__call__).
    positional: tuple[str, ...] = ()
    # A parameter that, given True, makes a call another operator's, one with a
    # result the signature has no room for: np.average's returned=True, a pair
    # (its name -> that operator, which takes the same arguments)
    flags: dict = {}  # (set per operator: see ppto/ops/averaged.py)
    differentiated_from_body: bool = False  # without a rule: a user function's

    def __init__(self) -> None:
        self.backward_rule = None
        self.tangent_rule = None
        self.tangent_kind = ""

    def grad_rule(self, fn: Callable) -> Callable:
        """Decorator: ``fn(*inputs, **params[, out]) -> backward(dY)``."""
        from ppto.ops.rules import Rule, checked_now, derive_tangent

        self.backward_rule = checked_now(Rule(self, fn, "backward"))
        if self.tangent_kind == "symmetric":
            self.tangent_rule = derive_tangent(self, "symmetric")
        note_registration()
        return fn

    def jvp_rule(self, fn: Callable) -> Callable:
        """Decorator: ``fn(*inputs, **params[, out]) -> tangent(*input_tangents)``."""
        from ppto.ops.rules import Rule, checked_now

        self.tangent_rule = checked_now(Rule(self, fn, "tangent"))
        note_registration()
        return fn

    @property
    def display_name(self) -> str:
        return camel_case(self.name)

    def inputs_text(self) -> str:
        """The inputs as ``show_op`` writes them: the tensor patterns, then the
        non-tensor parameters with their defaults (``Tensor[...], axis=None``)."""
        parameters = list(self.python_signature.parameters.values())
        return ", ".join(
            [self.signature.input_text()]
            + [str(p) for p in parameters[self.signature.arity :]]
        )

    def call_with_inputs(self, inputs, params: dict):
        """The operator applied to ``inputs`` in its own order (the inputs, then
        the parameters by name), whatever order its calls by position take."""
        return self(*inputs, **params)

    def __repr__(self) -> str:
        return f"<ppto operator {self.name} {self.signature}>"


class Primitive(OperatorDef):
    """An operator with one array implementation written against a namespace ``xp``."""

    def __init__(
        self,
        impl: Callable,
        signature: str,
        *,
        mode: str = "",
        tangent: str = "",
        differentiable: bool = True,
        keeps_layout: bool = False,
        nondiff: tuple[str, ...] = (),
        name: str | None = None,
        positional: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.name = name or impl.__name__
        self.impl = impl
        self.signature = Signature.parse(signature, mode)
        self.differentiable = differentiable
        self.keeps_layout = keeps_layout
        self.nondiff = frozenset(nondiff)
        self.tangent_kind = tangent
        parameters = list(inspect.signature(impl).parameters.values())[1:]
        self.python_signature = inspect.Signature(parameters)
        arity = self.signature.arity
        self.input_names = tuple(p.name for p in parameters[:arity])
        self.param_names = tuple(p.name for p in parameters[arity:])
        self.defaults = {
            p.name: p.default for p in parameters[arity:] if p.default is not p.empty
        }
        # an input that may be left out (np.average's weights): its default value
        self.input_defaults = {
            p.name: p.default for p in parameters[:arity] if p.default is not p.empty
        }
        unknown = set(positional) - set(self.input_names + self.param_names)
        if positional and (unknown or positional[:1] != self.input_names[:1]):
            raise PptoError(
                f"ppto.{self.name}'s positional order {positional} must start with "
                f"its first input and name its parameters (unknown: {unknown})"
            )
        self.positional = tuple(positional)
        self._impls: dict = {}
        if tangent in ("linear", "bilinear"):
            from ppto.ops.rules import derive_tangent

            self.tangent_rule = derive_tangent(self, tangent)
        self.__doc__ = impl.__doc__
        self.__name__ = self.name

    def bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """Split a call's arguments into tensor inputs and parameters."""
        arity = len(self.input_names)
        inputs = list(args[:arity])
        extra = args[arity:]
        if len(extra) > len(self.param_names):
            raise PptoError(
                f"ppto.{self.name} takes {arity + len(self.param_names)} positional "
                f"arguments {self.python_signature}, got {len(args)}"
            )
        params = dict(self.defaults)
        params.update(zip(self.param_names, extra))
        named = {}  # inputs passed by name, placed in the operator's order below
        for key, value in kwargs.items():
            if key in self.param_names:
                params[key] = value
            elif key in self.input_names[len(inputs) :]:
                named[key] = value
            elif key in self.input_names:
                raise PptoError(
                    f"ppto.{self.name} got {key!r} by position and by name; its "
                    f"signature is {self.name}{self.python_signature}"
                )
            else:
                raise PptoError(
                    f"ppto.{self.name} got an unexpected argument {key!r}; its "
                    f"signature is {self.name}{self.python_signature}"
                )
        for name in self.input_names[len(inputs) :]:
            if name in named:
                inputs.append(named[name])
            elif name in self.input_defaults:
                inputs.append(self.input_defaults[name])
            else:
                break
        if len(inputs) < arity or len(params) < len(self.param_names):
            missing = [n for n in self.input_names[len(inputs) :] if n not in named]
            missing += [n for n in self.param_names if n not in params]
            raise PptoError(f"ppto.{self.name} is missing argument(s) {missing}")
        return inputs, params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.positional:  # (before the variant: it reads a flag by position)
            refuse_operator_order(self, args)
        variant = flagged_variant(self, args, kwargs)
        if variant is not None:
            return variant(*args, **kwargs)
        if self.positional:  # (NumPy's order: ppto.average(a, 1) averages rows)
            args, kwargs = by_name(self.positional, args, kwargs, f"ppto.{self.name}")
        inputs, params = self.bind(args, kwargs)
        refuse_numpys_order(self, inputs, params)
        return self.apply(inputs, params)

    def call_with_inputs(self, inputs, params: dict):
        return self.apply(*self.bind(tuple(inputs), params))

    def apply(self, inputs: list, params: dict) -> Any:
        """Run the operator on bound inputs (see the module docstring)."""
        flat, lengths = _flatten(inputs, self)
        if params.get("layout", "") is None:
            params = {**params, "layout": _layout_of(inputs)}
        if params.get("dtype") is not None:  # (cast, zeros_like, one_hot ...)
            check_dtype(params["dtype"], f"ppto.{self.name} dtype")
        if any(_is_symbolic(value) for value in flat):
            from ppto.symbolic import Operator

            return Operator(self, tuple(inputs), params)
        raws, device = gather_inputs(self.name, flat)
        self.signature.check(
            self.name, _grouped([_shape_of(raw) for raw in raws], lengths)
        )
        run = self._impls.get(device)
        if run is None:
            run = self._impls[device] = implementation(self.name, self.impl, device)
        arrays = _grouped(raws, lengths)
        raw_params = _raw_params(self.name, params, device)
        plan = backend = None
        try:
            if streams.in_use:  # (ppto.stream was entered: see runtime/streams.py)
                backend = backend_for(device)
                context, plan = streams.running(backend, device, flat)
                with context:
                    raw_out = run(*arrays, **raw_params)
            else:
                raw_out = run(*arrays, **raw_params)
        except PptoError:
            raise
        except OverflowError as error:  # (a Python int beyond the array's dtype)
            raise DTypeError(
                f"ppto.{self.name}: {error}: use a wider dtype, or a float"
            ) from error
        except TypeError as error:  # (NumPy's word for dtypes a function refuses)
            dtypes = ", ".join(str(_dtype_of(raw)) for raw in raws)
            raise DTypeError(
                f"ppto.{self.name}{self.python_signature} cannot take inputs of dtype "
                f"{dtypes} with {_params_text(params)}: {error}"
            ) from error
        except (ValueError, IndexError) as error:
            shapes = ", ".join(str(_shape_of(raw)) for raw in raws)
            raise ShapeError(
                f"ppto.{self.name}{self.python_signature} cannot take inputs of shape "
                f"{shapes} with {_params_text(params)}: {error}"
            ) from error
        out = self._wrap(raw_out, device, inputs, params)
        if plan is not None:
            streams.record(backend, device, plan, out)
        for observer in OBSERVERS:
            observer(self, inputs, params, out)
        return out

    def _wrap(self, raw_out, device, inputs, params):
        layout = None
        if self.keeps_layout:
            layout = params.get("layout") or next(
                (x.layout for x in inputs if isinstance(x, Tensor) and x.layout), None
            )
        if isinstance(raw_out, tuple):  # (a named tuple keeps its fields)
            parts = [Tensor(part, device) for part in raw_out]
            return (
                type(raw_out)(*parts) if hasattr(raw_out, "_fields") else tuple(parts)
            )
        if layout is not None and getattr(raw_out, "ndim", 0) != 4:
            layout = None
        return Tensor(raw_out, device, layout)

    def clear_cache(self) -> None:
        self._impls.clear()


def refuse_operator_order(op: Primitive, args: tuple) -> None:
    """Refuse a call by position that reads as the operator's own order (an
    expression's ``.args``: inputs, then parameters) where calls by position take
    NumPy's (``op.positional``): too many arguments for it, or a parameter given
    what only an input can be (``ppto.diff(*expr.args)`` gave n the prepend).
    Such a call would otherwise build another computation, or fail somewhere
    else. (It runs on every eager call of such an operator: the message is built
    only when one is refused.)"""
    if len(args) > len(op.positional):
        raise PptoError(
            f"ppto.{op.name} takes at most {len(op.positional)} positional "
            f"arguments, got {len(args)}: {_order_advice(op)}"
        )
    # every argument of the operator's own by position, one of them symbolic: an
    # expression's .args, whose values alone cannot tell the two orders apart
    # (diff's prepend=1, append=2 read as NumPy's n=1, axis=2)
    if len(args) == len(op.input_names) + len(op.param_names) and any(
        map(_is_symbolic, args)
    ):
        raise PptoError(
            f"ppto.{op.name} given all {len(args)} of its arguments by position "
            f"with a symbolic one, as an expression's .args are: {_order_advice(op)}"
        )
    for name, value in zip(op.positional[1:], args[1:]):
        default = op.defaults.get(name, inspect.Parameter.empty)
        if name in op.input_names or default is inspect.Parameter.empty:
            continue
        if _takes_number(default) and not _number_like(value):
            raise PptoError(
                f"ppto.{op.name} got {value!r} for {name!r} (a number, {default!r} "
                f"when left out): {_order_advice(op)}"
            )


def _order_advice(op: Primitive) -> str:
    spelled = f"ppto.{op.name}"
    own = ", ".join(op.input_names + op.param_names)
    return (
        f"by position {spelled} takes NumPy's order ({', '.join(op.positional)}); "
        f"an expression's .args are in the operator's own order ({own}): rebuild "
        f"one with {spelled}.call_with_inputs(expr.inputs, expr.params), or pass "
        "the others by name"
    )


def _takes_number(default: Any) -> bool:
    return type(default) in (int, bool)


def _number_like(value: Any) -> bool:
    """A number or a flag, as an integer parameter takes (axes may be a tuple): a
    float is one too, left for the operator's own check to name (``ppto.diff(x,
    1.0)``: n must be a whole number), not taken for an input out of place."""
    if isinstance(value, (tuple, list)):
        return all(map(_number_like, value))
    return isinstance(value, (int, float, bool, np.generic)) or (
        hasattr(value, "__index__")
        and not _is_symbolic(value)
        and np.ndim(value) == 0  # (an array has __index__, raising unless 0-d)
    )


def refuse_numpys_order(op: Primitive, inputs: list, params: dict) -> None:
    """Refuse a call with a string where ``op`` takes an array and an array where it
    takes a parameter, saying how to call it: a call in NumPy's order
    (``ppto.einsum("ij,jk", a, b)``, whose subscripts go last, by name), which was
    refused as a dtype no tensor holds."""
    shifted = any(
        isinstance(value, (Tensor, np.ndarray)) or _is_symbolic(value)
        for value in params.values()
    )
    for name, value in zip(op.input_names, inputs):
        if shifted and isinstance(value, str):
            example = f"{', '.join(op.input_names)}, {op.param_names[0]}=..."
            raise DTypeError(
                f"ppto.{op.name}{op.python_signature} takes an array as {name}, "
                f"got the string {value!r}: the arrays come first, the "
                f"parameters after them, by name: ppto.{op.name}({example})"
            )


def flagged_variant(op: OperatorDef, args: tuple, kwargs: dict):
    """The operator a call of ``op`` is instead (see ``OperatorDef.flags``): its
    flag given True, by name or at its place in ``op.positional``."""
    for flag, variant in op.flags.items():
        place = op.positional.index(flag) if flag in op.positional else len(args)
        given = args[place] if place < len(args) else kwargs.get(flag, False)
        if given is True:
            return variant
    return None


def by_name(names: tuple, args: tuple, kwargs: dict, spelled: str):
    """A call's arguments after the first passed by their ``names`` (an operator's
    ``positional`` order) instead: ``(args[:1], kwargs with the others)``."""
    if len(args) > len(names):
        raise PptoError(
            f"{spelled} takes at most {len(names)} positional arguments "
            f"({', '.join(names)}), got {len(args)}"
        )
    named = dict(zip(names[1:], args[1:]))
    twice = sorted(set(named) & set(kwargs))
    if twice:
        raise PptoError(f"{spelled} got {twice[0]!r} by position and by name")
    return args[:1], {**named, **kwargs}


def _raw_params(op_name: str, params: dict, device) -> dict:
    """Parameters given as tensors (clip's bounds, a slope, split points) as raw
    arrays on the operator's device: an implementation handed a tensor would route
    it back into ppto (endless recursion, or a tensor wrapped in a tensor)."""
    if not any(_holds_tensor(value) for value in params.values()):
        return params
    return {
        key: _raw_on(op_name, value, device) if _holds_tensor(value) else value
        for key, value in params.items()
    }


def _holds_tensor(value) -> bool:
    """A tensor, or a tuple holding one (an index such as ``x[mask, 0]``)."""
    if isinstance(value, tuple):
        return any(isinstance(part, Tensor) for part in value)
    return isinstance(value, Tensor)


def _raw_on(op_name: str, value: Tensor | tuple, device) -> Any:
    if isinstance(value, tuple):  # (each tensor part through the ledger)
        return tuple(
            _raw_on(op_name, part, device) if isinstance(part, Tensor) else part
            for part in value
        )
    if streams.in_use:  # (made on a stream, it may still be being written)
        streams.ready(value)
    if value.device == device:
        return value.data
    return move(value.data, value.device, device, op_name, True)


def _flatten(inputs: list, op: Primitive) -> tuple[list, list]:
    flat: list = []
    lengths: list = []
    for name, value, pattern in zip(op.input_names, inputs, op.signature.inputs):
        if pattern.is_list:
            if not isinstance(value, (list, tuple)) and np.ndim(value):
                value = list(value)  # (an array's rows, as NumPy reads it there)
            if not isinstance(value, (list, tuple)):
                # (a number or a 0-d array: no rows to read as the list)
                raise PptoError(
                    f"ppto.{op.name} takes a list of tensors as {name}, got "
                    f"{type(value).__name__}: write ppto.{op.name}([a, b, ...])"
                )
            flat.extend(value)
            lengths.append(len(value))
        else:
            flat.append(value)
            lengths.append(None)
    return flat, lengths


def _grouped(flat: list, lengths: list) -> list:
    if all(length is None for length in lengths):
        return flat
    grouped, position = [], 0
    for length in lengths:
        if length is None:
            grouped.append(flat[position])
            position += 1
        else:
            grouped.append(list(flat[position : position + length]))
            position += length
    return grouped


def _layout_of(inputs: list) -> str:
    """An image operator's layout when not given: its first input's hint, else NCHW."""
    first = inputs[0] if inputs else None
    return getattr(first, "layout", None) or "nchw"


def _shape_of(raw: Any) -> tuple:
    shape = getattr(raw, "shape", None)
    return tuple(shape) if shape is not None else ()


def _dtype_of(raw: Any) -> str:
    """An input's dtype, or its type where it has none (a Python number)."""
    dtype = getattr(raw, "dtype", None)
    return str(dtype) if dtype is not None else type(raw).__name__


def _params_text(params: dict) -> str:
    if not params:
        return "no parameters"
    return ", ".join(f"{key}={value!r}" for key, value in params.items())


def _is_symbolic(value: Any) -> bool:
    return getattr(value, "_ppto_symbolic", False)


def primitive(signature: str, **options: Any) -> Callable[[Callable], Primitive]:
    """Decorator that defines and registers a primitive from its generic implementation.

    >>> @primitive("(Tensor[...]) -> Tensor[...]", tangent="symmetric")
    ... def exp10(xp, x):
    ...     return xp.power(10.0, x)
    >>> exp10(ppto.tensor([3.0])).numpy()
    array([1000.])
    """

    def define(impl: Callable) -> Primitive:
        op = Primitive(impl, signature, **options)
        register(op)
        return op

    return define


def register(op: OperatorDef) -> None:
    if op.name in OPERATORS and OPERATORS[op.name] is not op:
        raise PptoError(f"an operator named {op.name!r} is already registered")
    OPERATORS[op.name] = op
    note_registration()


_REGISTRATIONS = [0]


def note_registration() -> None:
    """Count a change to what generated code is made from (an operator, a rule, a
    fusion rule, a backend): transforms made before it are not reused after it."""
    _REGISTRATIONS[0] += 1


def registrations() -> int:
    """Changes to what generated code is made from: registrations, and the
    tolerance (which fusion rules apply)."""
    return _REGISTRATIONS[0] + tolerance_changes()


def require_rule(op: OperatorDef, kind: str):
    rule = op.backward_rule if kind == "backward" else op.tangent_rule
    if rule is None:
        if not op.differentiable:
            raise GradError(
                f"ppto.{op.name} is not differentiable (its result is piecewise "
                "constant or boolean): stop the gradient before it, or use a "
                "differentiable operator"
            )
        raise (GradError if kind == "backward" else MissingTangentRule)(
            f"ppto.{op.name} has no {kind} rule: define one with "
            f"@ppto.{'grad_rule' if kind == 'backward' else 'jvp_rule'}({op.name})"
        )
    return rule


class MissingTangentRule(GradError):
    """An operator without a tangent rule met in forward mode."""
