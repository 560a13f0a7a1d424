"""Differentiated dicts, lists and tuples of arrays (pytrees) read as their leaves:
the function is specialised on each such argument's structure (its keys and
lengths), one parameter per leaf (``params['W1']`` reads ``params_W1``), so that
every leaf has an adjoint of its own and the rest of the pipeline sees arrays.

What a function may do with such an argument: read it through constant keys and
indices (``p['w']``, ``ws[-1]``, nested), iterate over it (``for w in ws``,
``zip(ws, bs)``, ``enumerate``, ``.items()``, ``.values()``, ``.keys()``), take its
``len``, test a key with ``in``, unpack a list or tuple, and pass a list or tuple
(or any leaf) on to another function. Everything else raises TransformError.
"""

from __future__ import annotations

import re
import weakref

import gast

from ppto.errors import TransformError
from ppto.transform.names import names_in
from ppto.transform.objects import constant_int, constant_key
from ppto.transform.source import ParsedFunction, parse_function
from ppto.transform.trees import clone

# a structure with its leaves named: a leaf is its parameter's name (str); a
# container is ("dict", ((key, tree), ...)) or ("list" | "tuple", (tree, ...))
NamedTree = str | tuple

# the function standing for a user function specialised on its arguments'
# structures -> (a weak reference to the user function, {parameter: its tree})
_FLATTENED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

DICT_VIEWS = {"items", "values", "keys"}


def register(stand_in, function, trees: dict) -> None:
    """Parse ``stand_in`` (a function with the leaves' parameters) as ``function``
    with ``trees``' parameters read as their leaves."""
    _FLATTENED[stand_in] = (weakref.ref(function), trees)


def parse(fn) -> ParsedFunction:
    """``parse_function(fn)``, specialised where ``fn`` stands for a function
    taking pytrees (see ``register``)."""
    registered = _FLATTENED.get(fn)
    if registered is None:
        return parse_function(fn)
    function, trees = registered
    return flattened(parse_function(function()), trees)


def flattened(parsed: ParsedFunction, trees: dict) -> ParsedFunction:
    """``parsed`` (not changed) with each parameter of ``trees`` replaced by its
    leaves' parameters, and every read of it by what it reads of them."""
    tree = clone(parsed.tree)
    arguments = tree.args

    def expanded(argument) -> list:
        if argument.id not in trees:
            return [argument]
        leaves = leaf_names(trees[argument.id])
        return [gast.Name(leaf, gast.Param(), None, None) for leaf in leaves]

    positional = arguments.posonlyargs + arguments.args
    if any(argument.id in trees for argument in positional):
        arguments.defaults = []  # (the caller passes every leaf: see ppto.api)
    for field in ("posonlyargs", "args"):
        parameters = getattr(arguments, field)
        setattr(arguments, field, [leaf for a in parameters for leaf in expanded(a)])
    if arguments.vararg is not None and arguments.vararg.id in trees:
        arguments.args += expanded(arguments.vararg)  # (*xs: one per argument)
        arguments.vararg = None
    keywords, defaults = [], []
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        leaves = expanded(argument)
        keywords += leaves
        defaults += [default] if leaves == [argument] else [None] * len(leaves)
    arguments.kwonlyargs, arguments.kw_defaults = keywords, defaults
    reader = _Reader(trees, parsed)
    body = [reader.visit(statement) for statement in tree.body]
    tree.body = [made for _, made in reader.containers.values()] + body
    return ParsedFunction(parsed.fn, parsed.name, tree, parsed.source, parsed.namespace)


def leaf_names(tree: NamedTree) -> list[str]:
    """The leaves' parameter names, in order."""
    if isinstance(tree, str):
        return [tree]
    return [name for item in _items(tree) for name in leaf_names(item)]


def _items(tree: tuple) -> list:
    kind, entries = tree
    return [item for _, item in entries] if kind == "dict" else list(entries)


def _describe(tree: tuple) -> str:
    kind, entries = tree
    if kind == "dict":
        return "a dict with keys " + ", ".join(repr(k) for k, _ in entries)
    return f"a {kind} of {len(entries)}"


