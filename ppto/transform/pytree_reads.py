"""The reads of a differentiated dict, list or tuple (a pytree) rewritten as reads
of its leaves' parameters (see ``ppto.transform.pytrees``).

What a function may do with such an argument: read it through constant keys and
indices (``p['w']``, ``ws[-1]``, nested) and constant slices, iterate over it
(``for w in ws``, ``zip(ws, bs)``, ``enumerate``, ``.items()``, ``.values()``,
``.keys()``; a loop over items that are dicts is unrolled), take its ``len``, test
a key with ``in`` (``if "b" in p``: only the branch taken is read, see
key_tests.py), unpack a list or tuple, and pass it (or a part) on to a function
of its own. Everything else raises TransformError at the user's line.
"""

from __future__ import annotations

import inspect
import re

import gast

from ppto.errors import TransformError
from ppto.transform.key_tests import DecidedBranches
from ppto.transform.names import fresh_name, names_in
from ppto.transform.objects import constant_int, constant_key
from ppto.transform.pytrees import (
    NamedTree,
    described,
    holds_a_dict,
    leaf_names,
    named_trees,
    namespace_with,
    stand_in,
    structure,
)
from ppto.transform.resolve import is_library
from ppto.transform.source import ParsedFunction, signature
from ppto.transform.trees import clone, stores, walk

DICT_VIEWS = {"items", "values", "keys"}
POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)


def flattened(parsed: ParsedFunction, trees: dict, made) -> ParsedFunction:
    """``parsed`` (not changed) with each parameter of ``trees`` (name ->
    NamedTree) replaced by its leaves' parameters and every read of it by what
    it reads of them: the text of ``made``, its stand-in."""
    tree = clone(parsed.tree)
    tree.args = _leaf_arguments(tree.args, trees)
    reader = _Reader(trees, parsed)
    body = []
    for statement in tree.body:
        visited = reader.visit(statement)
        body += visited if isinstance(visited, list) else [visited]
    tree.body = [made_list for _, made_list in reader.containers.values()] + body
    return ParsedFunction(
        made,
        parsed.name,
        tree,
        parsed.source,
        namespace_with(parsed, reader.helpers),
        scope=parsed.scope or parsed.fn,
        stand_ins={**parsed.stand_ins, **reader.stand_ins},
        spelled={
            leaf: text
            for parameter, named_tree in trees.items()
            for leaf, text in _spellings(named_tree, parameter)
        },
    )


def _write_refused(parsed: ParsedFunction, node, text: str, kind: str):
    return parsed.source.error(
        node,
        f"ppto cannot differentiate a write into {text}, a {kind} "
        "argument it takes as its leaves (in NumPy the caller's "
        f"{kind} would change, in ppto's generated code not)",
        f"give the new value a name of its own (a = {text}[...] * x, not "
        f"{text}[...] = {text}[...] * x or += x), or build a new "
        f"{kind} from its items and write into that, and read that "
        "(returned if the caller needs it)",
    )


# the methods that change a dict or a list in place
_CHANGES = {
    "append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort",
    "update", "setdefault", "popitem", "__setitem__", "__delitem__",
}  # fmt: skip


def refuse_writes_into_leaves(made) -> None:
    """Refuse, at the user's line, a write into a dict, list or tuple that
    ``made``, a stand-in taking its leaves (``ppto.transform.pytrees``), is
    given (``d["b"] = ...``, ``d["b"] += ...``, ``d.update(...)``): the stand-in
    calls the function with one made of the leaves, so the caller's would not
    change (NumPy's does). Parsing the stand-in refuses such a write too
    (``_Reader.found``), but a call that runs as written (its result unused, or
    given no differentiated value) is not parsed, or its refusal not raised;
    see ``DictCalls._refuse_writes``."""
    from ppto.errors import PptoError
    from ppto.transform.source import STOOD_FOR, parse_function

    function = STOOD_FOR.get(made)
    function = function() if function is not None else None
    if function is None:
        return
    try:
        parsed = parse_function(function)
    except PptoError:
        return  # (no source to read: runs as written, as any such function)
    trees = named_trees(made)
    for node in walk(parsed.tree):
        if isinstance(node, gast.Subscript) and not isinstance(node.ctx, gast.Load):
            written = node.value
        elif (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and node.func.attr in _CHANGES
        ):
            written = node.func.value
        else:
            continue
        while isinstance(written, gast.Subscript):
            written = written.value
        if isinstance(written, gast.Name) and written.id in trees:
            tree = trees[written.id]
            kind = tree[0] if isinstance(tree, tuple) else "dict"
            raise _write_refused(parsed, node, written.id, kind)


