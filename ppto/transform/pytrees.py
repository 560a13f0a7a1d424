"""Differentiated dicts, lists and tuples of arrays (pytrees) read as their leaves:
a function is specialised on each such argument's structure (its keys and
lengths), one parameter per leaf (``params['W1']`` reads ``params_W1``), so that
every leaf has an adjoint of its own and the rest of the pipeline sees arrays.

``stand_in(function, structures)`` makes the function taking the leaves: it calls
``function`` with the structures rebuilt, and ppto parses it as ``function``'s text
with the reads rewritten (``ppto.transform.pytree_reads``).
"""

from __future__ import annotations

import linecache
import re
import weakref
from collections import ChainMap
from collections.abc import Callable

from ppto.transform.names import fresh_name
from ppto.transform.source import (
    STAND_INS,
    STOOD_FOR,
    ParsedFunction,
    parse_function,
    signature,
)

# a structure with its leaves named: a leaf is its parameter's name (str); a
# container is ("dict", ((key, tree), ...)) or ("list" | "tuple", (tree, ...)).
# A structure itself has None for each leaf (see ppto.pytrees.structure).
NamedTree = str | tuple

# function -> {its parameters' structures: the stand-in taking their leaves}
_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# stand-in -> {parameter: its NamedTree}
_NAMED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def stand_in(function: Callable, structures: dict) -> Callable:
    """The function of ``function``'s parameters with each one of ``structures``
    (name -> structure) replaced by its leaves, calling ``function`` with them
    rebuilt; one per function and structures (the code generated for it is
    shared by every grad object), holding ``function`` weakly."""
    key = tuple(sorted(structures.items(), key=lambda item: item[0]))
    made = _MADE.setdefault(function, {})
    if key in made:
        return made[key]
    code = function.__code__
    taken = set(code.co_varnames + code.co_names + code.co_freevars + code.co_cellvars)
    trees = {name: named(tree, name, taken) for name, tree in structures.items()}
    parameters, arguments, starred = [], [], False
    for parameter in signature(function).parameters.values():
        tree = trees.get(parameter.name)
        leaves = leaf_names(tree) if tree is not None else [parameter.name]
        spelled = _rebuilt(tree) if tree is not None else parameter.name
        if parameter.kind is parameter.VAR_POSITIONAL:
            if tree is None:
                parameters.append(f"*{parameter.name}")
                starred = True
            else:
                parameters += leaves
            arguments.append(f"*{spelled}")
        elif parameter.kind is parameter.KEYWORD_ONLY:
            if not starred:
                parameters.append("*")
                starred = True
            parameters += leaves
            arguments.append(f"{parameter.name}={spelled}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            parameters.append(f"**{parameter.name}")
            arguments.append(f"**{parameter.name}")
        else:
            parameters += leaves
            arguments.append(spelled)
    name = function.__name__ if function.__name__.isidentifier() else "lambda_"
    source = (
        f"def {name}({', '.join(parameters)}):\n"
        f"    return {name}_of()({', '.join(arguments)})\n"
    )
    filename = f"<ppto leaves of {function.__qualname__} {id(function)} {len(made)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {f"{name}_of": weakref.ref(function)}
    exec(compile(source, filename, "exec"), scope)
    made[key] = scope[name]
    _copy_defaults(made[key], function, trees)
    _NAMED[made[key]] = trees
    # (weakly: a stand-in's entry must not keep it, or its function, alive)
    function_reference, reference = weakref.ref(function), weakref.ref(made[key])
    STAND_INS[made[key]] = lambda: _parsed(function_reference(), trees, reference())
    STOOD_FOR[made[key]] = function_reference
    return made[key]


def named_trees(stand_in: Callable) -> dict:
    """``{parameter: its NamedTree}`` of a stand-in (see ``stand_in``)."""
    return _NAMED[stand_in]


def _copy_defaults(made: Callable, function: Callable, trees: dict) -> None:
    """``function``'s defaults on ``made``; a leaf of a parameter with a default
    has None (a call passing the structure passes every leaf)."""
    positional, keywords = [], {}
    for parameter in signature(function).parameters.values():
        given = parameter.default is not parameter.empty
        leaves = leaf_names(trees[parameter.name]) if parameter.name in trees else []
        values = [None] * len(leaves) if leaves else [parameter.default]
        names = leaves or [parameter.name]
        if parameter.kind is parameter.KEYWORD_ONLY:
            keywords.update(dict(zip(names, values)) if given else {})
        elif parameter.kind in (
            parameter.POSITIONAL_ONLY,
            parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional += values if given else []
    made.__defaults__ = tuple(positional) or None
    made.__kwdefaults__ = keywords or None


def _parsed(function: Callable, trees: dict, made: Callable) -> ParsedFunction:
    from ppto.transform.pytree_reads import flattened

    return flattened(parse_function(function), trees, made)


def _rebuilt(tree: NamedTree) -> str:
    """Python text building ``tree`` from its leaves' names."""
    if isinstance(tree, str):
        return tree
    kind, entries = tree
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_rebuilt(t)}" for k, t in entries) + "}"
    items = [_rebuilt(item) for item in entries]
    if kind == "list":
        return "[" + ", ".join(items) + "]"
    return "(" + "".join(f"{item}, " for item in items).rstrip(" ") + ")"


def named(tree, prefix: str, taken: set) -> NamedTree:
    """``tree`` (a structure) with each leaf replaced by a fresh parameter name
    made of its path (``params_W1``, ``ws_0``, ``params_layer1_b``), added to
    ``taken``."""
    if tree is None:
        return fresh_name(prefix, taken)
    kind, entries = tree
    if kind == "dict":
        return (
            kind,
            tuple(
                (key, named(item, f"{prefix}_{_spelled(key)}", taken))
                for key, item in entries
            ),
        )
    return (
        kind,
        tuple(named(item, f"{prefix}_{n}", taken) for n, item in enumerate(entries)),
    )


def structure(tree: NamedTree):
    """The structure of a NamedTree (its leaves None)."""
    if isinstance(tree, str):
        return None
    kind, entries = tree
    if kind == "dict":
        return kind, tuple((key, structure(item)) for key, item in entries)
    return kind, tuple(structure(item) for item in entries)


def _spelled(key) -> str:
    return re.sub(r"\W", "_", str(key))


def leaf_names(tree: NamedTree) -> list[str]:
    """The leaves' parameter names, in order."""
    if isinstance(tree, str):
        return [tree]
    return [name for item in items(tree) for name in leaf_names(item)]


def items(tree: tuple) -> list:
    kind, entries = tree
    return [item for _, item in entries] if kind == "dict" else list(entries)


def described(tree: tuple) -> str:
    """A structure or NamedTree in words: "a dict with keys 'W', 'b'", "a list
    of 3"."""
    kind, entries = tree
    if kind == "dict":
        return "a dict with keys " + ", ".join(repr(key) for key, _ in entries)
    return f"a {kind} of {len(entries)}"


def holds_a_dict(tree: NamedTree) -> bool:
    if isinstance(tree, str):
        return False
    return tree[0] == "dict" or any(holds_a_dict(item) for item in items(tree))


def namespace_with(parsed: ParsedFunction, names: dict) -> ChainMap:
    """``parsed``'s namespace with ``names`` bound too (in a copy of its first
    map, the closure's: the user's globals stay as they are)."""
    maps = parsed.namespace.maps
    return ChainMap({**maps[0], **names}, *maps[1:])