def _identifier(text: str, taken: set) -> str:
    """A fresh name spelled like ``text`` (``params['ws']``: ``params_ws``)."""
    base = "_".join(part for part in re.split(r"\W+", text) if part)
    name, number = base, 0
    while name in taken:
        number += 1
        name = f"{base}_{number}"
    taken.add(name)
    return name


def _constant_slice(node: gast.Slice) -> slice | None:
    """The slice ``node`` writes with constant integers (or nothing), else None."""
    bounds = []
    for part in (node.lower, node.upper, node.step):
        bound = None if part is None else constant_int(part)
        if part is not None and bound is None:
            return None
        bounds.append(bound)
    return slice(*bounds)


def _spelled_slice(node: gast.Slice) -> str:
    bounds = _constant_slice(node)
    parts = [bounds.start, bounds.stop] + ([bounds.step] if bounds.step else [])
    return ":".join("" if part is None else str(part) for part in parts)


class _Reader(gast.NodeTransformer):
    """Rewrites the reads of the pytree parameters (see the module docstring)."""

    def __init__(self, trees: dict, parsed: ParsedFunction) -> None:
        self.trees, self.parsed = trees, parsed
        # the lists made on entry: the caller's text of one -> (name, statement)
        self.containers: dict = {}
        # (the parameters' own names are free: every read of them is rewritten)
        self.taken = (names_in(parsed.tree) - set(trees)) | {
            leaf for tree in trees.values() for leaf in leaf_names(tree)
        }

    def error(self, node, message: str, suggestion: str) -> TransformError:
        return self.parsed.source.error(node, message, suggestion)

    def found(self, node) -> tuple | None:
        """``(its NamedTree, the parameter's text)`` where ``node`` reads a pytree
        parameter or a part of it through constant keys, else None."""
        if isinstance(node, gast.Name) and node.id in self.trees:
            if not isinstance(node.ctx, gast.Load):
                raise self.error(
                    node,
                    f"ppto cannot differentiate a function that rebinds {node.id}, "
                    "a dict, list or tuple it differentiates with respect to",
                    f"give the new value another name than {node.id}",
                )
            return self.trees[node.id], node.id
        if not isinstance(node, gast.Subscript):
            return None
        holder = self.found(node.value)
        if holder is None:
            return None
        tree, text = holder
        if isinstance(tree, str):
            return None  # (an index into a leaf array: read as any)
        if not isinstance(node.ctx, gast.Load):
            raise self.error(
                node,
                f"ppto cannot differentiate a write into {text}, a {tree[0]} it "
                "differentiates with respect to (the caller's would change)",
                "build a new dict or list from its items and write into that",
            )
        kind, entries = tree
        if kind != "dict" and isinstance(node.slice, gast.Slice):
            bounds = _constant_slice(node.slice)
            if bounds is None:
                return None  # (of the list written out)
            return (kind, entries[bounds]), f"{text}[{_spelled_slice(node.slice)}]"
        key = constant_key(node)
        if kind == "dict":
            if key is None:
                raise self.error(
                    node,
                    f"ppto reads a differentiated dict ({text}) by constant keys only",
                    f"write {text}['name'], or loop over {text}.items()",
                )
            for entry, item in entries:
                if entry == key:
                    return item, f"{text}[{key!r}]"
            raise self.error(
                node,
                f"{text} has no key {key!r}: it is {_describe(tree)}",
                "use one of its keys",
            )
        if type(key) is not int:
            return None  # (a slice or a computed index: of the list written out)
        if not -len(entries) <= key < len(entries):
            raise self.error(
                node,
                f"index {key} is out of range for {text}: it is {_describe(tree)}",
                "use an index within it",
            )
        return entries[key], f"{text}[{key}]"

    def expression(self, node, tree: NamedTree, text: str):
        """What reading ``tree`` as a value gives: its leaf, or a list or tuple
        written out (a dict has no such form: refused)."""
        if isinstance(tree, str):
            made = gast.Name(tree, gast.Load(), None, None)
        elif tree[0] == "dict":
            raise self.error(
                node,
                f"ppto reads a differentiated dict ({text}) through constant keys, "
                ".items(), .values(), .keys(), len(), `in` and for loops only: "
                "not as a whole value",
                f"pass its entries ({text}['name']) or {text}.values()",
            )
        else:
            made = gast.Name(self.bound(node, tree, text), gast.Load(), None, None)
        return gast.copy_location(made, node)

    def bound(self, node, tree: tuple, text: str) -> str:
        """The name of a list of ``tree``'s items made on entry (``ws = [ws_0,
        ws_1]``): a list the function builds, which loops, helpers and
        unpacking take with an adjoint per item (a tuple's too: it is read)."""
        if text not in self.containers:
            items = [
                self.expression(node, item, f"{text}[{number}]")
                for number, item in enumerate(tree[1])
            ]
            name = _identifier(text, self.taken)
            made = gast.Assign(
                [gast.Name(name, gast.Store(), None, None)],
                gast.List(items, gast.Load()),
                None,
            )
            self.containers[text] = (name, gast.copy_location(made, self.parsed.tree))
        return self.containers[text][0]

    def keys(self, node, tree: tuple):
        keys = [gast.Constant(key, None) for key, _ in tree[1]]
        return gast.copy_location(gast.Tuple(keys, gast.Load()), node)

    def visit_Name(self, node):
        found = self.found(node)
        return node if found is None else self.expression(node, *found)

    def visit_Subscript(self, node):
        found = self.found(node)
        if found is None:
            return self.generic_visit(node)
        return self.expression(node, *found)

    def visit_Attribute(self, node):
        found = self.found(node.value)
        if found is None or isinstance(found[0], str):
            return self.generic_visit(node)
        tree, text = found
        raise self.error(
            node,
            f"ppto cannot read {text}.{node.attr}: {text} is {_describe(tree)} "
            "differentiated as its items",
            f"call {text}.items(), .values() or .keys(), or index it",
        )

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, gast.Attribute) and func.attr in DICT_VIEWS:
            found = self.found(func.value)
            if found is not None and not isinstance(found[0], str):
                return self.view(node, func.attr, *found)
        if (
            isinstance(func, gast.Name)
            and func.id == "len"
            and self.parsed.namespace.get("len") is len
            and len(node.args) == 1
            and not node.keywords
        ):
            found = self.found(node.args[0])
            if found is not None and not isinstance(found[0], str):
                return gast.copy_location(gast.Constant(len(found[0][1]), None), node)
        return self.generic_visit(node)

    def view(self, node, view: str, tree: tuple, text: str):
        """``.items()``, ``.values()`` or ``.keys()`` of a dict, written out."""
        if tree[0] != "dict" or node.args or node.keywords:
            raise self.error(
                node,
                f"ppto cannot call {text}.{view}(): {text} is {_describe(tree)}",
                "iterate over it or index it",
            )
        if view == "keys":
            return self.keys(node, tree)
        values = [
            self.expression(node, item, f"{text}[{key!r}]") for key, item in tree[1]
        ]
        if view == "items":
            values = [
                gast.Tuple([gast.Constant(key, None), value], gast.Load())
                for (key, _), value in zip(tree[1], values)
            ]
        return gast.copy_location(gast.Tuple(values, gast.Load()), node)

    def visit_For(self, node):
        found = self.found(node.iter)
        if found is not None and not isinstance(found[0], str):
            tree, _ = found
            if tree[0] == "dict":  # (iterating over a dict gives its keys)
                node.iter = self.keys(node.iter, tree)
        return self.generic_visit(node)

    def visit_Compare(self, node):
        for position, (op, right) in enumerate(zip(node.ops, node.comparators)):
            found = self.found(right) if isinstance(op, (gast.In, gast.NotIn)) else None
            if found is not None and not isinstance(found[0], str):
                if found[0][0] == "dict":
                    node.comparators[position] = self.keys(right, found[0])
        return self.generic_visit(node)