def _spellings(tree: NamedTree, text: str):
    """``(leaf parameter, the user's spelling of it)`` for each leaf of ``tree``,
    the structure spelled ``text`` (``params['W1']``, ``ws[0]``)."""
    if isinstance(tree, str):
        yield tree, text
        return
    kind, entries = tree
    pairs = entries if kind == "dict" else enumerate(entries)
    for key, item in pairs:
        yield from _spellings(item, f"{text}[{key!r}]")


def _leaf_arguments(arguments: gast.arguments, trees: dict) -> gast.arguments:
    """The parameters with those of ``trees`` replaced by their leaves (a leaf
    of a parameter with a default has None: a call passing it passes them all)."""

    def leaves(argument) -> list:
        if argument.id not in trees:
            return [argument]
        names = leaf_names(trees[argument.id])
        return [gast.Name(leaf, gast.Param(), None, None) for leaf in names]

    positional = arguments.posonlyargs + arguments.args
    first_default = len(positional) - len(arguments.defaults)
    fields = {"posonlyargs": [], "args": []}
    defaults = []
    for position, argument in enumerate(positional):
        field = "posonlyargs" if argument in arguments.posonlyargs else "args"
        expanded = leaves(argument)
        fields[field] += expanded
        if position >= first_default:
            default = arguments.defaults[position - first_default]
            if expanded != [argument]:
                default = gast.Constant(None, None)
            defaults += [default] * len(expanded)
    vararg = arguments.vararg
    if vararg is not None and vararg.id in trees:  # (*xs: one per argument)
        expanded = leaves(vararg)
        fields["args"] += expanded
        if defaults:
            defaults += [gast.Constant(None, None) for _ in expanded]
        vararg = None
    keywords, keyword_defaults = [], []
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        expanded = leaves(argument)
        keywords += expanded
        if expanded == [argument]:
            keyword_defaults.append(default)
        else:
            keyword_defaults += [None] * len(expanded)
    return gast.arguments(
        args=fields["args"],
        posonlyargs=fields["posonlyargs"],
        vararg=vararg,
        kwonlyargs=keywords,
        kw_defaults=keyword_defaults,
        kwarg=arguments.kwarg,
        defaults=defaults,
    )


def _identifier(text: str, taken: set) -> str:
    """A fresh name spelled like ``text`` (``params['ws']``: ``params_ws``; a
    slice, ``ws[:-1]``: ``ws_part``)."""
    text = re.sub(r"\[[^\[\]]*:[^\[\]]*\]", "[part]", text)
    base = "_".join(part for part in re.split(r"\W+", text) if part)
    return fresh_name(base, taken)


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


