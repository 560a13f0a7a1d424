"""The differentiation API: ``grad``, ``value_and_grad``, ``vjp`` and ``show_grad``.

Each transformed function is generated once per (wrt, argument ranks) and compiled
once per device kind; a call unwraps tensors once, moves arguments to one device
(recorded in the ledger), runs the generated code on raw arrays and wraps the results
once. Gradients come back on the device of their argument.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import statistics
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ppto import pytrees, residuals
from ppto.checkpoint import random_states, rewind
from ppto.errors import GradError, PptoError, ShapeError
from ppto.fusion.tuning import FUSED_FIRST, FusionChoice, fusion_policy
from ppto.ops.primitive import OperatorDef, registrations
from ppto.ops.shape import dtype_of
from ppto.repeated_call import RepeatedCall
from ppto.runtime import streams
from ppto.runtime.backends import backend_for
from ppto.runtime.device import CPU, Device
from ppto.runtime.dispatch import gather_inputs
from ppto.runtime.precision import get_precision
from ppto.runtime.tensor import Tensor, move
from ppto.shared_arguments import check_call, writing
from ppto.straight_call import MISS
from ppto.transform.emit import failing_origins, failing_statement, render_function
from ppto.transform.local_functions import passed_callable
from ppto.transform.lower import _unwrap, fuses, lower
from ppto.transform.origins import describe as describe_origins
from ppto.transform.pipeline import build
from ppto.transform.resolve import is_library, numpy_alias
from ppto.transform.source import forwarded_method, returned_keys, unwrapped
from ppto.transform.source import signature as _signature

# what an array library raises for arguments of the wrong shapes or an index out of
# range (by exact type: a ValueError the user's function raises stays the user's)
LIBRARY_SHAPE_ERRORS = (ValueError, IndexError, np.exceptions.AxisError)
# what else running code raises that its text alone does not place (0/0 under
# np.seterr(all="raise"), a float given where NumPy wants an int, an attribute an
# argument lacks): raised again as the same type, saying at which line of the
# user's (by exact type: a subclass may not take a message alone)
RUNTIME_ERRORS = (
    FloatingPointError, ZeroDivisionError, OverflowError, TypeError,
    AttributeError, KeyError, NameError,
)  # fmt: skip
TRANSLATED_ERRORS = (*LIBRARY_SHAPE_ERRORS, *RUNTIME_ERRORS, PptoError)


def _target_function(f: Callable) -> Callable:
    """The Python function whose source is transformed."""
    if isinstance(f, OperatorDef):
        function = getattr(f, "function", None)
        if function is not None and f.backward_rule is None:
            return function
        return _operator_wrapper(f)
    if isinstance(f, Transformed):
        return f.function
    alias = numpy_alias(f)
    if alias is not None:  # np.sin: its operator (np.dot's checks the ranks given)
        checked = alias.rank_check.checked if alias.rank_check else alias.op
        return _operator_wrapper(checked)
    if not callable(f):
        raise GradError(f"ppto.grad needs a function, got {type(f).__name__}")
    if _user_method(f):  # model.loss: the object is known (see _method_wrapper)
        return _method_wrapper(_unforwarded(f))
    call = inspect.getattr_static(type(f), "__call__", None)
    if inspect.isfunction(call) and not is_library(call):  # ppto.grad(model)
        return _method_wrapper(_unforwarded(types.MethodType(call, f)))
    if inspect.ismethod(f):  # its generated code would take the object first
        owner = f.__self__
        if isinstance(owner, type):  # a classmethod
            function, first = f"{owner.__name__}.{f.__name__}.__func__", owner.__name__
        else:
            function, first = f"{type(owner).__name__}.{f.__name__}", "obj"
        raise GradError(
            f"{f.__qualname__} is a bound method: differentiate its function and "
            f"pass what it is bound to first, e.g. ppto.grad({function}, wrt=1)"
            f"({first}, x), or make it a staticmethod"
        )
    return unwrapped(f)


def _generated_wrapper(inner: Transformed, ranks: tuple) -> Callable:
    """A function with source that calls ``inner``'s generated code and returns what
    ``inner`` returns: so a derivative can itself be differentiated."""
    program, namespace = inner.program(ranks)
    entry = namespace.get()[program.entry]
    parameters, arguments = _spelled(_signature(inner.function))
    if inner.mode != "combined":
        raise GradError("only gradients (ppto.grad) can be differentiated again")
    result = "(value, gradient)" if inner.with_value else "gradient"
    base = inner.function.__name__
    wrapper = (base if base.isidentifier() else "lambda_") + "_derivative"
    # differentiated again, the gradient's seed is still ones_like(value): the
    # derivative of a non-scalar function's sum unless the value is checked; a
    # complex gradient of a real argument is refused as ppto.grad refuses it
    # (the generated code returns one gradient bare)
    differentiated = "".join(f"{name}, " for name in inner.wrt)
    gradients = "(gradient,)" if len(inner.wrt) == 1 else "gradient"
    source = (
        f"def {wrapper}({parameters}):\n"
        f"    value, gradient = {program.entry}({arguments})\n"
        f"    _require_scalar_again(value, {base!r})\n"
        f"    _require_real_again({gradients}, ({differentiated}))\n"
        f"    return {result}\n"
    )
    filename = f"<ppto derivative {wrapper} {id(inner)} {ranks}>"
    namespace_ = {
        program.entry: entry,
        "_require_scalar_again": _require_scalar_again,
        "_require_real_again": _require_real_again,
    }
    return _compiled(source, filename, namespace_, wrapper)


def _user_method(f) -> bool:
    """Whether ``f`` is a method of the user's code bound to an object."""
    return (
        inspect.ismethod(f)
        and not isinstance(f.__self__, type)
        and inspect.isfunction(f.__func__)
        and not is_library(f.__func__)
    )


def _unforwarded(method):
    """The bound method that ``method`` passes its call to, where it only does
    that and takes ``*args`` (``def __call__(self, *args): return
    self.forward(*args)``: a wrapper taking ``*args`` cannot be differentiated),
    followed through such methods; else ``method``."""
    seen = {method.__func__}
    while True:
        target = forwarded_method(method.__func__)
        following = getattr(method.__self__, target, None) if target else None
        if not _user_method(following) or following.__func__ in seen:
            return method
        method = following
        seen.add(method.__func__)


def _method_wrapper(method) -> Callable:
    """A function with source calling the bound ``method`` (``model.loss``), with
    its parameters and defaults: the method is differentiated through it as any
    call of a method of an object the code reads (``ppto.transform.methods``), and
    the calls it makes through ``self`` with it.

    One per object and method, while the object lives: the code generated for a
    function is kept with the function (``_shared_state``), so
    ``ppto.grad(model.loss)`` made again on each training step reuses it (a new
    wrapper was transformed again each time). The wrapper reads the object
    through a weak reference (``_Owner``), so neither it nor its code keep the
    model alive; a model taking no weak reference (``__slots__``) is held while
    it is among the last ``STRONGLY_HELD_OBJECTS`` used (``_Held``)."""
    owner, function, name = method.__self__, method.__func__, method.__name__
    starred = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if any(p.kind in starred for p in _signature(method).parameters.values()):
        raise GradError(
            f"ppto cannot differentiate {method.__qualname__}: it takes *args or "
            f"**kwargs parameters; list its parameters explicitly, or let it only "
            "pass its call on, without defaults of its own (return "
            "self.forward(*args, **kwargs): followed)"
        )
    found = getattr(owner, name, None) if name.isidentifier() else None
    if getattr(found, "__func__", None) is not function:
        return _strong_method_wrapper(method)  # (not found under its name)
    try:
        wrappers, holder = _wrappers_of(owner), _Owner
    except TypeError:  # (__slots__ without __weakref__: see _STRONGLY_HELD)
        wrappers, holder = _strongly_held_wrappers_of(owner), _Held
    # the defaults are copied into the wrapper: made again where they were
    # reassigned (Net.loss.__defaults__), as _Call's cache does
    defaults = (function.__defaults__, function.__kwdefaults__)
    kept = wrappers.get(function)
    if kept is None or kept[0][0] is not defaults[0] or kept[0][1] is not defaults[1]:
        call = f"{name}_of.owner.{name}"
        wrapper = _wrapper_calling(method, call, {f"{name}_of": holder(owner)})
        kept = wrappers[function] = (defaults, wrapper)
    return kept[1]


def _strong_method_wrapper(method) -> Callable:
    """A wrapper calling ``method`` held as it is (see ``_method_wrapper``)."""
    name = method.__name__ if method.__name__.isidentifier() else "method"
    return _wrapper_calling(method, f"{name}_of", {f"{name}_of": method})


def _wrapper_calling(method, call: str, scope: dict) -> Callable:
    """A function with ``method``'s parameters and defaults returning ``call``
    (an expression reading ``scope``) of them."""
    parameters, arguments = _spelled(_signature(method))
    name = method.__name__ if method.__name__.isidentifier() else "method"
    source = f"def {name}({parameters}):\n    return {call}({arguments})\n"
    filename = f"<ppto method {method.__qualname__} of {id(method.__self__)}>"
    wrapper = _compiled(source, filename, scope, name)
    del scope[name]  # (its code's namespace must not keep it alive: _SHARED)
    positional = wrapper.__code__.co_argcount
    defaults = method.__func__.__defaults__ or ()
    wrapper.__defaults__ = defaults[len(defaults) - positional :] or None
    wrapper.__kwdefaults__ = method.__func__.__kwdefaults__
    wrapper.__qualname__ = method.__qualname__
    return wrapper


class _Owner:
    """The object a method wrapper calls its method on, held weakly: ``owner``
    gives it (None once it is gone, when nothing can call the wrapper)."""

    __slots__ = ("_reference", "__weakref__")

    def __init__(self, owner) -> None:
        self._reference = weakref.ref(owner)

    @property
    def owner(self):
        return self._reference()


class _Held:
    """The object a method wrapper calls its method on, held as it is (one that
    takes no weak reference: see ``_STRONGLY_HELD``)."""

    __slots__ = ("owner",)

    def __init__(self, owner) -> None:
        self.owner = owner


# Objects that take no weak reference (``__slots__`` without ``"__weakref__"``):
# their method wrappers, kept with the object itself, held for the last
# STRONGLY_HELD_OBJECTS of them used, so that ppto.grad(model.loss) made on each
# step reuses its code (made again each time, each step transformed the model
# again) while a model made again on each step is not kept alive for ever.
# id -> (the object, {method's function: (its defaults, the wrapper)}), oldest
# first; held strongly, so no other object takes that id meanwhile.
STRONGLY_HELD_OBJECTS = 8
_STRONGLY_HELD: dict = {}


def _strongly_held_wrappers_of(owner) -> dict:
    """The method wrappers made for ``owner``, an object without weak references
    (see ``_STRONGLY_HELD``)."""
    key = id(owner)
    entry = _STRONGLY_HELD.pop(key, None)  # (put back last: the newest)
    if entry is None or entry[0] is not owner:
        entry = (owner, {})
    _STRONGLY_HELD[key] = entry
    while len(_STRONGLY_HELD) > STRONGLY_HELD_OBJECTS:
        del _STRONGLY_HELD[next(iter(_STRONGLY_HELD))]
    return entry[1]


