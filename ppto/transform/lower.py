"""Lowering: the generic generated program (calls to ppto operators on tensors) turned
into the program that runs on one backend's raw arrays.

Each operator call becomes the backend's own ``<op>_impl`` if it has one, else the
operator's generic implementation: inlined as an ``xp`` expression when its body is a
single ``return`` (``tanh(t)`` -> ``xp.tanh(t)``), called with ``xp`` otherwise. Python
arithmetic, subscripts and attributes already mean the same on raw arrays. Calls of
user functions get wrappers that return raw arrays. Nothing dispatches per operator.
"""

from __future__ import annotations

import ast
import inspect
import re
import threading
import types
from functools import cache

import gast
import numpy as np

from ppto.errors import BackendError, PptoError
from ppto.fusion.kernels import LARGE
from ppto.ops.primitive import OperatorDef, Primitive
from ppto.runtime.backends import Backend, device_of, where_into
from ppto.runtime.tensor import Tensor
from ppto.transform import trees
from ppto.transform.accumulate_in_place import accumulate_in_place
from ppto.transform.emit import compile_source, rendered_functions
from ppto.transform.fuse import FUSED_KINDS, fuse_later, fuse_program
from ppto.transform.mask_in_place import write_masks_in_place
from ppto.transform.release import release_dead_values
from ppto.transform.resolve import hashable
from ppto.transform.source import function_source, returns_a_dict
from ppto.transform.syntax import to_gast
from ppto.transform.trees import bound_arguments, clone, name_counts


