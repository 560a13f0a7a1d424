"""Reading a function's source: the gast tree of its definition, a map from tree
positions back to the user's file, line and column, and ``TransformError`` built
from that map (quoted line, caret, suggestion).

Right after parsing, statements that change nothing the function computes are
dropped (``global`` or ``nonlocal`` of names it never assigns, ``del`` of names
nothing reads again) and its comprehensions are written as loops
(``ppto.transform.comprehensions``). Also here: which decorator wrappers and
methods only pass their call on, so that ppto reads through them
(``unwrapped``, ``forwarded_method``).
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import linecache
import textwrap
import weakref
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gast

from ppto.errors import PptoError, TransformError
from ppto.transform import trees
from ppto.transform.comprehensions import comprehensions_as_loops, rewritten_nodes
from ppto.transform.dicts import dicts_as_lists
from ppto.transform.syntax import parse
from ppto.transform.ufunc_at import ufunc_at_as_augmented


@dataclass
class SourceMap:
    """Where the parsed text came from: tree line 1 is file line ``first_line``."""

    filename: str
    first_line: int
    indent: int

    def position(self, node: Any) -> tuple[int, int]:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        column = getattr(node, "col_offset", 0) + self.indent
        return line, column

    def line_text(self, line: int) -> str:
        return linecache.getline(self.filename, line).rstrip("\n")

    def error(self, node: Any, message: str, suggestion: str = "") -> TransformError:
        """A ``TransformError`` at ``node`` quoting the line with a caret under it."""
        line, column = self.position(node)
        text = self.line_text(line)
        parts = [message, f'  File "{self.filename}", line {line}, column {column + 1}']
        if text:
            parts += [
                f"    {text.strip()}",
                "    " + " " * (column - _lead(text)) + "^",
            ]
        if suggestion:
            parts.append(f"  Instead: {suggestion}")
        error = TransformError("\n".join(parts))
        error.filename, error.lineno, error.offset, error.text = (
            self.filename,
            line,
            column + 1,
            text,
        )
        return error

    def statement_text(self, node: Any) -> str:
        """The user's text of a statement, on one line (for ``# grad of:``); only the
        header line of a compound statement (``for t in range(n):``)."""
        start, _ = self.position(node)
        end = getattr(node, "end_lineno", None)
        end = start if end is None else end + self.first_line - 1
        if isinstance(node, (gast.For, gast.While, gast.If)):
            end = start
        lines = [self.line_text(n).strip() for n in range(start, end + 1)]
        return " ".join(line for line in lines if line)


def _lead(text: str) -> int:
    return len(text) - len(text.lstrip())


@dataclass
class ParsedFunction:
    """A user function ready for transformation."""

    fn: Callable
    name: str
    tree: gast.FunctionDef
    source: SourceMap
    namespace: ChainMap
    # the function whose globals and closure the text reads, where ``fn`` stands
    # for it (see STAND_INS)
    scope: Callable | None = None
    # names the text calls a stand-in under -> (the name it was written with, the
    # function it stands for): what is watched for rebinding instead
    stand_ins: dict = dataclasses.field(default_factory=dict)
    # names ppto bound in namespace itself (local functions lifted out, callables
    # passed as arguments): they live in no scope of the user's to watch
    bound: frozenset = frozenset()
    # a leaf parameter of a differentiated dict, list or tuple -> the user's
    # spelling of it (``params_1`` -> ``params[1]``), for messages
    spelled: dict = dataclasses.field(default_factory=dict)

    @property
    def parameters(self) -> list[str]:
        return trees.named_parameters(self.tree.args)


def source_lines(fn: Callable) -> tuple[list[str], int]:
    """``inspect.getsourcelines(fn)``, read where it can be from the code object's
    positions (Python 3.11+: the last line any of its instructions spans) instead of
    tokenizing the file from the function's first line: ten times faster, and every
    gradient rule and operator implementation is read this way on first use."""
    code = getattr(fn, "__code__", None)
    if code is not None and hasattr(code, "co_positions") and fn.__name__ != "<lambda>":
        first, last = code.co_firstlineno, code.co_firstlineno
        pending = [code]
        while pending:
            current = pending.pop()
            for _, end, _, _ in current.co_positions():
                if end is not None and end > last:
                    last = end
            pending.extend(c for c in current.co_consts if hasattr(c, "co_positions"))
        linecache.checkcache(code.co_filename)  # the file may have been edited
        lines = linecache.getlines(code.co_filename)  # since (a module reloaded)
        head = lines[first - 1].lstrip() if 0 < first <= len(lines) else ""
        if head.startswith(("def ", "@", "async def ")) and last <= len(lines):
            return lines[first - 1 : last], first
    return inspect.getsourcelines(fn)


def function_source(fn: Callable) -> str:
    """The dedented source of ``fn`` (see ``source_lines``); a gradient rule made
    where no source is kept (exec without linecache, a shell) raised inspect's
    OSError from deep inside a transformation."""
    try:
        return textwrap.dedent("".join(source_lines(fn)[0]))
    except (OSError, TypeError) as error:
        raise _unavailable(fn, error) from error


def _unavailable(fn: Callable, error: Exception) -> TransformError:
    name = getattr(fn, "__qualname__", repr(fn))
    return TransformError(
        f"the source of {name} is not available ({error}): ppto reads source code, "
        "so define the function in a file (not in an interactive shell without "
        "source) or use exec with linecache"
    )


# a function ppto made to stand for another (one taking a dict's leaves, see
# ppto.transform.pytrees) -> what parses it: the other's tree, rewritten
STAND_INS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# a local function lifted out (ppto.transform.local_functions) -> its parsed form
# and the user's function it was found in (weakly: made again with each transform)
_LOCAL_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# a function returning a dict -> its keys: it returns the list of their values
RESULT_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def returned_keys(fn: Callable) -> tuple | None:
    """The keys of the dict ``fn`` returns, in the order of the list of values its
    transformed code returns; None where it returns no dict or has no source."""
    try:
        parse_function(fn)
    except PptoError:
        return None
    return RESULT_KEYS.get(unwrapped(fn))


# a stand-in (see STAND_INS) -> a weak reference to the function it calls
STOOD_FOR: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def returns_a_dict(fn: Callable) -> bool:
    """Whether transformed code reads what ``fn`` returns as the list of a dict's
    values (see ``returned_keys``): called as it is, its dict is read so.

    >>> returns_a_dict(lambda x: x)
    False
    """
    stood_for = STOOD_FOR.get(fn)
    if stood_for is not None:
        fn = stood_for()
    try:
        return unwrapped(fn) in RESULT_KEYS
    except TypeError:  # (an object that cannot be weakly referenced)
        return False


def register_local_function(parsed: ParsedFunction, enclosing: Callable) -> None:
    """Make ``parse_function(parsed.fn)`` give (a copy of) ``parsed``: a lifted
    local function has no source of its own, its tree is cut from ``enclosing``'s."""
    _LOCAL_FUNCTIONS[parsed.fn] = (parsed, enclosing_function(enclosing))


