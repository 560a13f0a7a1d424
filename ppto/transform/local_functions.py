"""Local functions and callable arguments, made functions ppto already knows how
to differentiate calls of.

A ``def`` inside the function, or a lambda assigned to a name or called on the
spot, is lifted out: it becomes a function of its own whose parameters are its own
followed by the enclosing variables it reads (its closure), and every call passes
them as they are at the call, which is what Python's closure reads (``layer(h)``
becomes ``layer(h, w)``), defaults filled in where the call omits them. Its
derivative is then generated like a module-level helper's, and the
gradient of a closed-over value flows back through the extra parameter. A callable
passed as an argument (``act=np.tanh``) is bound as the static value it is: the
code is specialised on it (``ppto.api`` keys the program on its identity).

What Python would evaluate differently is refused at the user's line: a local
function used as a value (returned, stored, passed on), defined twice, called
before its definition or outside the block defining it, calling itself, writing
enclosing variables (``nonlocal``), and a variable a default reads assigned
between the definition and a call (Python evaluated the default at the definition).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import types
from collections import ChainMap

import gast
import numpy as np

from ppto.ops.primitive import OperatorDef
from ppto.transform import trees
from ppto.transform.comprehensions import comprehensions_as_loops, rewritten_nodes
from ppto.transform.names import fresh_name
from ppto.transform.resolve import numpy_alias
from ppto.transform.source import (
    ParsedFunction,
    SourceMap,
    own_nodes,
    register_local_function,
)
from ppto.transform.trees import bound_arguments, clone, single_target

# callables code is specialised on where they are passed (act=np.tanh), as an
# argument of the function differentiated (ppto.api) or of a function it calls
_PASSED_CALLABLES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    np.ufunc,
    OperatorDef,
    functools.partial,
)


def passed_callable(value) -> bool:
    """Whether ``value``, passed as an argument, is a callable ppto specialises
    the code on (a function, ufunc, ppto operator or ``functools.partial``)."""
    return isinstance(value, _PASSED_CALLABLES) or numpy_alias(value) is not None


def passed_callables(call: gast.Call, parsed: ParsedFunction, resolve) -> dict:
    """The parameters of ``parsed`` that ``call`` passes a callable known where
    it is written (``resolve(argument)``: ``(found, value)``): name -> callable."""
    found = {}
    for parameter, argument in bound_arguments(call, parsed.parameters):
        if parameter is None:
            continue
        known, value = resolve(argument)
        if known and passed_callable(value):
            found[parameter] = value
    return found


def specialisation(parsed: ParsedFunction) -> tuple:
    """What ``parsed``'s code is specialised on besides its arguments' kinds: the
    callables its parameters were given (by identity, held by its namespace)."""
    return tuple(
        (name, id(parsed.namespace[name]))
        for name in parsed.parameters
        if name in parsed.bound
    )


def localised(parsed: ParsedFunction, statics: dict | None = None) -> ParsedFunction:
    """``parsed`` with its ``statics`` (parameter name -> callable passed) bound and
    its local functions lifted out (the module docstring); ``parsed`` itself when it
    has neither."""
    statics = {
        name: value
        for name, value in (statics or {}).items()
        if name in parsed.parameters and name not in trees.stores(parsed.tree.body)
    }
    if not statics and not any(
        isinstance(node, (gast.FunctionDef, gast.Lambda))
        for node in own_nodes(parsed.tree.body)
    ):
        return parsed
    tree = clone(parsed.tree)
    closure = dict(parsed.namespace.maps[0])
    namespace = ChainMap(closure, *parsed.namespace.maps[1:])
    bound = set(parsed.bound)
    taken = trees.stores(tree) | _names(tree) | set(namespace)
    # a parameter given a callable reads it from the namespace, as a global would
    # be read (the pipeline takes the names in bound for no local variables)
    for parameter, value in statics.items():
        closure[parameter] = value
        if isinstance(value, functools.partial):
            _PartialCalls(parameter, value, closure, taken).visit(tree)
    bound |= set(closure) - set(parsed.namespace.maps[0])
    lifter = _Lifter(parsed, tree, namespace, taken, frozenset(bound))
    for lifted in lifter.lift():
        closure[lifted.name] = lifted.fn
        bound.add(lifted.name)
    bound = frozenset(bound)
    return dataclasses.replace(parsed, tree=tree, namespace=namespace, bound=bound)


@dataclasses.dataclass
class _Local:
    """A local function as written: its definition (a ``def``, or a lambda) and
    the block and position of the statement defining it."""

    name: str
    node: gast.AST  # gast.FunctionDef or gast.Lambda
    block: list
    index: int
    closed: list = dataclasses.field(default_factory=list)  # enclosing names read

    @property
    def arguments(self) -> gast.arguments:
        return self.node.args

    @property
    def parameters(self) -> list:
        arguments = self.arguments
        return [a.id for a in arguments.posonlyargs + arguments.args]

    @property
    def keyword_only(self) -> list:
        return [a.id for a in self.arguments.kwonlyargs]


class _Lifter:
    def __init__(
        self, parsed: ParsedFunction, tree, namespace, taken: set, bound: frozenset
    ) -> None:
        self.parsed, self.tree, self.namespace = parsed, tree, namespace
        self.source: SourceMap = parsed.source
        self.taken, self.bound = taken, bound
        self.locals: dict[str, _Local] = {}

    def lift(self) -> list:
        self._find(self.tree.body)
        self._name_called_lambdas(self.tree.body)
        if not self.locals:
            self._refuse_stray_lambdas()
            return []
        enclosing = set(self.parsed.parameters) | _own_stores(self.tree.body)
        enclosing -= set(self.locals) | self.bound  # (read from the namespace)
        called = {
            id(node.func)
            for node in trees.walk(self.tree)
            if isinstance(node, gast.Call)
        }
        for local in self.locals.values():
            self._check(local, called)
            local.closed = sorted(_free(local.node) & enclosing)
        self._close_over_callees(enclosing)
        for local in self.locals.values():
            self._check_defaults_kept(local)
        lifted = [self._lifted(local) for local in self.locals.values()]
        for local, definition in zip(self.locals.values(), lifted):
            own = set(local.parameters + local.keyword_only + local.closed)
            own |= _own_stores(definition.body)
            _CallsWithClosure(self, own).visit(definition)
        _CallsWithClosure(self, set()).visit(self.tree)
        # (the globals of the function as written: a pytree's stand-in, whose
        # ``fn`` this is then, has none of its own)
        written = self.parsed.scope or self.parsed.fn
        scope = {**written.__globals__, **self.namespace.maps[0]}
        functions = [_compiled(d, self.source, scope) for d in lifted]
        # (after the calls: a default is copied from the definition; last first,
        # so that the positions of the others stay right)
        for local in sorted(self.locals.values(), key=lambda each: -each.index):
            if len(local.block) > 1:
                del local.block[local.index]
            else:
                local.block[local.index] = gast.copy_location(
                    gast.Pass(), local.block[local.index]
                )
        self._refuse_stray_lambdas()
        results = []
        for definition, function in zip(lifted, functions):
            parsed = ParsedFunction(
                function,
                definition.name,
                definition,
                self.source,
                self.namespace,
                bound=self.bound | set(self.locals),
            )
            # (a function taking a pytree's leaves stands in for the one written,
            # whose globals the local function reads and are watched for it)
            register_local_function(parsed, written)
            results.append(parsed)
        return results

    # --- finding them ----------------------------------------------------------------

    def _find(self, block: list) -> None:
        for index, statement in enumerate(block):
            if isinstance(statement, gast.FunctionDef):
                self._add(statement.name, statement, block, index, statement)
                continue
            target = single_target(statement)
            if target is not None and isinstance(statement.value, gast.Lambda):
                self._add(target, statement.value, block, index, statement)
                continue
            for _, inner in _blocks(statement):
                self._find(inner)

    def _add(self, name: str, node, block: list, index: int, statement) -> None:
        if name in self.locals:
            raise self.source.error(
                statement,
                f"ppto cannot differentiate a second definition of the local "
                f"function {name}",
                "give each local function its own name, and define it once",
            )
        if isinstance(node, gast.FunctionDef) and node.decorator_list:
            raise self.source.error(
                statement,
                f"ppto cannot differentiate the decorated local function {name}",
                "define the decorated function at module level",
            )
        arguments = node.args
        if arguments.vararg or arguments.kwarg:
            raise self.source.error(
                statement,
                f"ppto cannot differentiate the local function {name}: it takes "
                "*args or **kwargs parameters",
                "list its parameters explicitly",
            )
        self.locals[name] = _Local(name, node, block, index)

    def _name_called_lambdas(self, block: list) -> None:
        """``(lambda v: v * v)(x)``: the lambda as a local function of its own,
        defined just before the statement calling it."""
        for index in range(len(block) - 1, -1, -1):
            statement = block[index]
            if isinstance(statement, gast.FunctionDef):
                continue  # (its own, lifted with it)
            for _, inner in _blocks(statement):
                self._name_called_lambdas(inner)
            called = [
                node
                for node in own_nodes([statement])
                if isinstance(node, gast.Call) and isinstance(node.func, gast.Lambda)
            ]
            for call in called:
                name = fresh_name("lambda_", self.taken)
                definition = gast.Assign(
                    [gast.Name(name, gast.Store(), None, None)], call.func, None
                )
                gast.copy_location(definition, call.func)
                call.func = gast.copy_location(
                    gast.Name(name, gast.Load(), None, None), call.func
                )
                block.insert(index, definition)
                self._add(name, definition.value, block, index, definition)
        # (the positions of locals found in this block moved with the insertions)
        for local in self.locals.values():
            if local.block is block:
                local.index = next(
                    i
                    for i, s in enumerate(block)
                    if s is local.node or getattr(s, "value", None) is local.node
                )

    def _refuse_stray_lambdas(self) -> None:
        for node in own_nodes(self.tree.body):
            if isinstance(node, gast.Lambda):
                raise self.source.error(
                    node,
                    "ppto cannot differentiate a lambda used other than called "
                    "(stored, passed on or returned)",
                    "assign the lambda to a name and call it (sq = lambda v: v * v; "
                    "sq(x)), or use map(fn, xs)",
                )

    # --- checks ----------------------------------------------------------------------

    def _check(self, local: _Local, called: set) -> None:
        """Refuse what the lifted function would compute differently (see the module
        docstring); ``called``: the ids of the names calls are made by."""
        assigned = _own_stores(local.node.body) if _is_def(local) else set()
        for node in own_nodes(_body(local)):
            if isinstance(node, gast.Nonlocal) and set(node.names) & assigned:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the local function {local.name}: "
                    "it writes an enclosing variable (nonlocal)",
                    "return the new value from the local function and assign it",
                )
        later = {id(n) for s in local.block[local.index + 1 :] for n in trees.walk(s)}
        definition = local.block[local.index]
        inside = {id(n) for n in trees.walk(local.node)}
        for node in trees.walk(self.tree):
            if not (isinstance(node, gast.Name) and node.id == local.name):
                continue
            if isinstance(node.ctx, gast.Store) and node is not _target(definition):
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate a local function whose name is "
                    f"assigned again ({local.name})",
                    "give the local function and the other value different names",
                )
            if isinstance(node.ctx, gast.Param) and id(node) not in inside:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate a local function named like a "
                    f"parameter ({local.name})",
                    "give the local function another name",
                )
            if not isinstance(node.ctx, gast.Load) or _shadowed(node, local, self):
                continue
            if id(node) in inside:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the local function {local.name}: it "
                    "calls itself (code is generated for each function called)",
                    "rewrite the recursion as a loop",
                )
            if id(node) not in later:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate a use of the local function "
                    f"{local.name} before its definition or outside the block "
                    "that defines it",
                    f"define {local.name} first, in the block where it is called",
                )
            if id(node) not in called:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the local function {local.name} "
                    "used as a value (returned, stored or passed on): only its "
                    "calls are differentiated",
                    f"call {local.name} where its result is needed, or define it "
                    "at module level and pass it as an argument",
                )

    def _close_over_callees(self, enclosing: set) -> None:
        """A local function calling another passes it that one's closure: take it
        as its own (until nothing changes: calls through several)."""
        changed = True
        while changed:
            changed = False
            for local in self.locals.values():
                needed = set(local.closed)
                for callee in _free(local.node) & set(self.locals):
                    other = self.locals[callee]
                    needed |= set(other.closed) | (_default_reads(other) & enclosing)
                if needed != set(local.closed):
                    local.closed, changed = sorted(needed), True

    def _check_defaults_kept(self, local: _Local) -> None:
        """A call passes the closure as it is then, as Python's closure reads it;
        but a default is evaluated once, at the definition: a variable it reads
        must not be assigned again between the definition and a call (the call
        gets the default written out). (Assigned after the last call, in a loop
        body that defines the function again on the next pass, it is not read.)"""
        read = _default_reads(local)
        users = {local.name} | {
            other.name
            for other in self.locals.values()
            if local.name in _callees(other, self.locals)
        }
        following = local.block[local.index + 1 :]
        uses = [
            position
            for position, statement in enumerate(following)
            if any(
                isinstance(node, gast.Name) and node.id in users
                for node in trees.walk(statement)
            )
        ]
        for statement in following[: max(uses, default=-1) + 1]:
            for node in own_nodes([statement]):
                if (
                    isinstance(node, gast.Name)
                    and isinstance(node.ctx, gast.Store)
                    and node.id in read
                ):
                    raise self.source.error(
                        node,
                        f"ppto cannot differentiate the local function "
                        f"{local.name} here: a default of it reads {node.id}, "
                        "assigned again after its definition and before a call "
                        "(Python evaluated the default at the definition)",
                        f"assign {node.id} before defining {local.name}, or pass "
                        "the value as an argument",
                    )

    # --- lifting ---------------------------------------------------------------------

    def _lifted(self, local: _Local) -> gast.FunctionDef:
        node = clone(local.node)
        if isinstance(node, gast.Lambda):
            body = [gast.copy_location(gast.Return(node.body), node.body)]
        else:  # (a nonlocal declaration left is of names it only reads: no-ops)
            body = _without_nonlocal(node.body)
        names = local.parameters + local.keyword_only + local.closed
        arguments = gast.arguments(
            args=[gast.Name(n, gast.Param(), None, None) for n in names],
            posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
            kwarg=None, defaults=[],
        )  # fmt: skip
        definition = trees.function_definition(local.name, arguments, body)
        definition = gast.copy_location(definition, local.block[local.index])
        # (the enclosing function's were written as loops as it was parsed: the
        # comprehensions of the functions it defines stayed as written)
        if rewritten_nodes(list(trees.walk(definition))):
            definition = comprehensions_as_loops(
                definition, self.namespace, self.source
            )
        return definition


class _CallsWithClosure(trees.Transformer):
    """Every call of a local function gets all its parameters, by position: the
    arguments given, the defaults of those omitted, then the closure."""

    def __init__(self, lifter: _Lifter, own: set) -> None:
        self.lifter, self.own = lifter, own  # (own: names the function binds)

    def visit_Call(self, node):
        self.generic_visit(node)
        function = node.func
        if not isinstance(function, gast.Name):
            return node
        local = self.lifter.locals.get(function.id)
        if local is None or function.id in self.own:
            return node
        node.args = self._arguments(node, local) + [
            gast.Name(name, gast.Load(), None, None) for name in local.closed
        ]
        node.keywords = []
        return node

    def _arguments(self, call, local: _Local) -> list:
        error = self.lifter.source.error
        positional, keyword_only = local.parameters, local.keyword_only
        if len(call.args) > len(positional):
            raise error(
                call,
                f"{local.name} takes {len(positional)} positional arguments but "
                f"{len(call.args)} were given",
            )
        given = dict(zip(positional, call.args))
        for keyword in call.keywords:
            if keyword.arg in given or keyword.arg not in positional + keyword_only:
                raise error(
                    call, f"{local.name} got an unexpected or repeated argument "
                    f"{keyword.arg!r}",
                )  # fmt: skip
            given[keyword.arg] = keyword.value
        defaults = _defaults(local)
        arguments = []
        for parameter in positional + keyword_only:
            if parameter in given:
                arguments.append(given[parameter])
            elif parameter in defaults:
                arguments.append(clone(defaults[parameter]))
            else:
                raise error(
                    call,
                    f"{local.name} is called without its argument {parameter!r}",
                    f"pass {parameter}",
                )
        return arguments


class _PartialCalls(trees.Transformer):
    """Calls of a ``functools.partial`` passed as an argument, written as calls
    of its function with its arguments bound under names of their own:
    ``act(x)`` with ``act = partial(np.sum, axis=1)`` is ``act_function(x,
    axis=act_axis)``."""

    def __init__(self, name: str, partial, closure: dict, taken: set) -> None:
        self.name = name

        def bound(what: str, value) -> str:
            label = fresh_name(f"{name}_{what}", taken)
            closure[label] = value
            return label

        self.function = bound("function", partial.func)
        self.arguments = [bound("argument", a) for a in partial.args]
        self.keywords = {k: bound(k, v) for k, v in partial.keywords.items()}

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, gast.Name) and node.func.id == self.name):
            return node
        given = {keyword.arg for keyword in node.keywords}
        node.func = gast.Name(self.function, gast.Load(), None, None)
        node.args = [_load(a) for a in self.arguments] + node.args
        node.keywords = [
            gast.keyword(key, _load(value))
            for key, value in self.keywords.items()
            if key not in given
        ] + node.keywords
        return node


def _load(name: str) -> gast.Name:
    return gast.Name(name, gast.Load(), None, None)


# --- helpers --------------------------------------------------------------------


def _blocks(statement):
    for field in ("body", "orelse"):
        inner = getattr(statement, field, None)
        if isinstance(inner, list) and inner and isinstance(inner[0], gast.stmt):
            yield field, inner


def _is_def(local: _Local) -> bool:
    return isinstance(local.node, gast.FunctionDef)


def _body(local: _Local) -> list:
    return local.node.body if _is_def(local) else [local.node.body]


def _without_nonlocal(block: list) -> list:
    """``block`` without its ``nonlocal`` declarations, in the blocks inside it too
    (not in the functions it defines)."""
    kept = [s for s in block if not isinstance(s, gast.Nonlocal)]
    for statement in kept:
        if not isinstance(statement, gast.FunctionDef):
            for field, inner in _blocks(statement):
                setattr(statement, field, _without_nonlocal(inner) or [gast.Pass()])
    return kept or [gast.Pass()]


def _target(statement):
    return statement.targets[0] if isinstance(statement, gast.Assign) else None


def _shadowed(name_node, local: _Local, lifter: _Lifter) -> bool:
    """Whether ``name_node`` reads another local function's own variable of that
    name (a parameter or an assignment inside it), not ``local``."""
    for other in lifter.locals.values():
        if any(n is name_node for n in trees.walk(other.node)):
            own = set(other.parameters + other.keyword_only)
            if isinstance(other.node, gast.FunctionDef):
                own |= _own_stores(other.node.body)
            return local.name in own
    return False


def _defaults(local: _Local) -> dict:
    arguments = local.arguments
    positional = local.parameters
    found = dict(zip(positional[len(positional) - len(arguments.defaults) :],
                     arguments.defaults))  # fmt: skip
    for parameter, default in zip(local.keyword_only, arguments.kw_defaults):
        if default is not None:
            found[parameter] = default
    return found


def _callees(local: _Local, locals_: dict) -> set:
    """The local functions ``local`` calls, directly or through others."""
    found, pending = set(), [local]
    while pending:
        for name in _free(pending.pop().node) & set(locals_):
            if name not in found:
                found.add(name)
                pending.append(locals_[name])
    return found


def _default_reads(local: _Local) -> set:
    return {
        node.id
        for default in _defaults(local).values()
        for node in trees.walk(default)
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load)
    }


def _own_stores(body: list) -> set:
    """Names a block assigns itself (not inside the functions it defines), and
    the names of the functions it defines."""
    found = set()
    for node in own_nodes(body):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
            found.add(node.id)
        elif isinstance(node, gast.FunctionDef):
            found.add(node.name)
    return found


def _free(node) -> set:
    """The names a local function (def or lambda) reads from outside itself: read
    by it or the functions it defines, and not its own parameters or variables."""
    own = set(trees.named_parameters(node.args))
    body = node.body if isinstance(node, gast.FunctionDef) else [node.body]
    if isinstance(node, gast.FunctionDef):
        own |= _own_stores(body)
    reads = set()
    for inner in own_nodes(body):
        if isinstance(inner, gast.Name) and isinstance(inner.ctx, gast.Load):
            reads.add(inner.id)
        elif isinstance(inner, (gast.FunctionDef, gast.Lambda)):
            reads |= _free(inner)
    return reads - own


def _names(tree) -> set:
    return {node.id for node in trees.walk(tree) if isinstance(node, gast.Name)}


def _compiled(definition: gast.FunctionDef, source: SourceMap, scope: dict):
    """The lifted function as a Python function (what ppto keys and names its code
    by, and calls where generated code runs a call as it is), compiled at the
    user's lines and reading ``scope``, the enclosing function's globals, closure
    and local functions as they are now."""
    module = gast.gast_to_ast(gast.Module(body=[clone(definition)], type_ignores=[]))
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, source.first_line - 1)
    namespace: dict = {}
    exec(compile(module, source.filename, "exec"), scope, namespace)
    function = namespace[definition.name]
    scope[definition.name] = function  # (the other local functions call it)
    return function