@cache
def _impl_expression(impl):
    """``(parameters, expression)`` if ``impl`` is ``return <expr>``, else None. (The
    function is parsed with ``ast`` and only the expression converted to gast.)"""
    try:
        source = function_source(impl)
    except (OSError, TypeError):
        return None
    definition = ast.parse(source).body[0]
    body = [s for s in definition.body if not _is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    if definition.args.kwonlyargs or definition.args.vararg:
        return None
    parameters = [argument.arg for argument in definition.args.args]
    return parameters, to_gast(body[0].value)


@cache
def _impl_parameters(impl) -> tuple:
    """The parameters of an operator's implementation after ``xp`` (read once: every
    application of the operator asks, and ``inspect.signature`` is slow)."""
    return tuple(inspect.signature(impl).parameters)[1:]


def _local_names(definition) -> set:
    """The names ``definition`` binds or reads, and its parameters."""
    return set(name_counts(definition, None)) | {
        argument.id for argument in definition.args.args
    }


def _is_docstring(statement) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(
        getattr(statement, "value", None), ast.Constant
    )


def raw_result(function):
    """Wrap a user function so it returns raw arrays inside lowered code (a dict
    as the list of its values: the code reads it so, see ``returns_a_dict``)."""
    if returns_a_dict(function):

        def run(*args, **kwargs):
            return [_unwrap(value) for value in function(*args, **kwargs).values()]

    else:

        def run(*args, **kwargs):
            return _unwrap(function(*args, **kwargs))

    run.__name__ = getattr(function, "__name__", "function")
    return run


def _unwrap(value):
    if isinstance(value, Tensor):
        return value.data
    if isinstance(value, tuple):
        items = [_unwrap(v) for v in value]
        # (a named tuple keeps its class: the caller reads its fields)
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


class Lowering(trees.Transformer):
    """Rewrites operator calls of one generated function for one backend."""

    def __init__(
        self,
        namespace: dict,
        lowered: dict,
        backend: Backend,
        kind: str,
        module_name: str = "xp",
    ):
        self.namespace = namespace
        self.lowered = lowered
        self.backend = backend
        self.kind = kind
        self.module_name = module_name  # the backend's array namespace's name
        self.locals: set[str] = set()
        self.locals_of: dict[str, set] = {}  # function name -> its local names

    def prepared(self, definition):
        """A copy of the program's ``definition`` (other lowerings read it again)
        with its loop accumulators added into in place on the CPU. Done before
        fusion: fused, ``dW = dW + A @ B`` would be a kernel making a new array
        each turn (``matmul_add``), 2% of the benchmark RNN's gradient."""
        definition = clone(definition)
        if self.kind == "cpu" and self.backend.override("add") is None:
            self.locals = self.locals_of[definition.name] = _local_names(definition)
            accumulate_in_place(definition, self.makes_zeros, self.bind_helper)
        return definition

    def function(self, definition, fused: bool = False):
        """``definition`` (a tree of its own: see ``prepared``) lowered in place;
        ``fused``: changed since ``prepared`` (its names are read again)."""
        known = None if fused else self.locals_of.get(definition.name)
        self.locals = known if known is not None else _local_names(definition)
        return self.visit(definition)

    def finished(self, definition):
        """``definition`` (lowered) with its dead values released and, on the CPU,
        masked gradients written into their dying inputs."""
        definition = release_dead_values(definition)
        if self.kind == "cpu" and self.backend.override("where") is where_into:
            lowered = self.lowered["namespace"]
            write_masks_in_place(
                definition,
                lambda name: lowered.get(name) is where_into,
                self.bind_helper,
            )
        return definition

    def makes_zeros(self, node) -> bool:
        """Whether ``node`` is a call of ppto's ``zeros_like`` (a new array)."""
        from ppto.ops.shape import zeros_like

        return (
            isinstance(node, gast.Call)
            and _static_read(node.func, self.namespace) is zeros_like
        )

    def bind_helper(self, function, name: str) -> str:
        return self.bind(function, name, key=("helper", name))

    def visit_Call(self, node):
        self.generic_visit(node)
        target = _static_read(node.func, self.namespace)
        if _user_callable(target) and _held_by_an_object(node.func, self.namespace):
            # (``HELPERS[0](y)``, ``NS.helper(y)``): what the object holds when the
            # code runs, not when it was lowered (nothing watches an object's
            # attributes and items for another value, as globals are watched)
            return self.raw_results(node)
        if isinstance(target, Primitive):
            return self.lower_primitive(node, target)
        constructor = _CONSTRUCTORS.get(target) if hashable(target) else None
        if constructor is not None and _reads_as_numpy(node, constructor):
            # tensors made inside generated code are the backend's raw arrays
            node.func = gast.Attribute(
                gast.Name(self.module_name, gast.Load(), None, None),
                constructor,
                gast.Load(),
            )
            return node
        if _from_ppto(target):
            label = self.bind(
                raw_result(target),
                getattr(target, "__name__", "call") + "_raw",
                key=("raw", id(target)),
            )
            node.func = gast.Name(label, gast.Load(), None, None)
            return node
        if isinstance(target, OperatorDef) or (
            inspect.isfunction(target) and _is_user(target)
        ):
            function = getattr(target, "function", target)
            node.func = gast.Name(
                self.bind(
                    raw_result(function),
                    function.__name__ + "_raw",
                    key=("raw", id(function)),
                ),
                gast.Load(),
                None,
                None,
            )
        elif _user_callable(target):  # a callable object, a partial
            return self.raw_results(node)
        return node

    def raw_results(self, call):
        """``call`` of a user's callable, its results read as arrays when it runs
        (it may return tensors: generated code computes on arrays)."""
        label = self.bind(_unwrap, "raw_results", key=("raw_results",))
        return gast.Call(gast.Name(label, gast.Load(), None, None), [call], [])

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr == "device" and isinstance(node.ctx, gast.Load):
            # (a raw array's device as its tensor's: see backends.device_of)
            label = self.bind(device_of, "device_of", key=("device_of",))
            return gast.Call(
                gast.Name(label, gast.Load(), None, None), [node.value], []
            )
        return self.raw_if_tensor(node)

    def visit_Subscript(self, node):
        self.generic_visit(node)
        return self.raw_if_tensor(node)

    def raw_if_tensor(self, node):
        """A tensor reached through a module-level object (``cfg.W``,
        ``weights[0]``) is read as its array, as a module-level tensor is: generated
        code computes on raw arrays. Read when the code runs (the object's
        attribute may be rebound), so the read is wrapped, not replaced."""
        if not isinstance(node.ctx, gast.Load):
            return node
        if not isinstance(_static_read(node, self.namespace), Tensor):
            return node
        label = self.bind(raw_value, "raw_value", key=("raw_value",))
        return gast.Call(gast.Name(label, gast.Load(), None, None), [node], [])

    def visit_BinOp(self, node):
        """``a @ b`` etc. run the backend's own operator where it overrides one."""
        from ppto.transform.normalize import BINARY_OPERATORS

        self.generic_visit(node)
        op = BINARY_OPERATORS.get(type(node.op))
        own = self.backend.override(op.name) if op is not None else None
        if own is None:
            return node
        label = self.bind(own, f"{op.name}_impl", key=("own", op.name))
        return gast.Call(
            gast.Name(label, gast.Load(), None, None), [node.left, node.right], []
        )

    def lower_primitive(self, node, op: Primitive):
        own = self.backend.override(op.name)
        if own is not None:
            node.func = gast.Name(
                self.bind(own, f"{op.name}_impl", key=("own", op.name)),
                gast.Load(),
                None,
                None,
            )
            return node
        if self.backend.xp is None:
            raise BackendError(
                f"backend {self.kind!r} has no implementation of {op.name!r}: add "
                f"{op.name}_impl to it, or give it an array namespace xp"
            )
        arguments = self.bind_arguments(node, op)
        names = _impl_parameters(op.impl)
        impl = op.impl
        into = getattr(op, "into", None)
        if (
            into is not None
            and self.kind in ("cpu", "cuda")  # (whose constructors make new arrays)
            and _made_here(arguments[names[0]], self.module_name)
        ):
            # the operator's first argument is an array made for it alone: its
            # implementation may write into it instead of copying it first
            impl = into
        else:
            inlined = self.inline(op, arguments)
            if inlined is not None:
                return inlined
        suffix = "_into" if impl is into else "_impl"
        impl = self.bind(impl, f"{op.name}{suffix}", key=(suffix, op.name))
        xp = gast.Name(self.module_name, gast.Load(), None, None)
        return gast.Call(
            gast.Name(impl, gast.Load(), None, None),
            [xp] + [arguments[n] for n in names],
            [],
        )

    def bind_arguments(self, node, op: Primitive) -> dict:
        names = _impl_parameters(op.impl)
        if op.positional:  # (a rule's pad(dY, 1): its positional order is NumPy's)
            written = node
            node = trees.passed_by_name(node, op.positional)
            if node is None:
                raise PptoError(
                    f"{gast.unparse(written).strip()}: ppto.{op.name} takes at most "
                    f"{len(op.positional)} positional arguments ({op.positional})"
                )
        bound = {p: a for p, a in bound_arguments(node, names) if p is not None}
        defaults = {**op.input_defaults, **op.defaults}  # (pad's constant_values)
        for name in names:
            if name not in bound:
                bound[name] = _literal(defaults.get(name))
        return bound

    def inline(self, op: Primitive, arguments: dict):
        found = _impl_expression(op.impl)
        if found is None:
            return None
        parameters, expression = found
        expression = clone(expression)
        uses: dict[str, int] = {}
        for node in trees.walk(expression):
            if isinstance(node, gast.Name):
                uses[node.id] = uses.get(node.id, 0) + 1
        for name in parameters[1:]:
            value = arguments[name]
            if uses.get(name, 0) > 1 and not isinstance(
                value, (gast.Name, gast.Constant)
            ):
                return None
        globals_ = op.impl.__globals__
        renames = {}
        for name in uses:
            if name in parameters:
                continue
            if name not in globals_:
                return None
            bound = self.bind(globals_[name], name, key=("global", id(globals_[name])))
            renames[name] = bound
        substitute = _Substitute(parameters, arguments, renames, self.module_name)
        return substitute.visit(expression)

    def bind(self, value, preferred: str, key) -> str:
        if key in self.lowered["keys"]:
            return self.lowered["keys"][key]
        preferred = identifier(preferred)
        label, number = preferred, 0
        while label in self.lowered["namespace"] or label in self.locals:
            if self.lowered["namespace"].get(label) is value:
                break
            number += 1
            label = f"{preferred}_{number}"
        self.lowered["namespace"][label] = value
        self.lowered["keys"][key] = label
        return label


class _Substitute(trees.Transformer):
    """An implementation's expression written for the lowered code: its array
    namespace parameter read as the lowered code's (``xp``), its parameters as the
    call's arguments, its globals by their names there. (At module level: a class
    made for every inlined call cost more than the substitution.)"""

    def __init__(
        self, parameters: list, arguments: dict, renames: dict, module_name: str
    ) -> None:
        self.namespace_parameter = parameters[0]
        self.parameters = parameters
        self.arguments = arguments
        self.renames = renames
        self.module_name = module_name

    def visit_Name(self, node):
        if node.id == self.namespace_parameter:
            return gast.Name(self.module_name, gast.Load(), None, None)
        if node.id in self.arguments and node.id in self.parameters:
            return clone(self.arguments[node.id])
        if node.id in self.renames:
            return gast.Name(self.renames[node.id], gast.Load(), None, None)
        return node


def identifier(name: str) -> str:
    """``name`` as a Python identifier for generated code: a function's
    ``__name__`` may be any string (``<lambda>``, a callable's own)."""
    name = re.sub(r"\W", "_", name)
    return name if name[:1].isidentifier() else f"_{name}"


def _constructors() -> dict:
    from ppto.runtime import constructors
    from ppto.runtime.tensor import tensor

    return {
        constructors.zeros: "zeros",
        constructors.ones: "ones",
        constructors.full: "full",
        constructors.arange: "arange",
        constructors.eye: "eye",
        tensor: "asarray",
    }


_CONSTRUCTORS = _constructors()

# What a constructor's call may give for it to mean the same as the backend's
# function of that name: the positional arguments the two read alike, and the
# keywords they share. ppto.tensor(data, "cpu") is NumPy's asarray(data, dtype=
# "cpu"), ppto.zeros(shape, dtype, "cpu") its zeros(shape, dtype, order="cpu"):
# such calls stay calls of ppto's own (its device= calls too).
_NUMPY_READING = {
    "zeros": (2, {"shape", "dtype"}),
    "ones": (2, {"shape", "dtype"}),
    "full": (3, {"shape", "fill_value", "dtype"}),
    "arange": (4, {"start", "stop", "step", "dtype"}),
    "eye": (4, {"N", "M", "k", "dtype"}),
    "asarray": (1, {"dtype"}),
}


def _reads_as_numpy(node, constructor: str) -> bool:
    """Whether a call of ppto's ``constructor`` means the same as the backend's
    function of that name (see ``_NUMPY_READING``)."""
    positional, keywords = _NUMPY_READING[constructor]
    return (
        len(node.args) <= positional
        and not any(isinstance(arg, gast.Starred) for arg in node.args)
        and all(keyword.arg in keywords for keyword in node.keywords)
    )


def _from_ppto(target) -> bool:
    """A ppto function that is not an operator (its results are tensors)."""
    module = getattr(target, "__module__", "") or ""
    return (
        callable(target)
        and module.startswith("ppto.")
        and not isinstance(target, OperatorDef)
        and not module.startswith("ppto.fusion")
        and not module.startswith("ppto.ops")
    )


def _is_user(function) -> bool:
    module = getattr(function, "__module__", "") or ""
    return module.split(".")[0] not in {"ppto", "numpy", "cupy", "math"}


def _user_callable(target) -> bool:
    """Whether ``target`` is a user's callable, or an operator: what it returns may
    be tensors. (Builtins and NumPy's methods, of no module, return no tensors; a
    class makes an object of its own, which holds what it was given.)"""
    if isinstance(target, (Primitive, OperatorDef)) or _from_ppto(target):
        return True
    if inspect.isclass(target):
        return False
    module = getattr(target, "__module__", None)
    return (
        callable(target)
        and isinstance(module, str)
        and module.split(".")[0] not in {"ppto", "numpy", "cupy", "math", "builtins"}
    )


def _held_by_an_object(node, namespace) -> bool:
    """Whether ``node`` is an attribute or item of a module-level object other than
    a module (``NS.helper``, ``HELPERS[0]``; not ``ppto.nn.relu``)."""
    if isinstance(node, gast.Subscript):
        return True
    if not isinstance(node, gast.Attribute):
        return False
    if not isinstance(_static_read(node.value, namespace), types.ModuleType):
        return True
    return _held_by_an_object(node.value, namespace)


def _literal(value):
    if isinstance(value, tuple):
        return gast.Tuple([_literal(v) for v in value], gast.Load())
    return gast.Constant(value, None)


def raw_value(value):
    """A tensor as its array (generated code computes on arrays), else the value."""
    return value.data if isinstance(value, Tensor) else value


def _static_read(node, namespace):
    """The value an attribute or constant subscript of a module-level object has
    now (None where it is not one; module-level names are no local's)."""
    if isinstance(node, gast.Name):
        return namespace.get(node.id)
    if isinstance(node, gast.Attribute):
        base = _static_read(node.value, namespace)
        return getattr(base, node.attr, None) if base is not None else None
    if not isinstance(node, gast.Subscript) or not isinstance(
        node.slice, gast.Constant
    ):
        return None
    container = _static_read(node.value, namespace)
    if not isinstance(container, (list, tuple, dict)):  # (no user's __getitem__ run)
        return None
    try:
        return container[node.slice.value]
    except (IndexError, KeyError, TypeError):
        return None


FRESH = {"zeros_like", "zeros", "ones_like", "ones", "full_like", "full", "empty_like"}


def _made_here(node, module_name: str) -> bool:
    """Whether ``node`` is a call of the array namespace (named ``module_name``)
    that makes a new array (``xp.zeros_like(x)``): as an argument, nothing but its
    callee holds it."""
    return (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Attribute)
        and isinstance(node.func.value, gast.Name)
        and node.func.value.id == module_name
        and node.func.attr in FRESH
    )