# id of an object -> (a weak reference to it, {method's function: (its defaults
# when the wrapper was made, the wrapper)});
# by identity (a model's class may define __eq__), dropped when the object goes
_METHOD_WRAPPERS: dict = {}


def _wrappers_of(owner) -> dict:
    """The method wrappers made for ``owner`` (TypeError where it takes no weak
    reference)."""
    key = id(owner)
    entry = _METHOD_WRAPPERS.get(key)
    if entry is None or entry[0]() is not owner:
        reference = weakref.ref(owner, functools.partial(_forget_wrappers, key))
        entry = _METHOD_WRAPPERS[key] = (reference, {})
    return entry[1]


def _forget_wrappers(key: int, reference) -> None:
    entry = _METHOD_WRAPPERS.get(key)
    if entry is not None and entry[0] is reference:
        del _METHOD_WRAPPERS[key]


def _compiled(source: str, filename: str, scope: dict, name: str) -> Callable:
    """Function ``name`` defined by ``source``, its text readable under ``filename``
    (ppto reads a function's source) and its globals ``scope``."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


def _spelled(signature: inspect.Signature) -> tuple[str, str]:
    """``signature``'s parameter list without defaults and the arguments that pass
    each parameter on as received: ``("x, *, scale", "x, scale=scale")``."""
    parameters, arguments, starred = [], [], False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY:
            if not starred:
                parameters.append("*")
                starred = True
            arguments.append(f"{parameter.name}={parameter.name}")
        else:
            arguments.append(parameter.name)
        parameters.append(parameter.name)
    return ", ".join(parameters), ", ".join(arguments)


class _LazyNamespace:
    """The namespace of a program compiled as generated (on tensors), made on first
    use: calls run the lowered program, only differentiating a derivative again runs
    this one."""

    def __init__(self, program, label: str) -> None:
        self.program, self.label, self.namespace = program, label, None

    def get(self) -> dict:
        if self.namespace is None:
            self.namespace = self.program.compile(self.label)
        return self.namespace


_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _shared_state(transformed) -> dict:
    """The generated programs and their compiled forms, shared by every grad object
    of the same function, ``wrt`` and mode, so that ``ppto.grad(loss)(w)`` in a loop
    transforms once. Reused only while no operator, rule, fusion rule or backend was
    registered since, and while every global and closure value the programs read
    (also in the functions they call) is still the object its scope holds."""
    fresh = {"programs": {}, "lowered": {}, "entries": {}, "fast": {}}
    if isinstance(transformed.f, Transformed):
        return fresh  # a derivative of a derivative: its program wraps that object
    key = (tuple(transformed.wrt), transformed.mode, registrations())
    try:
        states = _SHARED.setdefault(transformed.function, {})
    except TypeError:  # not weakly referenceable: nothing is shared
        return fresh
    state = states.get(key)
    if state is not None and all(
        program.still_current() for program, _ in state["programs"].values()
    ):
        return state
    for old in [k for k in states if k == key or k[2] != key[2]]:
        del states[old]  # stale, or made before a registration: never reused
    states[key] = fresh
    return fresh


# id of an operator -> the wrapper _operator_wrapper made for it
_OPERATOR_WRAPPERS: dict[int, Callable] = {}


def _operator_wrapper(op: OperatorDef) -> Callable:
    """A one-line function calling ``op``, so an operator can be differentiated like
    any function (its rule is then inlined)."""
    if id(op) in _OPERATOR_WRAPPERS:
        return _OPERATOR_WRAPPERS[id(op)]
    spelled = op.python_signature
    parameters = ", ".join(
        str(p).split(":")[0].split("=")[0].strip() for p in spelled.parameters.values()
    )
    header = str(spelled).split(" ->")[0].strip("()")
    source = f"def {op.name}({header}):\n    return __op({parameters})\n"
    wrapper = _compiled(source, f"<ppto operator {op.name}>", {"__op": op}, op.name)
    _OPERATOR_WRAPPERS[id(op)] = wrapper
    return wrapper


# function -> its signature, defaults and keyword defaults (weakly: a function
# made on each step, a closure or lambda, must not be kept with its values)
_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_STARRED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class _Call:
    """One call's arguments, bound to the function's parameters (positional calls
    with every parameter given skip ``inspect``'s binding: the common, fast case)."""

    def __init__(self, function: Callable, args: tuple, kwargs: dict) -> None:
        # the defaults are part of the key: they can be reassigned (f.__defaults__)
        defaults = getattr(function, "__defaults__", None)
        keywords = getattr(function, "__kwdefaults__", None)
        cached = _SIGNATURES.get(function)
        if cached is None or cached[1] is not defaults or cached[2] is not keywords:
            signature = _signature(function)
            starred = any(p.kind in _STARRED for p in signature.parameters.values())
            cached = (signature, defaults, keywords, starred)
            _SIGNATURES[function] = cached
        signature = cached[0]
        self.names = list(signature.parameters)
        # (*xs takes a tuple of the arguments however many there are)
        if not kwargs and len(args) == len(self.names) and not cached[3]:
            self.values = list(args)
            return
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise GradError(f"{function.__name__}{signature}: {error}") from error
        bound.apply_defaults()
        self.values = [bound.arguments[name] for name in self.names]


def _wrt_names(function: Callable, wrt) -> list[str]:
    names = list(_signature(function).parameters)
    items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    resolved = []
    for item in items:
        if isinstance(item, str):
            if item not in names:
                raise GradError(
                    f"{function.__name__} has no parameter named {item!r}; "
                    f"its parameters are {', '.join(names)}"
                )
            resolved.append(item)
        elif isinstance(item, bool):  # (an int to Python: True would be 1)
            raise GradError(
                f"wrt={item!r} is a bool, not a parameter's position or name: "
                f"write wrt=0 (or a name: {', '.join(map(repr, names))}), as JAX "
                "refuses argnums=True"
            )
        elif isinstance(item, int) and -len(names) <= item < len(names):
            resolved.append(names[item])
        else:
            raise GradError(
                f"wrt={item!r} does not name a parameter of "
                f"{function.__name__} ({', '.join(names)})"
            )
    return resolved


def _is_array(value) -> bool:
    kind = type(value)
    if kind is np.ndarray or kind is Tensor:
        return True
    return (
        isinstance(value, Tensor)
        or hasattr(value, "__array_interface__")
        or kind.__module__.startswith("cupy")
    )


def _holding_arrays(values) -> list:
    """The positions of ``values`` that are dicts, lists or tuples with an array
    among their leaves (all of whose leaves are then gathered onto one device)."""
    return [
        position
        for position, value in enumerate(values)
        if pytrees.is_pytree(value) and any(map(_is_array, pytrees.leaves(value)))
    ]


def _with_arrays(tree, arrays):
    """``tree`` (a dict, list or tuple, nested) with its array leaves replaced, in
    order, by the next items of ``arrays`` (its other leaves and its keys kept)."""
    if type(tree) is dict:
        return {key: _with_arrays(item, arrays) for key, item in tree.items()}
    if type(tree) in (list, tuple):
        return type(tree)(_with_arrays(item, arrays) for item in tree)
    return next(arrays) if _is_array(tree) else tree


def _check_differentiable(name: str, value: Any) -> None:
    if getattr(value, "_ppto_symbolic", False):  # (it has a dtype, but no values)
        raise GradError(
            f"cannot differentiate with respect to {name!r}: {value!r} is symbolic; "
            "ppto.grad runs on values: pass arrays, or differentiate the expression "
            "with ppto.get_grad_rule(expr.op) and ppto.evaluate the result"
        )
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if isinstance(value, bool) or isinstance(value, int):
            raise GradError(
                f"cannot differentiate with respect to {name!r}: it is the "
                f"integer {value!r}; pass a float such as {float(value)!r}"
            )
        if not isinstance(value, float):
            raise GradError(
                f"cannot differentiate with respect to {name!r}: a "
                f"{type(value).__name__} is not a number or an array"
            )
        return
    kind = np.dtype(dtype).kind
    if kind == "c":
        raise GradError(
            f"cannot differentiate with respect to {name!r}: its dtype is "
            f"{dtype}; ppto differentiates real (floating point) arrays only: pass "
            "the real and imaginary parts as two float arrays"
        )
    if kind != "f":
        raise GradError(
            f"cannot differentiate with respect to {name!r}: its dtype is "
            f"{dtype}; integer and boolean arrays have no gradient, convert "
            f"with .astype('float64')"
        )


# NumPy array subclasses whose operators mean something else than an ndarray's:
# generated code computes on the data alone (a masked entry counted, its gradient
# not zero; ``*`` of matrices a matrix product) -> what to pass instead
_OTHER_SEMANTICS = {
    np.ma.MaskedArray: "pass {0}.filled(0.0) (the masked entries as zeros) or "
    "np.asarray({0}), and apply the mask in the function (np.where(mask, 0.0, ...))",
    np.matrix: "pass np.asarray({0}) and write matrix products with @",
}


def _check_plain_array(name: str, value: Any, what: str = "") -> None:
    """Refuse a masked array or an np.matrix (also among a list's or dict's
    values): ppto computes as NumPy does on plain ndarrays. ``what``: the value
    the message names (by default the argument ``name``; a jvp's tangent, a
    pullback's cotangent)."""
    for leaf in pytrees.leaves(value) if pytrees.is_pytree(value) else [value]:
        if type(leaf) is np.ndarray or not isinstance(leaf, np.ndarray):
            continue
        for kind, instead in _OTHER_SEMANTICS.items():
            if isinstance(leaf, kind):
                raise GradError(
                    f"{what or f'the argument {name!r}'} is a {type(leaf).__module__}."
                    f"{type(leaf).__name__}, whose operators differ from a plain "
                    f"array's; ppto computes on plain arrays, so its value and "
                    f"gradient would silently ignore that: {instead.format(name)}"
                )


class Transformed:
    """A differentiated function; calling it runs generated code."""

    def __init__(self, f: Callable, wrt, mode: str, with_value: bool) -> None:
        self.f = f
        self.function = _target_function(f)
        self.wrt = _wrt_names(self.function, wrt)
        self.single = not isinstance(wrt, (tuple, list))
        self.mode = mode
        self.with_value = with_value
        self._use(_shared_state(self))
        self._wrt_positions: list | None = None
        # (stand-in taking pytrees' leaves, the leaves differentiated) -> its grad
        self._over_leaves: dict = {}
        parameters = _signature(self.function).parameters.values()
        self._arity = len(parameters)
        self._keyword_only = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
        # (its arguments arrive as a tuple: a pytree, see pytree_arguments)
        self._var_positional = any(p.kind is p.VAR_POSITIONAL for p in parameters)
        base = getattr(f, "__name__", None) or getattr(self.function, "__name__", "f")
        self.__name__ = base + "_grad"
        self.__wrapped__ = self.function

    def _use(self, shared: dict) -> None:
        self._programs: dict = shared["programs"]
        self._lowered: dict = shared["lowered"]
        self._entries: dict = shared["entries"]
        # call_key -> the RepeatedCall that runs its code
        self._fast: dict = shared["fast"]
        self._registered = registrations()
        self._last: RepeatedCall | None = None  # the last call run from _fast
        # that call written out for this object's results (see ppto.straight_call;
        # not kept on the RepeatedCall: grad(f) and value_and_grad(f) share it),
        # and each repeated call written out so far (calls of a few shapes taking
        # turns write each out once)
        self._straight = None
        self._written: dict = {}

    def _ensure_current(self) -> None:
        """Drop what was generated from values that have changed since: a global or
        closure value the code read rebound, or an operator, rule or backend
        registered. A grad object made before then must not go on computing the
        gradient of the old function."""
        if self._registered != registrations() or not all(
            program.still_current() for program, _ in self._programs.values()
        ):
            self._use(_shared_state(self))

    def program(self, ranks: tuple):
        self._ensure_current()
        key = ranks
        if key not in self._programs:
            if len(self._programs) >= PROGRAMS_KEPT:
                self._forget_programs()
            names = list(_signature(self.function).parameters)
            statics = {n: r.value for n, r in zip(names, ranks) if type(r) is _Passed}
            numbers = {n for n, r in zip(names, ranks) if r is NUMBERS}
            # (arrays and differentiated floats: the descriptions that are tuples)
            described = [(n, r) for n, r in zip(names, ranks) if type(r) is tuple]
            rank_map = {n: r[0] for n, r in described}
            shapes = {n: r[1] for n, r in described if r[1] is not None}
            layouts = {n: r[2] for n, r in described if r[2]}
            # (a weak number's dtype is not known: as a literal number's)
            dtypes = {n: r[3] for n, r in described if isinstance(r[3], np.dtype)}
            scalars = {n for n, r in described if r[4]}  # (NumPy scalars)
            source = self.function
            if isinstance(self.f, Transformed):
                source = _generated_wrapper(self.f, ranks[: len(names)])
            program = build(
                source,
                self.wrt,
                rank_map,
                self.mode,
                layouts,
                shapes,
                dtypes,
                statics,
                numbers,
                scalars,
            )
            if isinstance(self.f, Transformed):  # (its code calls the inner code)
                program.inner.append(self.f.program(ranks[: len(names)])[0])
            self._programs[key] = (program, _LazyNamespace(program, self.__name__))
        return self._programs[key]

    def _forget_programs(self) -> None:
        """Drop the code made so far for this function (shared with its other grad
        objects): a function called with ever new callables (each a key of its own)
        would otherwise keep a program, and the callable, for each."""
        for cache in (self._programs, self._lowered, self._entries, self._fast):
            cache.clear()
        self._last = self._straight = None
        self._written.clear()

    def prepare(self, args: tuple, kwargs: dict):
        """Bind a call, check it, and bring its arrays onto one device (unwrapped):
        ``(call, raw values, specialisation key, devices of moved arguments,
        device)``."""
        call = _Call(self.function, args, kwargs)
        if streams.in_use:  # generated code reads raw arrays: they must be made
            streams.ready(call.values)
        if self._wrt_positions is None:
            self._wrt_positions = [call.names.index(name) for name in self.wrt]
        values = list(call.values)
        for name, position in zip(self.wrt, self._wrt_positions):
            _check_differentiable(name, values[position])
        arrays = [i for i, v in enumerate(call.values) if _is_array(v)]
        held = _holding_arrays(call.values)
        for position in arrays + held:
            _check_plain_array(call.names[position], values[position])
        inner = [
            leaf
            for i in held
            for leaf in pytrees.leaves(call.values[i])
            if _is_array(leaf)
        ]
        raws, device = gather_inputs(
            f"grad of {self.__name__}", [call.values[i] for i in arrays] + inner
        )
        homes = {}
        for position, raw in zip(arrays, raws):
            original = values[position]
            if raw is not original and not (
                isinstance(original, Tensor) and original.data is raw
            ):
                homes[position] = _device_of(original)  # moved: its gradient goes back
            values[position] = raw
        leaves = iter(raws[len(arrays) :])
        for position in held:  # (a list of tensors held constant: generated code
            # computes on raw arrays, and NumPy on a Tensor in it tried ppto's ops)
            values[position] = _with_arrays(call.values[position], leaves)
        ranks = self.describe(values, call.values)
        return call, values, ranks, homes, device

    def describe(self, values: list, originals: list) -> tuple:
        """What generated code is specialised on, per argument: ``(ndim, shape,
        layout, dtype, scalar)`` for arrays (shape dropped once many shapes have been
        seen, so that a function called with ever-changing shapes is not regenerated
        each time; ``scalar``: a NumPy scalar, ``np.float64(2.0)``, immutable as a
        Python number is, which a 0-d array is not: ``z = a; z += 1.0`` rebinds z
        for the one and writes into a for the other); ``(0, (), None, float,
        False)`` for a differentiated Python float, a weak
        number: ``float``, not float64, as its dtype is not fixed (NEP 50: it takes
        an array's, ``x32 * 2.0`` is float32), so it stays a Python float in the
        generated code; ``NUMBERS`` for a Python number not differentiated, or a
        tuple or list of Python numbers (whose items are no views: ``h, w = size``
        then ``h += 1`` is fine, where it would write into a tuple of arrays'
        item)."""
        keep_shapes = len(self._programs) < SHAPE_SPECIALISATIONS
        weak = self.weak_positions(values)
        return tuple(
            (
                value.ndim,
                tuple(value.shape) if keep_shapes else None,
                getattr(original, "layout", None),
                np.dtype(value.dtype) if hasattr(value, "dtype") else None,
                isinstance(value, np.generic),
            )
            if hasattr(value, "ndim")
            else WEAK_NUMBER
            if position in weak
            else _Passed(value)
            if passed_callable(value)
            else NUMBERS
            if _number_sequence(value)
            else None
            for position, (value, original) in enumerate(zip(values, originals))
        )

    def weak_positions(self, values: list) -> set:
        """The positions of the differentiated arguments that are Python floats."""
        positions = self._wrt_positions
        if positions is None:  # (show_grad's example arguments: not prepared)
            positions = map(list(_signature(self.function).parameters).index, self.wrt)
        return {p for p in positions if type(values[p]) is float}

    def lowered(self, ranks: tuple, device: Device, fused: bool | None = None) -> dict:
        """The namespace of the program lowered for ``device``'s backend, fused or
        not (by default as ``lower`` decides); regions' fallbacks made on first use
        (see ``lower``)."""
        program, _ = self.program(ranks)
        if fused is None:
            fused = fuses(program, device.kind)
        key = (ranks, device.kind, get_precision(), fused)
        if key not in self._lowered:
            backend = backend_for(device)
            lowered = lower(program, backend, device.kind, fused, lazy=True)
            self._lowered[key] = lowered
        return self._lowered[key][1]

    def _timed_fusion(self, program, name: str, ranks: tuple):
        """Function ``name`` of ``program`` for the CPU; where it would be fused,
        the choice between the fused and unfused code that measures faster (see
        ``ppto.fusion.tuning``)."""
        arrays = [described for described in ranks if type(described) is tuple]
        if (
            not fuses(program, "cpu")
            or fusion_policy() == "on"
            or not arrays  # (numbers alone: nothing to time)
            or any(shape is None for _, shape, *_ in arrays)
        ):  # (code for any shape: calls of different sizes cannot be compared)
            return self.lowered(ranks, CPU)[name]
        make = {
            "fused": lambda: self.lowered(ranks, CPU, True)[name],
            "unfused": lambda: self.lowered(ranks, CPU, False)[name],
        }
        sizes = [math.prod(shape) for shape in program.shapes.values()]
        first = "fused" if max(sizes, default=0) >= FUSED_FIRST else "unfused"
        return FusionChoice(name, make, first)

    def operator_counts(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        """Operator applications in the generated code for these arguments, before
        and after fusion (as fusion runs on their device: a backend without fused
        kernels counts the same twice)."""
        from ppto.transform.fuse import FUSED_KINDS, count_operators, fuse_program

        call = _Call(self.function, args, kwargs)
        trees = self.pytree_arguments(call)
        if trees:  # (the code taking their leaves)
            inner, leaf_call, _ = self.over_leaves(call, trees)
            positional, keywords = leaf_call.arguments()
            return inner.operator_counts(*positional, **keywords)
        _, values, ranks, _, device = self.prepare(args, kwargs)
        program, _ = self.program(ranks)
        namespace = dict(program.refs.namespace)
        if device.kind not in FUSED_KINDS:
            count = count_operators(program.functions, namespace)
            return count, count
        fused, kernels = fuse_program(
            program.functions,
            namespace,
            program.value_shapes,
            device.kind,
            program.size_hints,
        )
        namespace.update(kernels)
        return (
            count_operators(program.functions, namespace),
            count_operators(fused, namespace),
        )

    def entry(self, which: int, ranks, device):
        """Generated function ``which`` (0: the entry; 1: a split's backward), from
        the code lowered when it was first asked for (a split's two from one)."""
        key = (ranks, device.kind, which, get_precision())
        entry = self._entries.get(key)
        if entry is None:
            program, _ = self.program(ranks)
            name_ = program.entries[which]
            if which == 0 and self.mode != "split" and device == CPU:
                entry = self._timed_fusion(program, name_, ranks)
            else:
                namespace = self.lowered(ranks, device)
                for number, other in enumerate(program.entries):
                    self._entries[key[:2] + (number,) + key[3:]] = namespace[other]
                entry = namespace[name_]
            self._entries[key] = entry
        return entry

    def run(self, which: int, ranks, device, values, keywords=None):
        """Call generated function ``which`` (0: the entry; 1: a split's backward)."""
        entry = self.entry(which, ranks, device)
        if which == 0:  # (the entry's arguments: see ppto.shared_arguments)
            program = (self._programs.get(ranks) or self.program(ranks))[0]
            check_call(self.function, writing(program), values)
        if which == 0 and self._keyword_only:  # (the generated code keeps them so)
            count = len(values) - len(self._keyword_only)
            keywords = {
                **dict(zip(self._keyword_only, values[count:])),
                **(keywords or {}),
            }
            values = values[:count]
        try:
            if streams.in_use and device.kind != "cpu":  # (see runtime/streams.py)
                return streams.run_generated(
                    backend_for(device),
                    device,
                    lambda: self._enter(entry, device, values, keywords),
                )
            return self._enter(entry, device, values, keywords)
        except TRANSLATED_ERRORS as error:  # (grad, vjp, jvp)
            translated = self.failed(error, values)
            if translated is error:
                raise
            raise translated from error

    @staticmethod
    def _enter(entry, device: Device, values, keywords):
        if device.kind == "cuda" and device.index != 0:
            with backend_for(device).xp.cuda.Device(device.index):
                return entry(*values, **(keywords or {}))
        return entry(*values, **(keywords or {}))

    def __call__(self, *args: Any, **kwargs: Any):
        last = self._last
        if last is not None and not kwargs:
            # a call like the last one (see ppto.repeated_call): written out as one
            # function once fusion chose its code (see ppto.straight_call)
            straight = self._straight
            if straight is not None:
                result = straight(self, args)
                if result is not MISS:
                    return result
            elif last.matches(args):
                result = self._run_on_cpu(last.run, args, last.dtypes, last.layouts)
                if len(self._written) >= FAST_CALLS:  # (calls of stale code)
                    self._written.clear()
                self._straight = self._written[last] = last.written_out(self)
                return result
        # the fast path takes calls giving every argument: a default is bound from
        # the function's current defaults (they can be reassigned)
        key = None if kwargs or len(args) != self._arity else _call_key(args)
        if key is not None:
            fast = self._fast.get(key)
            if (  # a call like an earlier one: only what its code read to check
                fast is not None
                and fast.program.still_current()
                and self._registered == registrations()
            ):
                if fast is not last:
                    self._last = fast if fast.kinds is not None else None
                    self._straight = self._written.get(fast)
                return self._run_on_cpu(fast.run, args, fast.dtypes, fast.layouts)
        if (
            self._var_positional
            or any(map(pytrees.is_pytree, args))
            or any(map(pytrees.is_pytree, kwargs.values()))
        ):
            call = _Call(self.function, args, kwargs)
            trees = self.pytree_arguments(call)
            if trees:
                return self._call_over_leaves(call, trees)
        self._ensure_current()
        call, values, ranks, homes, device = self.prepare(args, kwargs)
        # (a Python float's gradient is float64, as ppto.tensor(2.0) is)
        dtypes = [dtype_of(values[p]) for p in self._wrt_positions]
        # (a gradient is laid out as its argument: an nhwc image's is nhwc)
        layouts = [ranks[p] and ranks[p][2] for p in self._wrt_positions]
        value, grads = self.run(0, ranks, device, values)
        result = self.finish(value, grads, homes, device, dtypes, values, layouts)
        if (
            key is not None
            and device == CPU
            and len(self._fast) < FAST_CALLS
            and not self._keyword_only
        ):
            entry = self._entries.get((ranks, "cpu", 0, key[-1]))
            made = self._programs.get(ranks)
            # (running it may have dropped the code: code lowered on its first
            # call, by fusion's timing, after a registration: the next call
            # makes it again)
            if entry is not None and made is not None:
                self._fast[key] = RepeatedCall.of(
                    args,
                    entry,
                    dtypes,
                    made[0],
                    layouts,
                    self._registered,
                    self.function,
                )
        return result

    def _run_on_cpu(self, run, args: tuple, dtypes: list, layouts: list):
        """``run(args)``'s gradients finished for the caller, an error from the
        generated code translated (see ``failed``)."""
        try:
            outputs = run(args)
        except TRANSLATED_ERRORS as error:
            translated = self.failed(error, args)
            if translated is error:
                raise
            raise translated from error
        return self.finish_on_cpu(*outputs, dtypes, layouts, args)

    def pytree_arguments(self, call: _Call) -> dict:
        """The differentiated arguments that are dicts, lists or tuples (pytrees):
        parameter -> structure; for a derivative differentiated again, those of
        the derivative too (its code takes their leaves as well)."""
        trees = {}
        parameters = _signature(self.function).parameters
        for name in self.wrt:
            value = call.values[call.names.index(name)]
            if parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                raise GradError(
                    f"cannot differentiate with respect to **{name}: name the "
                    f"parameters of {self.function.__name__}, or take a dict "
                    "parameter"
                )
            if pytrees.is_pytree(value):
                trees[name] = pytrees.structure(value, name)
        for name, value in zip(call.names, call.values):
            # one held constant is taken as its leaves too, where they are all
            # floating point: the generated code reads a dict as a sequence
            # (``for key in params``, ``params.values()``) only written out;
            # not **kwargs, which the stand-in passes on whole (as its leaves,
            # each a keyword, it was a dict again: a stand-in of the stand-in,
            # without end)
            if parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                continue
            if name not in trees and _constant_float_tree(value):
                trees[name] = pytrees.structure(value, name)
        if isinstance(self.f, Transformed):
            trees.update(self.f.pytree_arguments(call))
        return trees

    def over_leaves(self, call, trees: dict):
        """``(the derivative of the function taking the pytrees' leaves, the call
        made with them, the leaves differentiated)``. A leaf that is None gets
        None as its gradient (JAX's empty subtree); one that is an integer, a
        string or any other value no array or float raises GradError, as JAX's
        grad does. A derivative differentiated again differentiates the
        derivative taking the leaves."""
        leaf_call = pytrees.leaf_call(self.function, call.names, call.values, trees)
        wrt = []
        for name in self.wrt:
            for parameter, leaf, path in leaf_call.leaves(name):
                if name in trees and leaf is None:
                    continue
                _check_differentiable(path, leaf)
                wrt.append(parameter)
        if not wrt:
            raise GradError(
                f"{self.function.__name__}: {', '.join(map(repr, trees))} holds no "
                "array or number to differentiate with respect to"
            )
        target = leaf_call.function
        if isinstance(self.f, Transformed):
            target = self.f.over_leaves(call, trees)[0]
        key = (target, tuple(wrt))
        if key not in self._over_leaves:
            self._over_leaves[key] = Transformed(
                target, wrt, self.mode, self.with_value
            )
        return self._over_leaves[key], leaf_call, wrt

    def regrouped(self, result, leaf_call, wrt: list):
        """What this derivative returns from what its version taking the leaves
        (differentiated with respect to ``wrt``) returned: each gradient in its
        argument's structure."""
        value, grads = result if self.with_value else (None, result)
        if isinstance(self.f, Transformed) and self.with_value:
            value = self.f.regrouped(value, *self.f.over_leaves_of(leaf_call))
        by_leaf = dict(zip(wrt, grads))
        gradients = [leaf_call.gradient(name, by_leaf) for name in self.wrt]
        gradients = gradients[0] if self.single else tuple(gradients)
        return (value, gradients) if self.with_value else gradients

    def over_leaves_of(self, leaf_call) -> tuple:
        """``(leaf_call, the leaves differentiated)`` of this derivative for a call
        made with ``leaf_call``'s leaves."""
        return self.over_leaves(leaf_call, leaf_call.trees)[1:]

    def _call_over_leaves(self, call: _Call, trees: dict):
        """A call whose differentiated arguments include pytrees: the gradient of
        each has its structure (keys, order, container types)."""
        inner, leaf_call, wrt = self.over_leaves(call, trees)
        positional, keywords = leaf_call.arguments()
        return self.regrouped(inner(*positional, **keywords), leaf_call, wrt)

    def failed(self, error: Exception, values) -> Exception:
        """The error to raise for ``error`` from running the generated code: where
        NumPy (or another array library) refused the arguments' shapes or an index,
        a ppto.ShapeError naming the function, the shapes and the failing statement
        (what NumPy says alone points at generated code); a ppto error raised by an
        operator, or one of ``RUNTIME_ERRORS``, the same type of error saying at
        which statement (``except TypeError`` still catches it); otherwise
        ``error``."""
        same_type = isinstance(error, PptoError) or type(error) in RUNTIME_ERRORS
        if not same_type and type(error) not in LIBRARY_SHAPE_ERRORS:
            return error
        statement = failing_statement(error)
        if statement is None:
            return error
        what = {"split": "vjp", "jvp": "jvp"}.get(self.mode, "gradient")
        generated = (
            f"the generated code of {self.__name__.removesuffix('_grad')}'s {what}"
        )
        lines = failing_origins(error)
        if lines:  # the user's line, then the lines that called its function
            where = ", called ".join(map(describe_origins, lines))
            at = f"{generated} failed {where}" + ("," if len(lines) > 1 else "")
            statement = f"generated statement {statement}"
        else:  # (code made without origins: the function's own line)
            code = getattr(self.function, "__code__", None)
            defined = (
                f" ({os.path.basename(code.co_filename)}, line {code.co_firstlineno})"
                if code is not None
                else ""
            )
            at = f"{generated}{defined} failed"
            statement = f"at {statement}"
        if same_type:  # (its message says what was wrong, not where)
            return type(error)(f"{error} ({at}; {statement})")
        shapes = ", ".join(
            str(tuple(np.shape(v))) if hasattr(v, "shape") else type(v).__name__
            for v in values
        )
        return ShapeError(
            f"{at} on arguments of shapes {shapes}: {error} ({statement}); check "
            "the arguments' shapes and indices"
        )

    def finish_on_cpu(self, value, grads, dtypes: list, layouts: list, args=()):
        """``finish`` for a call whose arrays were all on the CPU (nothing moved)."""
        if type(value) is not np.float64 and type(value) is not np.float32:
            _require_scalar(value, self.__name__)
            if self.with_value:  # (a 0-d array: maybe an argument's, see _owned)
                value = _owned(value, args)
        grads = (grads,) if len(self.wrt) == 1 else _separate(grads)
        placed = tuple(
            Tensor(g, CPU, layout)
            if type(g) is np.ndarray and g.dtype == dtype and g.flags.writeable
            else _laid_out(_as_tensor(_in_dtype(g, dtype), CPU), layout)
            for g, dtype, layout in zip(grads, dtypes, layouts)
        )
        return self.result(value, placed, CPU)

    def finish(
        self, value, grads, homes, device: Device, dtypes: list, values, layouts
    ):
        """The caller's result from the generated code's ``(value, gradients)``:
        each gradient in its argument's dtype (a float32 parameter's gradient is
        float32 even where the function computed in float64), layout and device.
        (Calls taking the fast path have the shapes of one that came here.)"""
        _require_scalar(value, self.__name__)
        if self.with_value:
            value = _owned(value, values)
        grads = (grads,) if len(self.wrt) == 1 else _separate(grads)
        arguments = [values[position] for position in self._wrt_positions]
        _check_shapes(self.__name__, grads, arguments, self.wrt)
        placed = tuple(
            _laid_out(
                _place(_in_dtype(g, dtype), homes.get(position, device), device),
                layout,
            )
            for g, position, dtype, layout in zip(
                grads, self._wrt_positions, dtypes, layouts
            )
        )
        return self.result(value, placed, device)

    def result(self, value, placed: tuple, device: Device):
        """What the caller gets: the gradients (one or a tuple), with the value for
        ``value_and_grad``."""
        gradients = _observed(
            "Grad",
            self.__name__.removesuffix("_grad"),
            placed[0] if self.single else placed,
        )
        return (_as_tensor(value, device), gradients) if self.with_value else gradients


SHAPE_SPECIALISATIONS = 8
# how ``describe`` tells a differentiated Python float: rank 0, shape (), no layout,
# and its type where an array's dtype is (NumPy's rules give it the array's dtype)
WEAK_NUMBER = (0, (), None, float, False)


class _NumberSequence:
    """How ``describe`` tells a Python number not differentiated, or a tuple or list
    of numbers (not nested: a tuple of tuples is described as any other value): the
    alias check takes it and its items for numbers, which an array's and a tuple of
    arrays' are not, so each gets code of its own. Only the alias check reads it:
    to the rest of the transformation it is a value of unknown kind, as before
    (``size * 2`` repeats the tuple)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "numbers"


NUMBERS = _NumberSequence()


def _number_sequence(value) -> bool:
    """Whether ``value`` is a Python number, or a tuple or list whose items are all
    Python or NumPy numbers (immutable: none is a view of anything, and ``+=``
    rebinds a number where it would write into an array given there)."""
    kind = type(value)
    if kind is float or kind is int or kind is bool or kind is complex:
        return True
    return (kind is tuple or kind is list) and all(
        isinstance(item, (int, float, complex, np.number, np.bool_)) for item in value
    )


# programs kept per function (and wrt and mode) before they are all dropped
PROGRAMS_KEPT = 64
# called with (what, function name, result) for each result handed back
RESULT_OBSERVERS: list[Callable] = []


def _observed(what: str, name: str, result):
    """``result``, after the observers saw it (ppto.debug.memcheck)."""
    for observer in RESULT_OBSERVERS:
        observer(what, name, result)
    return result


def _check_shapes(name: str, grads, arguments: list, wrt: list) -> None:
    """Each gradient has its argument's shape: a gradient rule giving another
    (a sum where the input was a vector) must not pass for a gradient."""
    for gradient, argument, parameter in zip(grads, arguments, wrt):
        if np.shape(gradient) != np.shape(argument):
            raise GradError(
                f"the gradient of {name.removesuffix('_grad')} with respect to "
                f"{parameter!r} came out with shape {np.shape(gradient)}, but "
                f"{parameter!r} has shape {np.shape(argument)}: a gradient rule "
                "gave a gradient of another shape than its input (ppto.check_grad("
                "op, *inputs) on the operators with rules of their own finds it)"
            )


def _separate(grads: tuple, held: tuple = ()) -> tuple:
    """The gradients, none sharing memory with another or with an array of ``held``
    (the caller's own, such as a pullback's cotangent): code that computed one value
    for two gradients (those of ``x + y``) hands back the same array twice, the
    pullback of ``x + y`` hands back the cotangent itself, and a caller updating one
    gradient in place must not change the other or its own array."""
    if held:
        held = tuple(h for h in held if not isinstance(h, (int, float, np.generic)))
    owners = {
        id(g if type(g) is not np.ndarray or g.base is None else _owner(g))
        for g in grads
    }
    if len(owners) == len(grads) and (  # the common case, decided quickly
        not held
        or not any(
            id(_owner(h) if type(h) is np.ndarray else h) in owners for h in held
        )
    ):
        return grads
    kept: list = list(held)
    for gradient in grads:
        if any(_shared(gradient, other) for other in kept):
            gradient = gradient.copy()
        kept.append(gradient)
    return tuple(kept[len(held) :])


def _shared(a, b) -> bool:
    if a is b:
        return not isinstance(a, (int, float, np.generic))  # (numbers are values)
    if type(a) is np.ndarray and type(b) is np.ndarray:
        # views of different arrays cannot overlap: one attribute each, where
        # np.may_share_memory costs a microsecond (a tenth of a tiny gradient)
        return _owner(a) is _owner(b) and np.may_share_memory(a, b)
    return False


def _owned(result, inputs):
    """``result`` (an array, or tuples and lists of them) with each array that
    shares memory with an array of ``inputs`` (the caller's arguments and
    tangents, Tensors among them, or arrays they hold) or with another of its
    arrays copied: generated code returns an argument unchanged (``lambda a:
    a``) or a view of it (``a.reshape(2, 1)``), and the caller's Tensor over it,
    updated in place (``t += 1``), would write into the caller's array. Arrays
    of their own, the common case, are not copied (one identity look-up each)."""
    found = _leaves(result)
    keys = [_memory_key(leaf) for leaf in found]
    owners = set(keys)
    owners.discard(None)
    held = [
        leaf.data if isinstance(leaf, Tensor) else leaf
        for leaf in pytrees.leaves(inputs)
    ]
    if len(owners) == len(keys) - keys.count(None) and not any(
        _memory_key(leaf) in owners for leaf in held
    ):  # the common case, decided quickly
        return result
    held = [leaf for leaf in held if _is_array(leaf)]
    kept = []
    for leaf in found:
        if _is_array(leaf):
            if any(_shared(leaf, other) for other in held):
                leaf = leaf.copy()
            held.append(leaf)
        kept.append(leaf)
    return _with_leaves(result, iter(kept))


def _memory_key(value):
    """What tells an array's memory apart quickly: its NumPy owner's id (views
    of one array share it), another array's own id; None for a number."""
    kind = type(value)
    if kind is np.ndarray:
        return id(value if value.base is None else _owner(value))
    if kind is float or kind is int or value is None:
        return None
    return id(value) if _is_array(value) else None


def _with_leaves(value, leaves):
    """``value`` (a value or nested tuples and lists) with its leaves taken in
    order from the iterator ``leaves``."""
    if isinstance(value, (tuple, list)):
        return type(value)(_with_leaves(item, leaves) for item in value)
    return next(leaves)


def _leaves(value) -> tuple:
    """The values in ``value``, a value or nested tuples and lists of them."""
    if isinstance(value, (tuple, list)):
        return tuple(leaf for item in value for leaf in _leaves(item))
    return (value,)


def _owner(array):
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _in_dtype(gradient, dtype):
    """The gradient in its argument's dtype, and an array of its own: a broadcast
    view (the gradient of ``sum(x)``) is read-only, which a caller updating the
    gradient in place would trip over."""
    if type(gradient) is np.ndarray and not gradient.flags.writeable:
        gradient = gradient.copy()
    if dtype is None or getattr(gradient, "dtype", dtype) == dtype:
        return gradient
    _require_real(gradient, dtype)
    return gradient.astype(dtype)


def _require_real(derivative, dtype) -> None:
    """A complex derivative of a real argument or result means a complex value
    inside the function (np.fft, astype(complex)): its real part is not the
    derivative (ppto's rules take no conjugates), so refuse it rather than cast."""
    if np.dtype(derivative.dtype).kind == "c" and np.dtype(dtype).kind != "c":
        raise GradError(
            "the function computes with complex values (its derivative came out "
            f"{derivative.dtype}): ppto differentiates real computations only, "
            "and the real part of that derivative is not the right one; compute "
            "the real and imaginary parts as two real arrays"
        )


FAST_CALLS = 32


def _call_key(args: tuple) -> tuple | None:
    """What decides everything ``prepare`` does for positional arguments that are
    NumPy arrays, CPU tensors or Python numbers: their kinds, dtypes, shapes and
    layouts, and the precision setting. None for anything else (the full path)."""
    key = []
    for value in args:
        kind = type(value)
        if kind is np.ndarray:
            key.append((value.dtype, value.shape))
        elif kind is Tensor and type(value.data) is np.ndarray:
            if value.device != CPU:
                return None
            key.append((value.data.dtype, value.data.shape, value.layout))
        elif kind is float or kind is int or kind is bool:
            key.append(kind)
        elif passed_callable(value):
            key.append(_Passed(value))
        else:
            return None
    key.append(get_precision())
    return tuple(key)


class _Passed:
    """A callable argument in a specialisation key: the same callable (by
    identity, as the code calls it) is the same key, and so is a Python function
    made again from the same text with the very same defaults, globals and closure
    values (``ppto.grad(h)(x, lambda v: v * 2)`` in a loop makes a new lambda each
    turn: each was a new key, a new transformation and a program kept for good)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value) -> None:
        self.value = value
        code = (
            getattr(value, "__code__", None)
            if type(value) is types.FunctionType
            else None
        )
        self._hash = hash(code) if code is not None else id(value)

    def __eq__(self, other) -> bool:
        if type(other) is not _Passed:
            return False
        mine, theirs = self.value, other.value
        return mine is theirs or (
            type(mine) is types.FunctionType
            and type(theirs) is types.FunctionType
            and _made_alike(mine, theirs)
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"passed {getattr(self.value, '__name__', type(self.value).__name__)}"


def _made_alike(f: types.FunctionType, g: types.FunctionType) -> bool:
    """Whether two functions compute alike for sure: one text (code object), the
    same globals, and defaults and closure values that are the same objects."""
    if f.__code__ is not g.__code__ or f.__globals__ is not g.__globals__:
        return False
    keywords, theirs = f.__kwdefaults__ or {}, g.__kwdefaults__ or {}
    if keywords.keys() != theirs.keys():
        return False
    try:
        ours = [*(f.__defaults__ or ()), *keywords.values(), *_cells(f)]
        other = [*(g.__defaults__ or ()), *(theirs[k] for k in keywords), *_cells(g)]
    except ValueError:  # a closure cell not yet filled: not compared
        return False
    return len(ours) == len(other) and all(a is b for a, b in zip(ours, other))


def _cells(function: types.FunctionType) -> list:
    return [cell.cell_contents for cell in function.__closure__ or ()]


def _device_of(value) -> Device:
    if isinstance(value, Tensor):
        return value.device
    from ppto.runtime.tensor import device_of

    return device_of(value) or CPU


def _require_scalar(value, name: str) -> None:
    if isinstance(value, (tuple, list)):  # (a list has no size: it passed below)
        raise GradError(
            f"ppto.grad needs a function with a scalar result, but "
            f"{name.removesuffix('_grad')} returned a {type(value).__name__} of "
            f"{len(value)} values: use ppto.vjp for several results"
        )
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind not in (None, *"biufc") or (
        kind is None and not isinstance(value, (int, float, complex, np.number))
    ):  # None, a string, an object: their "gradient" came out as zeros
        shown = f"an array of {value.dtype}" if kind else repr(value)[:40]
        raise GradError(
            f"ppto.grad needs a function with a scalar result, but "
            f"{name.removesuffix('_grad')} returned {shown}, not a number: return "
            "the value to differentiate"
        )
    size = getattr(value, "size", 1)
    if size != 1:
        shape = tuple(getattr(value, "shape", ()))
        raise GradError(
            f"ppto.grad needs a function with a scalar result, but "
            f"{name.removesuffix('_grad')} returned shape {shape}: reduce it "
            f"(e.g. .sum()) or use ppto.vjp for non-scalar results"
        )


def _require_scalar_again(value, name: str) -> None:
    """``_require_scalar`` for a gradient differentiated again (ppto.hessian, jvp,
    jacfwd or jacrev of ppto.grad(f)): each needs ``f`` to be a scalar function."""
    try:
        _require_scalar(value, name)
    except GradError as error:
        raise GradError(
            f"{error}; the same for differentiating ppto.grad({name}) again "
            f"(ppto.hessian, ppto.jvp, ppto.jacfwd, ppto.jacrev of it): for the "
            f"second derivatives of one of {name}'s values, differentiate a "
            f"function returning that value alone (def {name}_i(x): return "
            f"{name}(x)[i])"
        ) from None


def _require_real_again(gradients: tuple, arguments: tuple) -> None:
    """``_require_real`` for the gradients (of ``arguments``) a derivative
    differentiated again computes: as ppto.grad refuses a complex one."""
    for gradient, argument in zip(gradients, arguments, strict=True):
        if getattr(gradient, "dtype", None) is not None:
            _require_real(gradient, dtype_of(argument))


def _as_tensor(value, device: Device):
    if type(value) is np.ndarray:
        return Tensor(value, device)
    if isinstance(value, Tensor):
        return value
    if isinstance(value, tuple):
        return tuple(_as_tensor(v, device) for v in value)
    if type(value) is list:  # (a function's list of results: NumPy would stack
        # them, failing on items of different shapes, and the caller made a list)
        return [_as_tensor(v, device) for v in value]
    if _is_array(value):
        return Tensor(value, device)
    return Tensor(np.asarray(value), CPU)


def _laid_out(tensor: Tensor, layout: str | None) -> Tensor:
    """``tensor`` tagged with its argument's layout (its data is laid out so: the
    generated code computes on the argument's array as stored)."""
    if layout is None or tensor.layout == layout:
        return tensor
    return Tensor(tensor.data, tensor.device, layout)


def _laid_out_result(value, program):
    """A function's result (or its tangent) tagged with the layout it has, where the
    analysis found one (a conv2d's nhwc output: operators on tensors keep it); a
    tuple's items each with theirs."""
    return _tagged(value, program.result_layouts.get(program.entry))


def _tagged(value, layout):
    if isinstance(layout, tuple):
        if isinstance(value, tuple) and len(value) == len(layout):
            return tuple(_tagged(v, item) for v, item in zip(value, layout))
        return value
    if isinstance(value, Tensor) and value.ndim == 4:
        return _laid_out(value, layout)
    return value


def _place(gradient, home: Device, device: Device):
    if type(gradient) is np.ndarray and home is device:
        return Tensor(gradient, device)
    gradient = _as_tensor(gradient, device)
    if gradient.device is not home and gradient.device != home:
        gradient = Tensor(
            move(gradient.data, gradient.device, home, "gradient", True), home
        )
    return gradient


def grad(
    f: Callable, wrt: int | str | Sequence = 0, has_aux: bool = False
) -> Transformed | WithAux:
    """The gradient of a scalar function, by source transformation.

    The source is transformed on the first call for each kind of arguments (ranks,
    shapes, dtypes); later ``grad`` objects of the same function share that work
    until a global it reads is rebound or a rule is registered.

    A differentiated Python float stays a Python float in the generated code, weak
    as NumPy makes it (NEP 50: ``x32 * 2.0`` is float32), so the value and the
    gradients have the dtypes the function itself gives; the float's own gradient
    is a 0-d float64 Tensor (the dtype of ``ppto.tensor(2.0)``, as JAX gives it
    in its default float dtype).

    >>> def f(x):
    ...     return np.sum(np.sin(x) * x)
    >>> df = ppto.grad(f)
    >>> df(ppto.tensor([0.0, 1.0]))     # doctest: +SKIP

    ``has_aux=True`` (JAX's): ``f`` returns ``(value, aux)``, only ``value`` is
    differentiated, and the call returns ``(gradients, aux)``.
    """
    if has_aux:
        return WithAux(f, wrt, with_value=False)
    return Transformed(f, wrt, "combined", with_value=False)


def value_and_grad(
    f: Callable, wrt: int | str | Sequence = 0, has_aux: bool = False
) -> Transformed | WithAux:
    """Like ``grad`` but returns ``(value, gradients)``; with ``has_aux=True``,
    ``((value, aux), gradients)``, as JAX's."""
    if has_aux:
        return WithAux(f, wrt, with_value=True)
    return Transformed(f, wrt, "combined", with_value=True)


class WithAux:
    """``grad`` of a function returning ``(value, aux)``: one ``vjp`` of the pair,
    pulled back with 1 for the value and zeros for ``aux`` (arrays or numbers,
    nested in tuples and lists, which come back as tensors), so ``f`` runs once."""

    def __init__(self, f: Callable, wrt, with_value: bool) -> None:
        self.f = f
        self.function = _target_function(f)
        self.wrt = _wrt_names(self.function, wrt)
        self.single = not isinstance(wrt, (tuple, list))
        self.with_value = with_value
        self.__name__ = getattr(self.function, "__name__", "f") + "_grad"
        self.__wrapped__ = self.function

    def __call__(self, *args: Any, **kwargs: Any):
        name = self.function.__name__
        out, pullback = vjp(self.f, *args, **kwargs)
        if type(out) not in (tuple, list) or len(out) != 2:
            raise GradError(
                f"{name} is differentiated with has_aux=True, so it must return a "
                f"pair (value, aux); it returns {_described(out)}"
            )
        value, aux = out
        if np.ndim(value) != 0:
            raise GradError(
                f"{name}'s value (the first of the pair it returns, has_aux=True) "
                f"must be a scalar, but has shape {np.shape(value)}: reduce it "
                "(np.sum, np.mean) or use ppto.vjp"
            )
        seed = np.ones((), dtype_of(value) or np.float64)
        gradients = pullback(type(out)((seed, _zeros_like_leaves(aux))))
        names = _Call(self.function, args, kwargs).names
        picked = []
        for wanted in self.wrt:
            gradient = gradients[names.index(wanted)]
            if gradient is None:
                raise GradError(
                    f"cannot differentiate {name} with respect to {wanted!r}: it "
                    "is not a floating point argument"
                )
            picked.append(gradient)
        found = picked[0] if self.single else tuple(picked)
        return ((value, aux), found) if self.with_value else (found, aux)


def _zeros_like_leaves(value):
    """Zeros of each leaf's shape and dtype (nested tuples and lists kept)."""
    if type(value) in (tuple, list):
        return type(value)(map(_zeros_like_leaves, value))
    return np.zeros(np.shape(value), dtype_of(value) or np.float64)


def _described(value) -> str:
    if type(value) in (tuple, list):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def show_grad(
    f: Callable,
    *args: Any,
    wrt: int | str | Sequence = 0,
    file=None,
    lowered: bool = False,
    fused: bool = False,
    device: str | Device | None = None,
) -> str:
    """Print and return the generated backward source of ``f``.

    With example ``args``, the source is the one specialised for them (the code that
    runs for arguments of their shapes). ``fused=True`` shows the fused kernels
    (``__fused_*``) that replace operator chains, and their code: the chunked NumPy
    passes on the CPU, the generated CUDA C on ``cuda``; ``lowered=True`` the code
    that runs on the arguments' device. ``device`` (default: the arguments') shows
    the fused code for another device, ``'cuda'`` included on a machine without one.
    """
    return _show(f, args, wrt, "combined", file, lowered, fused, device)


def show_source(
    f: Callable,
    *args: Any,
    file=None,
    lowered: bool = False,
    fused: bool = False,
    device: str | Device | None = None,
) -> str:
    """Print and return the normalized source of ``f`` itself (one operation per
    statement), as fusion and lowering see it; ``fused=True`` shows fused kernels
    (for ``device``, as in ``show_grad``)."""
    return _show(f, args, (), "primal", file, lowered, fused, device)


def _timing_note(transformed, ranks) -> str:
    """A line saying which code calls with these arguments run where fusion is timed
    and has not kept the fused code (see ``ppto.fusion.tuning``); else nothing."""
    choice = transformed._entries.get((ranks, "cpu", 0, get_precision()))
    if not isinstance(choice, FusionChoice) or choice.decision == "fused":
        return ""
    if choice.decision is None:
        return "# calls with these arguments are timing this code against the unfused\n"
    fused, unfused = (1e3 * statistics.median(choice.times[w]) for w in choice.times)
    return (
        f"# calls with these arguments run the unfused code: it timed faster here "
        f"({unfused:.3g} ms against {fused:.3g} ms; PPTO_FUSION=on runs this code)\n"
    )


def _unfused_note(kind: str) -> str:
    """Why calls like these run the unfused code (``fuses`` said they do)."""
    if get_precision() == "strict":
        why = "precision is 'strict'"
    elif fusion_policy() == "off":
        why = "PPTO_FUSION=off"
    else:
        why = "these arrays are too small for fused kernels to gain on the " + kind
    return (
        f"# calls with these arguments run the unfused code ({why}): this is not it\n"
    )


def _show(f, args, wrt, mode, file, lowered, fused, device=None) -> str:
    from ppto.transform.fuse import FUSED_KINDS, count_operators, fuse_program

    transformed = Transformed(f, wrt, mode, with_value=True)
    if args:
        call = _Call(transformed.function, args, {})
        values = call.values
        trees = transformed.pytree_arguments(call)
        if trees:  # (the code taking their leaves: see ppto.pytrees)
            transformed, leaf_call, _ = transformed.over_leaves(call, trees)
            f, wrt = transformed.function, transformed.wrt
            values = [leaf for _, leaf, _ in leaf_call.leaves()]
        raws = [getattr(v, "data", v) if isinstance(v, Tensor) else v for v in values]
        ranks = transformed.describe(raws, values)
    else:
        names = list(_signature(transformed.function).parameters)
        ranks = (None,) * len(names)
    try:
        program, _ = transformed.program(ranks)
    except GradError:  # several results: show the forward/backward pair of vjp
        transformed = Transformed(f, wrt, "split", with_value=True)
        program, _ = transformed.program(ranks)
    text = program.source()
    if device is None:
        first = next((a for a in args if _is_array(a)), None)
        device = _device_of(first) if first is not None else CPU
    device = Device(device)
    if fused and not lowered and device.kind in FUSED_KINDS:
        namespace = dict(program.refs.namespace)
        functions, kernels = fuse_program(
            program.functions,
            namespace,
            program.value_shapes,
            device.kind,
            program.size_hints,
        )
        namespace.update(kernels)
        before = count_operators(program.functions, namespace)
        after = count_operators(functions, namespace)
        header = f"# operators: {before} before fusion, {after} after\n"
        if not fuses(program, device.kind):
            header += _unfused_note(device.kind)
        elif device.kind == "cpu":
            header += _timing_note(transformed, ranks)
        sources = [render_function(f) for f in functions]
        for name, kernel in kernels.items():  # what each kernel runs
            if hasattr(kernel, "listing"):  # generated: NumPy, a pass or CUDA C
                sources.append(kernel.listing())
            else:  # a rule's own implementation
                where = f"{kernel.__module__}.{kernel.__qualname__}"
                sources.append(f"# {name}: the rule's implementation, {where}\n")
        text = header + "\n\n".join(sources)
    elif fused and not lowered:
        text = f"# backend {device.kind!r} has no fused kernels: this code runs\n{text}"
    if lowered:
        text = lower(program, backend_for(device), device.kind, fused)[0]
    print(text, file=file)
    return text


def vjp(f: Callable, *args: Any, **kwargs: Any):
    """``(out, pullback)``: ``pullback(cotangent)`` returns the gradient for every
    argument (``None`` for arguments that are not floating point). ``out`` may be a
    tuple, a list or a dict; the cotangent then has the same structure."""
    keys = _dict_result_keys(f)
    out, pullback = _vjp(f, *args, **kwargs)
    if keys is None:
        return out, pullback

    def keyed_pullback(cotangent):
        return pullback(_values_by_key(cotangent, keys))

    return dict(zip(keys, out)), keyed_pullback


def _dict_result_keys(f: Callable) -> tuple | None:
    """The keys of the dict ``f`` returns (its transformed code returns the list of
    their values: see ppto.transform.dicts), else None."""
    if isinstance(f, Transformed):  # (a gradient returns no dict)
        return None
    return returned_keys(_target_function(f))


def _values_by_key(cotangent, keys: tuple) -> list:
    """A dict's cotangent, a dict of the same keys, as the list of its values."""
    if type(cotangent) is not dict or set(cotangent) != set(keys):
        given = (
            f"a dict of keys {tuple(cotangent)!r}"
            if type(cotangent) is dict
            else f"a {type(cotangent).__name__}"
        )
        raise ShapeError(
            f"vjp: the cotangent of the output must be a dict of keys {keys!r}, as "
            f"the output is; got {given}"
        )
    return [cotangent[key] for key in keys]


def _vjp(f: Callable, *args: Any, **kwargs: Any):
    """``vjp`` of a function returning no dict (or its list of values)."""
    function = _target_function(f)
    call = _Call(function, args, kwargs)
    trees = {
        name: pytrees.structure(value, name)
        for name, value in zip(call.names, call.values)
        if pytrees.is_pytree(value) and any(map(_is_float, pytrees.leaves(value)))
    }
    if trees:
        _refuse_derivative_of_pytrees(f, trees)
        return _vjp_over_leaves(function, call, trees)
    wrt = [name for name, value in zip(call.names, call.values) if _is_float(value)]
    if not wrt:
        raise GradError(f"vjp: {function.__name__} has no floating point argument")
    transformed = Transformed(f, wrt, "split", with_value=True)
    call, values, ranks, devices, device = transformed.prepare(args, kwargs)
    program, _ = transformed.program(ranks)
    forward_name, backward_name = program.entries
    out, saved = transformed.run(0, ranks, device, values)
    _require_numbers(out, function.__name__, "vjp")
    out = _owned(out, values)
    saved = residuals.of_their_own(saved)
    backward = residuals.as_read_now(transformed.entry(1, ranks, device), program)

    arguments = [values[call.names.index(name)] for name in wrt]

    def pullback(cotangent):
        cotangent = _rows_for_a_list(cotangent, out)
        _check_plain_array("cotangent", cotangent, "the cotangent")
        _check_cotangent(cotangent, out, "the output")
        if streams.in_use:
            streams.ready(cotangent)
        raw = _raw(_cotangent_on(cotangent, device, like=out))
        kept = residuals.with_own_lists(saved)  # (the backward pops its tapes)
        if streams.in_use and device.kind != "cpu":
            grads = streams.run_generated(
                backend_for(device), device, lambda: backward(kept, raw)
            )
        else:
            grads = backward(kept, raw)
        grads = (grads,) if len(wrt) == 1 else tuple(grads)
        grads = _separate(grads, (*_leaves(raw), *arguments))
        _check_shapes(function.__name__, grads, arguments, wrt)
        by_name = dict(zip(wrt, grads))
        gradients = tuple(
            _laid_out(
                _place(
                    _in_dtype(by_name[name], dtype_of(values[i])),
                    devices.get(i, device),
                    device,
                ),
                getattr(value, "layout", None),
            )
            if name in by_name
            else None
            for i, (name, value) in enumerate(zip(call.names, call.values))
        )
        return _observed("Vjp", function.__name__, gradients)

    out = _laid_out_result(_as_tensor(out, device), program)
    return _observed("Vjp", function.__name__, out), pullback


def _vjp_over_leaves(function: Callable, call: _Call, trees: dict):
    """``vjp`` of a call passing pytrees (``trees``: parameter -> structure) with
    floating point leaves: the pullback gives each of them a gradient of its
    structure (None for the leaves that are not floating point)."""
    leaf_call = pytrees.leaf_call(function, call.names, call.values, trees)
    positional, keywords = leaf_call.arguments()
    out, leaves_pullback = vjp(leaf_call.function, *positional, **keywords)
    parameters = [parameter for parameter, _, _ in leaf_call.leaves()]

    def pullback(cotangent):
        by_leaf = dict(zip(parameters, leaves_pullback(cotangent)))
        return tuple(leaf_call.gradient(name, by_leaf) for name in call.names)

    return out, pullback


def _refuse_derivative_of_pytrees(f: Callable, trees: dict) -> None:
    if isinstance(f, Transformed):
        raise GradError(
            f"ppto cannot differentiate the derivative {f.__name__} with respect to "
            f"{', '.join(map(repr, trees))}, a dict, list or tuple: write the "
            "function with one parameter per array for second derivatives"
        )


def _require_numbers(value, name: str, transform: str) -> None:
    """Each of a function's results is numbers (``vjp`` and ``jvp`` handed back
    ``None`` or a string as a Tensor of dtype object or <U4, with a "tangent"
    of ``''`` or a pullback refusing every cotangent)."""
    results = _leaves(value)
    for number, result in enumerate(results):
        kind = getattr(getattr(result, "dtype", None), "kind", None)
        if kind in ("O", "U", "S") or (
            kind is None and not isinstance(result, (int, float, complex, np.number))
        ):
            which = f"result {number}" if len(results) > 1 else "its result"
            raise GradError(
                f"ppto.{transform} of {name}: {which} is {repr(result)[:40]}, not a "
                "number or an array of numbers: return only the values to "
                "differentiate"
            )


def _check_tangent_shapes(name: str, value, tangent) -> None:
    """Each result's tangent has the result's shape: a tangent rule giving one of
    another shape (``dx[0]`` for a matrix) came back as the tangent."""
    values, tangents = _leaves(value), _leaves(tangent)
    for number, (out, pushed) in enumerate(zip(values, tangents)):
        if hasattr(pushed, "shape") and np.shape(pushed) != np.shape(out):
            which = f"result {number}" if len(values) > 1 else "the result"
            raise GradError(
                f"jvp of {name}: the tangent of {which} came out with shape "
                f"{tuple(np.shape(pushed))}, but {which} has shape "
                f"{tuple(np.shape(out))}: a tangent rule gave a tangent of another "
                "shape than its operator's result (ppto.check_grad(op, *inputs) "
                "on the operators with rules of their own finds it)"
            )


def _numbers(value) -> bool:
    """Whether ``value`` is nested lists of numbers (one array, written out)."""
    if type(value) is list:
        return all(map(_numbers, value))
    return isinstance(value, (bool, int, float, np.generic))


def _raw(value):
    """The arrays of a (co)tangent: a list's items unwrapped too (generated code
    takes a list of results' cotangents as a list of arrays), at any depth: a
    tuple holding a list, as a list holding a tuple."""
    # Not merged into lower._unwrap, which lowered code applies to what a user's
    # function returns: that one hands a list back as it is, the same object
    # with its items untouched (a helper's list of tensors stays one), and keeps
    # a named tuple's class. Unwrapping lists there would change what lowered
    # code gets; a cotangent here is the user's own, read into a new list anyway.
    if type(value) is list:
        return [_raw(item) for item in value]
    if type(value) is tuple:
        return tuple(_raw(item) for item in value)
    return _unwrap(value)


def _rows_for_a_list(cotangent, out):
    """A cotangent given as one array for a list of results of one shape (as NumPy
    reads the list, stacked) split into its rows, one per result; else as given."""
    if type(out) is tuple and type(cotangent) is tuple and len(out) == len(cotangent):
        return tuple(_rows_for_a_list(c, o) for c, o in zip(cotangent, out))
    if type(out) is not list or isinstance(cotangent, (list, tuple)):
        return cotangent
    shapes = {tuple(np.shape(_unwrap(item))) for item in out}
    given = tuple(np.shape(_unwrap(cotangent)))
    if len(shapes) == 1 and given == (len(out), *shapes.pop()):
        return [cotangent[number] for number in range(len(out))]
    return cotangent


def _check_cotangent(cotangent, out, where: str) -> None:
    """A cotangent has the structure and shapes of ``out`` (else the pullback would
    hand back gradients of other shapes, or fail inside generated code)."""
    if isinstance(out, (tuple, list)):
        kind = type(out).__name__
        if type(cotangent) is not type(out) or len(cotangent) != len(out):
            given = (
                f"a {type(cotangent).__name__} of {len(cotangent)}"
                if isinstance(cotangent, (tuple, list))
                else type(cotangent).__name__
            )
            raise ShapeError(
                f"vjp: {where} is a {kind} of {len(out)} values, so the cotangent "
                f"must be a {kind} of {len(out)}; got {given}"
            )
        for number, (part, value) in enumerate(zip(cotangent, out)):
            _check_cotangent(part, value, f"output {number}")
        return
    _require_shape_of(cotangent, out, f"vjp: the cotangent of {where}", where)


def _require_shape_of(value, like, what: str, named: str) -> None:
    """``value`` (``what``, e.g. "jvp: the tangent of 'x'") has the shape of
    ``like`` (``named``), else ShapeError."""
    expected, given = np.shape(_unwrap(like)), np.shape(_unwrap(value))
    if tuple(given) != tuple(expected):
        raise ShapeError(
            f"{what} has shape {tuple(given)}, but {named} has shape {tuple(expected)}"
        )


def _constant_float_tree(value) -> bool:
    """A dict, list or tuple holding a dict whose leaves are all floating point
    (a list or tuple of arrays alone is read as a sequence already)."""
    if not pytrees.is_pytree(value) or not _holds_dict(value):
        return False
    return all(map(_is_float, pytrees.leaves(value)))


def _holds_dict(value) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, (list, tuple)) and any(map(_holds_dict, value))


def _is_float(value) -> bool:
    if isinstance(value, float):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind == "f"


def _cotangent_on(cotangent, device: Device, why: str = "pullback", like=None):
    """A cotangent (or tangent) on ``device``; a Python or NumPy scalar is made
    there, as operators take scalars, not copied through the ledger (which
    recorded pullback(1.0) as a transfer and refused it under policy 'error'), in
    the dtype of ``like`` (the output, or the primal), where that is floating point:
    pullback(1.0) of a float32 output computes in float32. The tangent of a Python
    float (``like``) stays a Python float, weak as its primal."""
    if isinstance(cotangent, tuple):
        likes = like if isinstance(like, tuple) else (None,) * len(cotangent)
        return tuple(
            _cotangent_on(c, device, why, part) for c, part in zip(cotangent, likes)
        )
    if type(cotangent) is list and not _numbers(cotangent):  # (a list of results')
        likes = like if isinstance(like, list) else [None] * len(cotangent)
        return [
            _cotangent_on(c, device, why, part) for c, part in zip(cotangent, likes)
        ]
    if type(like) is float and isinstance(cotangent, (int, float, np.generic)):
        return float(cotangent)
    if isinstance(cotangent, Tensor):
        if cotangent.device != device:
            return Tensor(
                move(cotangent.data, cotangent.device, device, why, True), device
            )
        return cotangent
    if isinstance(cotangent, (bool, int, float, np.generic)):
        floating = _is_array(like) and dtype_of(like).kind == "f"
        scalar = np.asarray(cotangent, dtype_of(like) if floating else None)
        return Tensor(backend_for(device).from_host(scalar, device.index), device)
    # an array of any backend (a CuPy array refuses np.asarray), or nested lists
    raws, source = gather_inputs(why, [cotangent])
    if source == device:
        return Tensor(raws[0], device)
    return Tensor(move(raws[0], source, device, why, True), device)


def jvp(f: Callable, primals: Sequence, tangents: Sequence):
    """Forward mode: ``(f(*primals), J @ tangents)``, by source transformation.

    ``tangents`` has one entry per primal (``None`` for an argument held constant).

    >>> out, tangent = ppto.jvp(np.sin, (x,), (v,))     # doctest: +SKIP
    """
    for which, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, (tuple, list)):  # (an array's rows were taken
            # for the arguments: "too many positional arguments")
            raise GradError(
                f"jvp takes its {which} as a tuple or list, one per argument, "
                f"got {type(given).__name__}: write ppto.jvp(f, (x,), (v,))"
            )
    result = _jvp(f, primals, tangents)
    keys = _dict_result_keys(f)
    if keys is not None:  # (a dict's values come back as a list: see there)
        result = tuple(dict(zip(keys, part)) for part in result)
    return _observed("Jvp", _target_function(f).__name__, result)