def enclosing_function(fn: Callable) -> Callable:
    """The user's function whose text ``fn`` is in: ``fn`` itself, or for a local
    function lifted out, the function defining it (whose scopes it reads)."""
    known = _LOCAL_FUNCTIONS.get(fn)
    return fn if known is None else known[1]


def parse_function(fn: Callable) -> ParsedFunction:
    """Parse ``fn`` (a ``def`` or an unambiguous ``lambda``) into a gast tree."""
    parse_stand_in = STAND_INS.get(fn)
    if parse_stand_in is not None:
        return parse_stand_in()
    fn = unwrapped(fn)
    local = _LOCAL_FUNCTIONS.get(fn)
    if local is not None:
        return dataclasses.replace(local[0], tree=trees.clone(local[0].tree))
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TransformError(
            f"{fn!r} is not a Python function, so ppto cannot read its source: "
            "differentiate a def-function, or give it a rule with @ppto.grad_rule"
        )
    try:
        lines, first_line = source_lines(fn)
    except (OSError, TypeError) as error:
        raise _unavailable(fn, error) from error
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = _lead(lines[0]) - _lead(dedented.splitlines()[0])
    source = SourceMap(code.co_filename, max(first_line, 1), indent)
    tree = _definition(fn, dedented, source)
    namespace = ChainMap(closure_values(fn), fn.__globals__, vars(builtins))
    nodes = list(trees.walk(tree))  # (walked once: read four times)
    _check_defined(tree, nodes, namespace, source)
    dropped = [n for n in nodes if isinstance(n, _DROPPED)]
    if dropped:
        _drop_no_ops(tree, dropped)
        _slices_deleted_as_emptied(tree)
    changed, keys, made = dicts_as_lists(tree, nodes, namespace, source)
    if made:  # (stand-ins its calls passing dicts call: see dict_calls.py)
        bound = {name: function for name, (function, _) in made.items()}
        namespace = ChainMap({**namespace.maps[0], **bound}, *namespace.maps[1:])
    if keys is not None:
        RESULT_KEYS[fn] = keys
    # (np.add.at(a, i, b); the text tells quickly whether there may be one)
    scatters = ufunc_at_as_augmented(tree, namespace) if ".at(" in text else {}
    if scatters:
        namespace = ChainMap({**namespace.maps[0], **scatters}, *namespace.maps[1:])
    if changed:
        nodes = list(trees.walk(tree))  # (its list comprehensions are new)
    if rewritten_nodes(nodes):
        tree = comprehensions_as_loops(tree, namespace, source)
    # generated functions are named after it: a lambda's name is no identifier
    name = fn.__name__ if fn.__name__.isidentifier() else "lambda_"
    stand_ins = {name: written for name, (_, written) in made.items()}
    return ParsedFunction(fn, name, tree, source, namespace, stand_ins=stand_ins)