def fuses(program, kind: str) -> bool:
    """Whether ``lower`` fuses ``program`` for a backend of ``kind`` by default."""
    from ppto.fusion.tuning import fusion_policy
    from ppto.runtime.precision import get_precision

    # small arrays gain nothing from CPU kernels' bookkeeping; on a GPU every
    # launch saved counts
    sizes = [int(np.prod(shape)) for shape in program.shapes.values()]
    small = bool(sizes) and max(sizes) < LARGE
    return (
        get_precision() != "strict"
        and fusion_policy() != "off"
        and kind in FUSED_KINDS
        and (kind == "cuda" or (kind == "cpu" and not small))
    )


def lower(
    program,
    backend: Backend,
    kind: str,
    fused: bool | None = None,
    lazy: bool = False,
):
    """``(source, namespace)`` of ``program`` lowered for ``backend``; fused kernels
    replace operator chains on the CPU and on CUDA unless precision is 'strict' (a
    backend with no fused implementation runs the unfused code). ``lazy``: regions'
    fallbacks (run only where a region's code does not apply) are fused, lowered
    and compiled on first use, and are not in the source."""
    namespace = dict(program.refs.namespace)
    lowered = {"namespace": {}, "keys": {}}
    lowering = Lowering(namespace, lowered, backend, kind)
    functions = [lowering.prepared(f) for f in program.functions]
    module_name = _module_name(functions, namespace, lowering.locals_of)
    lowering.module_name = module_name
    if fused is None:
        fused = fuses(program, kind)
    fused = fused and kind in FUSED_KINDS
    later: dict | None = {} if lazy else None
    kernels: dict = {}
    if fused:
        functions, kernels = fuse_program(
            functions,
            namespace,
            program.value_shapes,
            kind,
            program.size_hints,
            copied=True,
            later=later,
        )
        namespace.update(kernels)
    functions = [lowering.finished(lowering.function(f, fused)) for f in functions]
    source, table = rendered_functions(functions)
    final = dict(namespace)
    final.update(lowered["namespace"])
    final[module_name] = backend.xp
    label = f"{program.entry} lowered for {kind}"
    compile_source(source, program.entry, final, label, table)
    for value in final.values():
        if not hasattr(value, "fallback_name"):
            continue  # (a region: its original statements)
        if later and value.fallback_name in later:
            fallback, likely = later[value.fallback_name]
            parts = (fallback, likely, lowering, kernels, final, kind, label)
            value.make_fallback = _LateFallback(parts)
        else:
            value.fallback = final[value.fallback_name]
    return source, final