def _jvp(f: Callable, primals: Sequence, tangents: Sequence):
    """``jvp`` without telling the result's observers (hessian's own calls)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise GradError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    function = _target_function(f)
    names = list(_signature(function).parameters)[: len(primals)]
    # (one held constant as grad takes it: see Transformed.pytree_arguments)
    trees = {
        n: pytrees.structure(p, n)
        for n, p, t in zip(names, primals, tangents)
        if pytrees.is_pytree(p) and (t is not None or _constant_float_tree(p))
    }
    if isinstance(f, Transformed):  # (a gradient's own pytree arguments too)
        trees.update(f.pytree_arguments(_Call(function, primals, {})))
    if trees:
        return _jvp_over_leaves(f, function, names, primals, tangents, trees)
    wrt = [n for n, p, t in zip(names, primals, tangents) if t is not None]
    for name_ in wrt:
        position = names.index(name_)
        _check_differentiable(name_, primals[position])
        _check_plain_array("tangent", tangents[position], f"the tangent of {name_!r}")
        _check_tangent(name_, primals[position], tangents[position])
    if not wrt:
        raise GradError(
            "jvp: every tangent is None, so there is nothing to push forward"
        )
    transformed = Transformed(f, wrt, "jvp", with_value=True)
    call_, values, ranks, devices, device = transformed.prepare(primals, {})
    if streams.in_use:  # (tangents are read by generated code too)
        streams.ready(tangents)
    raw_tangents = [
        _unwrap(
            _cotangent_on(
                tangents[names.index(n)], device, "jvp tangent", values[names.index(n)]
            )
        )
        for n in wrt
    ]
    program, _ = transformed.program(ranks)
    parameters = program.tangent_parameters[program.entry]
    value, tangent = transformed.run(
        0, ranks, device, values, dict(zip(parameters, raw_tangents))
    )
    _require_numbers(value, function.__name__, "jvp")
    if isinstance(f, Transformed):  # (a gradient: in its argument's dtype, as
        # calling f gives it, and so its tangent)
        dtypes = [dtype_of(values[call_.names.index(n)]) for n in f.wrt]
        value = _gradients_in_dtypes(value, f, dtypes)
    tangent = _dtype_of(tangent, value)
    _check_tangent_shapes(function.__name__, value, tangent)
    # (results of their own: not the caller's primal or tangent, nor each other)
    value, tangent = _owned((value, tangent), (values, raw_tangents))
    value = _as_tensor(value, device)
    tangent = _as_tensor(tangent, device)
    if isinstance(f, Transformed):  # (jvp of a gradient: a Hessian-vector product)
        layouts = [
            getattr(primals[names.index(n)], "layout", None) if n in names else None
            for n in f.wrt
        ]
        return (
            _laid_out_gradients(value, f, layouts),
            _laid_out_gradients(tangent, f, layouts),
        )
    return _laid_out_result(value, program), _laid_out_result(tangent, program)


def _jvp_over_leaves(f, function, names: list, primals, tangents, trees: dict):
    """``_jvp`` of primals that include pytrees (``trees``: parameter ->
    structure), each tangent of its primal's structure (None at a leaf held
    constant, as for an argument); of a gradient (a Hessian-vector product), its
    value and tangent each in its arguments' structures."""
    for name, tree in trees.items():
        tangent = tangents[names.index(name)]
        if tangent is None:
            continue  # (a gradient's argument held constant)
        if not pytrees.is_pytree(tangent) or pytrees.structure(tangent) != tree:
            raise ShapeError(
                f"jvp: the tangent of {name!r} must be {pytrees.described(tree)}, as "
                f"{name!r} is; got {pytrees.described(pytrees.structure(tangent))}"
            )
    leaf_call = pytrees.leaf_call(function, names, primals, trees)
    leaf_tangents = []
    for name, primal, tangent in zip(names, primals, tangents):
        if name not in trees:
            leaf_tangents.append(tangent)
        elif tangent is None:
            leaf_tangents += [None] * len(pytrees.leaves(primal))
        else:
            leaf_tangents += pytrees.leaves(tangent)
    leaf_primals = []
    for (_, leaf, path), tangent in zip(leaf_call.leaves(), leaf_tangents):
        if tangent is not None:
            _check_differentiable(path, leaf)
        leaf_primals.append(leaf)
    if not isinstance(f, Transformed):
        return _jvp(leaf_call.function, leaf_primals, leaf_tangents)
    gradient, _, wrt = f.over_leaves(leaf_call, trees)
    value, tangent = _jvp(gradient, leaf_primals, leaf_tangents)
    return f.regrouped(value, leaf_call, wrt), f.regrouped(tangent, leaf_call, wrt)