class _Reader(DecidedBranches, gast.NodeTransformer):
    """Rewrites the reads of the pytree parameters (see the module docstring)."""

    def __init__(self, trees: dict, parsed: ParsedFunction) -> None:
        self.trees, self.parsed = dict(trees), parsed
        # how the caller writes each name's tree (a loop's alias: params[0])
        self.texts = {name: name for name in trees}
        # the lists made on entry: the caller's text of one -> (name, statement)
        self.containers: dict = {}
        # (the parameters' own names are free: every read of them is rewritten)
        self.taken = (names_in(parsed.tree) - set(trees)) | {
            leaf for tree in trees.values() for leaf in leaf_names(tree)
        }
        self.local = stores(parsed.tree) | set(parsed.parameters)
        # helpers' stand-ins called: name -> stand-in, and name -> (the name
        # written, the function it stands for)
        self.helpers: dict = {}
        self.stand_ins: dict = {}

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
                    "a dict, list or tuple argument it takes as its leaves",
                    f"give the new value another name than {node.id}",
                )
            return self.trees[node.id], self.texts[node.id]
        if not isinstance(node, gast.Subscript):
            return None
        holder = self.found(node.value)
        if holder is None:
            return None
        tree, text = holder
        if isinstance(tree, str):
            return None  # (an index into a leaf array: read as any)
        if not isinstance(node.ctx, gast.Load):
            raise _write_refused(self.parsed, node, text, tree[0])
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
                f"{text} has no key {key!r}: it is {described(tree)}",
                "use one of its keys",
            )
        if type(key) is not int:
            return None  # (a slice or a computed index: of the list written out)
        if not -len(entries) <= key < len(entries):
            raise self.error(
                node,
                f"index {key} is out of range for {text}: it is {described(tree)}",
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
            # (at the def line alone: "# grad of: def f(ws, x):" over the gradient
            # going back into the leaves)
            gast.copy_location(made, self.parsed.tree)
            made.end_lineno = made.lineno
            self.containers[text] = (name, made)
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
            f"ppto cannot read {text}.{node.attr}: {text} is {described(tree)} "
            "differentiated as its items",
            f"call {text}.items(), .values() or .keys(), or index it",
        )

    def visit_Call(self, node):
        func = node.func
        called = self.helper_call(node)
        if called is not None:
            return called
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
                f"ppto cannot call {text}.{view}(): {text} is {described(tree)}",
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
        turns = self.turns(node)
        if turns is not None:
            return self.unrolled(node, turns)
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

    def helper_call(self, node):
        """A call of the user's function passing a dict (or a structure holding
        one): a call of its stand-in taking the leaves (see ``stand_in``), else
        None."""
        func = node.func
        if not isinstance(func, gast.Name) or func.id in self.local:
            return None
        function = self.parsed.namespace.get(func.id)
        if not inspect.isfunction(function) or is_library(function):
            return None
        parameters = list(signature(function).parameters.values())
        by_position = [p.name for p in parameters if p.kind in POSITIONAL]
        passed = {}  # parameter -> (the caller's tree, position or keyword)
        for position, argument in enumerate(node.args):
            found = self.found(argument)
            if found is None or not holds_a_dict(found[0]):
                continue
            if position >= len(by_position):
                raise self.error(
                    argument,
                    f"ppto cannot pass {found[1]}, a dict, to *args of {func.id}",
                    f"give {func.id} a parameter for it",
                )
            passed[by_position[position]] = (found[0], position)
        for keyword_ in node.keywords:
            found = self.found(keyword_.value)
            if keyword_.arg is not None and found and holds_a_dict(found[0]):
                passed[keyword_.arg] = (found[0], keyword_.arg)
        if not passed:
            return None
        made = stand_in(function, {p: structure(t) for p, (t, _) in passed.items()})
        try:  # (as DictCalls._refuse_writes: where the call runs as written too)
            refuse_writes_into_leaves(made)
        except TransformError as error:
            raise self.parsed.source.error(
                node,
                f"cannot differentiate the call to {func.id}: "
                f"{error.msg.splitlines()[0]}",
            ) from error
        theirs = named_trees(made)
        arguments = []
        for position, argument in enumerate(node.args):
            parameter = by_position[position] if position < len(by_position) else None
            if parameter in passed and passed[parameter][1] == position:
                mine = leaf_names(passed[parameter][0])
                arguments += [gast.Name(leaf, gast.Load(), None, None) for leaf in mine]
            else:
                arguments.append(self.visit(argument))
        keywords = []
        for keyword_ in node.keywords:
            if keyword_.arg in passed and passed[keyword_.arg][1] == keyword_.arg:
                pairs = zip(
                    leaf_names(passed[keyword_.arg][0]),
                    leaf_names(theirs[keyword_.arg]),
                )
                keywords += [
                    gast.keyword(their, gast.Name(mine, gast.Load(), None, None))
                    for mine, their in pairs
                ]
            else:
                keywords.append(gast.keyword(keyword_.arg, self.visit(keyword_.value)))
        name = next((n for n, f in self.helpers.items() if f is made), None)
        if name is None:
            name = _identifier(f"{func.id}_leaves", self.taken)
            self.helpers[name], self.stand_ins[name] = made, (func.id, function)
        callee = gast.Name(name, gast.Load(), None, None)
        return gast.copy_location(gast.Call(callee, arguments, keywords), node)

    def turns(self, node: gast.For) -> list | None:
        """``[(bindings, alias, its tree, its text)]`` per turn of a loop over the
        items of a list, tuple or dict holding dicts (``for layer in
        params['layers']``, ``.items()``, ``.values()``, ``enumerate``), which is
        unrolled (each turn reads its item's leaves); else None."""
        iterated, pairs = node.iter, None
        if isinstance(iterated, gast.Call) and not iterated.keywords:
            func = iterated.func
            if (
                isinstance(func, gast.Name)
                and func.id == "enumerate"
                and self.parsed.namespace.get("enumerate") is enumerate
                and len(iterated.args) == 1
            ):
                iterated, pairs = iterated.args[0], "index"
            elif isinstance(func, gast.Attribute) and func.attr in ("items", "values"):
                iterated, pairs = func.value, func.attr
        found = self.found(iterated)
        if found is None or isinstance(found[0], str):
            return None
        tree, text = found
        if (tree[0] == "dict") != (pairs in ("items", "values")):
            return None  # (enumerate of a dict, a dict's keys: not unrolled)
        entries = tree[1] if tree[0] == "dict" else list(enumerate(tree[1]))
        if not any(holds_a_dict(item) for _, item in entries):
            return None
        target = node.target
        if pairs in ("items", "index"):
            if not (
                isinstance(target, gast.Tuple)
                and len(target.elts) == 2
                and all(isinstance(e, gast.Name) for e in target.elts)
            ):
                raise self.error(
                    target,
                    f"ppto unrolls a loop over {text}, which holds dicts, with a "
                    "name for the key (index) and one for the item",
                    "write for key, item in ...",
                )
            key_name, alias = target.elts[0].id, target.elts[1].id
        elif isinstance(target, gast.Name):
            key_name, alias = None, target.id
        else:
            raise self.error(
                target,
                f"ppto unrolls a loop over {text}, which holds dicts, with one "
                "name for each item",
                "write for item in ..., then read item['key']",
            )
        if node.orelse or any(
            isinstance(inner, (gast.Break, gast.Continue)) for inner in walk(node)
        ):
            raise self.error(
                node,
                f"ppto unrolls a loop over {text}, which holds dicts, and cannot "
                "when it has break, continue or else",
                "use if statements in the loop's body instead",
            )
        return [
            (
                {key_name: key} if key_name else {},
                alias,
                item,
                f"{text}[{key!r}]",
            )
            for key, item in entries
        ]

    def unrolled(self, node: gast.For, turns: list) -> list:
        """One copy of the loop's body per turn, its key bound first and its
        item read as the pytree it is."""
        out = []
        for bindings, alias, item, text in turns:
            for name, key in bindings.items():
                bound = gast.Assign(
                    [gast.Name(name, gast.Store(), None, None)],
                    gast.Constant(key, None),
                    None,
                )
                out.append(gast.copy_location(bound, node))
            saved = self.trees.get(alias), self.texts.get(alias)
            self.trees[alias], self.texts[alias] = item, text
            for statement in node.body:
                visited = self.visit(clone(statement))
                out += visited if isinstance(visited, list) else [visited]
            if saved[0] is None:
                del self.trees[alias], self.texts[alias]
            else:
                self.trees[alias], self.texts[alias] = saved
        return out