_DROPPED = (gast.Global, gast.Nonlocal, gast.Delete)  # (some of them: see below)


def _drop_no_ops(tree: gast.FunctionDef, statements: list) -> None:
    """Drop the statements that change nothing the function computes: ``global``
    and ``nonlocal`` declarations of names it never assigns (without them it reads
    the very same values) and ``del`` of names nothing reads after it (not later
    in the text, nor anywhere in a loop around it). Those of names it assigns
    stay, a ``del`` of a name read again, and of an item or attribute, for the
    fence to refuse: the change would reach outside, or into a list or array, or
    Python would raise there."""
    assigned = trees.stores(tree.body)
    dropped = {
        id(s)
        for s in statements
        if (
            _deletes_unread_names(tree, s)
            if isinstance(s, gast.Delete)
            else not set(s.names) & assigned
        )
    }
    if not dropped:
        return
    for node in trees.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list) or not statements:
                continue
            kept = [s for s in statements if id(s) not in dropped]
            if len(kept) < len(statements):
                statements[:] = kept or [gast.copy_location(gast.Pass(), tree)]


def _slices_deleted_as_emptied(tree: gast.FunctionDef) -> None:
    """``del hs[a:b]`` -> ``hs[a:b] = []``: what it does to a list, whose write
    into a slice is differentiated (a length changed too). Only a plain slice of a
    name: ``del hs[::2]`` (which ``hs[::2] = []`` is not) and ``del hs[i]`` stay
    for the fence to refuse, and so does a del of several targets. An array
    refuses both forms (NumPy deletes no elements in place)."""
    for node in trees.walk(tree):
        for field in ("body", "orelse"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            for position, statement in enumerate(statements):
                emptied = _emptied_slice(statement)
                if emptied is not None:
                    statements[position] = emptied


def _emptied_slice(statement) -> gast.Assign | None:
    """``hs[a:b] = []`` for ``statement`` ``del hs[a:b]``, else None."""
    if not isinstance(statement, gast.Delete) or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if not (
        isinstance(target, gast.Subscript)
        and isinstance(target.value, gast.Name)
        and isinstance(target.slice, gast.Slice)
        and target.slice.step is None
    ):
        return None
    target.ctx = gast.Store()
    empty = gast.copy_location(gast.List([], gast.Load()), statement)
    emptied = gast.copy_location(gast.Assign([target], empty, None), statement)
    emptied.deletes = True  # (of an array refused: see Normalizer.setitem)
    return emptied


def _deletes_unread_names(tree: gast.FunctionDef, delete: gast.Delete) -> bool:
    if not all(isinstance(target, gast.Name) for target in delete.targets):
        return False
    names = {target.id for target in delete.targets}
    after = (delete.end_lineno, delete.end_col_offset)
    regions = [tree] + [
        loop
        for loop in trees.walk(tree)
        if isinstance(loop, (gast.For, gast.While))
        and any(node is delete for node in trees.walk(loop))
    ]
    for region in regions:
        for node in trees.walk(region):
            if (
                isinstance(node, gast.Name)
                and isinstance(node.ctx, gast.Load)
                and node.id in names
                and (region is not tree or (node.lineno, node.col_offset) > after)
            ):
                return False
    return True


def _check_defined(
    tree: gast.FunctionDef, nodes: list, namespace: ChainMap, source
) -> None:
    """A name the function reads that is neither assigned in it nor a parameter,
    global, closure variable or builtin raises here, at its line (else the
    generated code raises NameError from its own line); ``nodes``: the tree's."""
    bound = set()  # (constructs the fence refuses bind names too: it says so first)
    for node in nodes:
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            bound.add(node.id)
        elif isinstance(node, (gast.FunctionDef, gast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, gast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (gast.Global, gast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (gast.MatchAs, gast.MatchStar)) and node.name:
            bound.add(node.name)  # (case (n, m): binds n and m)
        elif isinstance(node, gast.MatchMapping) and node.rest:
            bound.add(node.rest)
    # annotations are never evaluated here, defaults were when the def ran
    arguments = tree.args
    skipped = [tree.returns, *arguments.defaults, *arguments.kw_defaults]
    skipped += [a.annotation for a in arguments.posonlyargs + arguments.args]
    skipped += [a.annotation for a in arguments.kwonlyargs]
    skipped += [n.annotation for n in nodes if isinstance(n, gast.AnnAssign)]
    ignored = {id(n) for root in skipped if root is not None for n in trees.walk(root)}
    for node in nodes:
        if (
            isinstance(node, gast.Name)
            and isinstance(node.ctx, gast.Load)
            and id(node) not in ignored
            and node.id not in bound
            and node.id not in namespace
        ):
            raise source.error(
                node,
                f"{node.id} is not defined: the function reads it, but it is "
                "neither assigned in the function nor a global, closure variable "
                "or builtin",
                f"define {node.id} before the call, or pass it as an argument",
            )


def signature(function: Callable) -> inspect.Signature:
    """The parameters of the function ppto transforms: its own (``inspect.signature``
    would report a decorated function's inner parameters and defaults)."""
    return inspect.signature(function, follow_wrapped=False)


def unwrapped(fn: Callable) -> Callable:
    """``fn``, or the function it wraps where calling that gives the same result:
    wrappers that are not functions (ppto's own, ``functools.lru_cache``) and
    decorators that pass the call through (``return f(*args, **kwargs)`` after some
    logging). Another wrapper's own code is what runs (``return f(x) * 10.0``), so it
    is what ppto reads: reading the wrapped function instead gave its gradient."""
    while True:
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            return fn
        if getattr(fn, "__code__", None) is not None and not _passes_through(fn, inner):
            return fn
        fn = inner


_PASSING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _passes_through(wrapper: Callable, inner: Callable) -> bool:
    """Whether ``wrapper`` ends in ``return inner(...)`` with its own arguments,
    unchanged, and returns nowhere else (decided once per wrapper: its code and
    closure never change, and every call of ppto.vjp or jvp asks)."""
    known = _PASSING.get(wrapper)
    if known is None or known[0] is not inner:
        known = _PASSING[wrapper] = (inner, _reads_as_passing(wrapper, inner))
    return known[1]


def _reads_as_passing(wrapper: Callable, inner: Callable) -> bool:
    try:
        definition = parse(function_source(wrapper)).body[0]
    except (OSError, TypeError, SyntaxError):
        return False
    if not isinstance(definition, gast.FunctionDef):
        return False
    returns = [
        node for node in own_nodes(definition.body) if isinstance(node, gast.Return)
    ]
    if len(returns) != 1 or returns[0] is not definition.body[-1]:
        return False
    call = returns[0].value
    if not (
        isinstance(call, gast.Call)
        and isinstance(call.func, gast.Name)
        and closure_values(wrapper).get(call.func.id) is inner
    ):
        return False
    arguments = definition.args
    if any(isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
           and node.id in _parameter_names(arguments)
           for node in own_nodes(definition.body)):  # fmt: skip
        return False  # an argument changed before the call
    return _forwarded(call, arguments)


_FORWARDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forwarded_method(function: Callable) -> str | None:
    """The name of the method that ``function``, a method taking ``*args`` or
    ``**kwargs``, passes its call to unchanged and does nothing else (``def
    __call__(self, *args): return self.forward(*args)``, a docstring allowed),
    else None: a call of it is that method's call, which ppto can differentiate
    (generated code takes no ``*args``). Decided once per function."""
    known = _FORWARDING.get(function)
    if known is None or known[0] is not function.__code__:
        known = _FORWARDING[function] = (function.__code__, _forwarding(function))
    return known[1]


def _forwarding(function: Callable) -> str | None:
    try:
        definition = parse(function_source(function)).body[0]
    except (OSError, TypeError, SyntaxError, TransformError):
        return None
    if not isinstance(definition, gast.FunctionDef) or definition.decorator_list:
        return None
    arguments = definition.args
    positional = arguments.posonlyargs + arguments.args
    if not positional or not (arguments.vararg or arguments.kwarg):
        return None
    body = definition.body
    if isinstance(body[0], gast.Expr) and isinstance(body[0].value, gast.Constant):
        body = body[1:]  # (its docstring)
    if len(body) != 1 or not isinstance(body[0], gast.Return):
        return None
    call, own = body[0].value, positional[0].id
    if not (
        isinstance(call, gast.Call)
        and isinstance(call.func, gast.Attribute)
        and isinstance(call.func.value, gast.Name)
        and call.func.value.id == own
    ):
        return None
    passed = gast.arguments(
        posonlyargs=[],
        args=positional[1:],
        vararg=arguments.vararg,
        kwonlyargs=arguments.kwonlyargs,
        kw_defaults=arguments.kw_defaults,
        kwarg=arguments.kwarg,
        defaults=arguments.defaults,
    )
    return call.func.attr if _forwarded(call, passed) else None


def _forwarded(call: gast.Call, arguments: gast.arguments) -> bool:
    """``call``'s arguments are the wrapper's own, in order: ``*args, **kwargs``, or
    its parameters by name; and it has no defaults of its own, which a call left
    to what it calls would lose (``def __call__(self, x, scale=3.0, *args)``
    passing ``scale`` on to ``forward(self, x, scale=1.0)``)."""
    if arguments.defaults or any(d is not None for d in arguments.kw_defaults):
        return False
    positional = [a.id for a in arguments.posonlyargs + arguments.args]
    passed = []
    for argument in call.args:
        if isinstance(argument, gast.Starred) and isinstance(argument.value, gast.Name):
            passed.append("*" + argument.value.id)
        elif isinstance(argument, gast.Name):
            passed.append(argument.id)
        else:
            return False
    expected = positional + (["*" + arguments.vararg.id] if arguments.vararg else [])
    keywords = []
    for keyword in call.keywords:
        if not isinstance(keyword.value, gast.Name):
            return False
        keywords.append((keyword.arg, keyword.value.id))
    wanted = [(a.id, a.id) for a in arguments.kwonlyargs]
    wanted += [(None, arguments.kwarg.id)] if arguments.kwarg else []
    return passed == expected and sorted(keywords, key=str) == sorted(wanted, key=str)


def _parameter_names(arguments: gast.arguments) -> set:
    names = set(trees.named_parameters(arguments))
    names |= {a.id for a in (arguments.vararg, arguments.kwarg) if a is not None}
    return names


def own_nodes(body: list):
    """The nodes of ``body``, not looking into nested functions and lambdas."""
    pending = list(body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (gast.FunctionDef, gast.Lambda)):
            pending.extend(gast.iter_child_nodes(node))


def _definition(fn: Callable, text: str, source: SourceMap) -> gast.FunctionDef:
    if fn.__name__ != "<lambda>":
        module = parse(text)
        definition = module.body[0]
        if isinstance(definition, gast.AsyncFunctionDef):
            raise source.error(
                definition,
                "ppto cannot differentiate async functions",
                "differentiate a plain def function",
            )
        if not isinstance(definition, gast.FunctionDef):
            raise source.error(
                definition, f"cannot find the definition of {fn.__name__}"
            )
        definition.decorator_list = []
        return definition
    return _lambda_definition(fn, text, source)


def _lambda_definition(fn: Callable, text: str, source: SourceMap) -> gast.FunctionDef:
    module = None
    line = text.strip()
    # the lambda's lines as written, as an expression, cut at the call or tuple it
    # ends, or as an item of the dict or the argument of the call it is written in
    # (``"relu": lambda x: ...,`` on a line of its own)
    candidates = (text, f"({line})", line.rstrip(",)"), f"{{{line}}}", f"f({line})")
    for candidate in candidates:
        try:
            module = parse(candidate)
            break
        except SyntaxError:
            continue
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    found = []
    if module is not None:
        for node in trees.walk(module):
            if isinstance(node, gast.Lambda):
                if tuple(arg.id for arg in node.args.args) == names:
                    found.append(node)
    if len(found) != 1:
        raise TransformError(
            f"cannot tell which lambda on line {source.first_line} of "
            f"{source.filename} is being differentiated: define it with def"
        )
    node = found[0]
    definition = gast.FunctionDef(
        name="lambda_",
        args=node.args,
        body=[gast.Return(value=node.body)],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )
    gast.copy_location(definition, node)
    definition.body[0].lineno = node.lineno
    definition.body[0].col_offset = node.col_offset
    return definition


def closure_values(fn: Callable) -> dict:
    if not fn.__closure__:
        return {}
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not yet filled: resolved later, at call time
            continue
    return values