def _gradients_in_dtypes(value, gradient: Transformed, dtypes: list):
    """What ``gradient`` (a ppto.grad or value_and_grad) computes, each gradient
    in its argument's dtype (``dtypes``), as calling ``gradient`` gives it: the
    gradient of a float32 argument is float32 where the function computed in
    float64, in a Hessian-vector product too."""
    if gradient.with_value:
        result, grads = value
    else:
        grads = value
    if len(gradient.wrt) == 1:  # (one gradient comes bare: see below)
        grads = _in_dtype(grads, dtypes[0])
    else:
        grads = type(grads)(_in_dtype(g, d) for g, d in zip(grads, dtypes))
    return (result, grads) if gradient.with_value else grads


def _laid_out_gradients(value, gradient: Transformed, layouts: list):
    """What ``gradient`` (a ppto.grad or value_and_grad) computes, or its tangent,
    each gradient tagged with its argument's layout (``layouts``), as calling
    ``gradient`` tags it: the tangent of an nhwc image's gradient is nhwc."""
    if gradient.with_value:
        value, grads = value
    else:
        grads = value
    # the generated code returns one gradient bare (as ``finish`` reads it), also
    # for a wrt of one name in a tuple (iterating it split the gradient into rows)
    grads = (grads,) if len(gradient.wrt) == 1 else tuple(grads)
    grads = tuple(
        _laid_out(g, layout) if isinstance(g, Tensor) else g
        for g, layout in zip(grads, layouts, strict=True)
    )
    grads = grads[0] if gradient.single else grads
    return (value, grads) if gradient.with_value else grads