def _module_name(functions, namespace: dict, known: dict) -> str:
    """The name lowered code reads the backend's array namespace by: ``xp``, unless
    the user's code has a name ``xp`` of its own (an argument, a local, a global it
    reads: ``np.interp(q, xp, fp)``), which the module must neither shadow nor be
    shadowed by."""
    taken = set(namespace)
    for definition in functions:  # (``known``: the local names prepared read)
        names = known.get(definition.name)
        taken |= names if names is not None else _local_names(definition)
    name, number = "xp", 0
    while name in taken:
        number += 1
        name = f"xp_{number}"
    return name


class _LateFallback:
    """A region's fallback left unfused by ``lower(..., lazy=True)``: called, it is
    fused, lowered and compiled into the program's namespace as ``lower`` would
    have done it with the program (the same source), once."""

    _lock = threading.Lock()  # (two threads first running it make it once)

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self.made = None

    def __call__(self):
        with self._lock:
            if self.made is None:
                self.made = self.make(*self.parts)
                self.parts = None
            return self.made

    @staticmethod
    def make(fallback, likely, lowering, kernels, final, kind, label):
        fused = fuse_later(fallback, lowering.namespace, kernels, kind, likely)
        lowering.namespace.update(kernels)
        function = lowering.finished(lowering.function(fused, True))
        source, table = rendered_functions([function])
        final.update(kernels)
        final.update(lowering.lowered["namespace"])
        return compile_source(source, fallback.name, final, label, table)