def _check_tangent(name: str, primal, tangent) -> None:
    """A tangent has its primal's structure and shapes: one of another shape
    broadcast silently in the generated code (a (2, 2) tangent of a (2,) argument
    gave a (2, 2) tangent of a (2,) result) or failed inside it."""
    if isinstance(primal, (list, tuple)):
        if not isinstance(tangent, (list, tuple)) or len(tangent) != len(primal):
            raise ShapeError(
                f"jvp: the tangent of {name!r} must be a list of {len(primal)} "
                f"values, as {name!r} is; got {type(tangent).__name__}"
            )
        for number, (part, value) in enumerate(zip(tangent, primal)):
            _check_tangent(f"{name}[{number}]", value, part)
        return
    _require_shape_of(tangent, primal, f"jvp: the tangent of {name!r}", repr(name))


def _dtype_of(tangent, value):
    """A tangent in its floating point output's dtype, as gradients are in their
    argument's: float64 constants in a rule (the log of pow's Python number base)
    must not make the tangent of a float32 result float64."""
    if isinstance(value, (tuple, list)) and isinstance(tangent, (tuple, list)):
        return type(tangent)(_dtype_of(t, v) for t, v in zip(tangent, value))
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind != "f" or getattr(tangent, "dtype", None) is None:
        return tangent
    if tangent.dtype == dtype:
        return tangent
    _require_real(tangent, dtype)
    return tangent.astype(dtype)


def hessian(f: Callable, wrt: int | str = 0) -> Callable:
    """The Hessian of a scalar function with respect to one argument, for small
    inputs: forward mode over the generated gradient, one basis vector at a time.
    The result has shape ``x.shape + x.shape``."""
    if isinstance(wrt, (tuple, list)):
        raise GradError(
            "ppto.hessian takes one argument at a time (wrt=0 or a name): the "
            "Hessian of several is its blocks, hessian(f, wrt=i) for each i and, "
            "across them, jvp of grad(f, wrt=i) along argument j"
        )
    gradient = grad(f, wrt)
    function = _target_function(f)
    (name_,) = _wrt_names(function, wrt)

    def compute(*args: Any, **kwargs: Any) -> Tensor:
        call_ = _Call(function, args, kwargs)
        position = call_.names.index(name_)
        given = call_.values[position]
        if pytrees.is_pytree(given):
            raise GradError(
                f"ppto.hessian takes an array argument; {name_!r} is a "
                f"{type(given).__name__}: for Hessian-vector products use "
                f"ppto.jvp(ppto.grad(f), primals, tangents), a tangent of "
                f"{name_!r}'s structure"
            )
        dtype = getattr(given, "dtype", np.float64)
        device = _device_of(given)
        # the point's values on the host (a CuPy array refuses np.asarray)
        point = _as_tensor(given, device).numpy().astype(float)
        columns = []
        states = random_states(function, *call_.values)
        for index in range(point.size):
            if index:  # (each column draws what the first drew: see rewind)
                rewind(states)
            basis = np.zeros(point.size)
            basis[index] = 1.0
            tangents = [None] * len(call_.values)
            tangents[position] = basis.reshape(point.shape)
            _, column = _jvp(gradient, call_.values, tangents)  # (not a result)
            columns.append(np.asarray(column).reshape(-1))
        # (an empty point has no column: its Hessian is empty, of that shape)
        matrix = np.stack(columns, axis=-1) if columns else np.zeros((0, 0))
        matrix = matrix.reshape(point.shape + point.shape)
        matrix = matrix.astype(dtype)  # in the argument's dtype, as gradients are
        return _observed(
            "Hessian", function.__name__, _as_tensor(matrix, CPU).to(device)
        )

    compute.__name__ = f"hessian_of_{function.__name__}"
    return compute
