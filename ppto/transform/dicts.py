"""Dicts whose keys are known when the code is made, right after parsing: a dict
comprehension ``d = {k: x * k for k in range(3)}``, a dict written out with
constant keys ``d = {"h": h, "y": y}`` (or returned), or the result of a helper of
the user's returning such a dict ``d = helper(x)``. Each becomes the list of its
values in key order (``d = [x * k for k in range(3)]``, which comprehensions.py
writes as a loop; a helper returns its list), and each read of ``d`` a read of that
list: ``d[2]`` is the list's item 2,
``d.values()`` the list, ``d.keys()`` and ``for k in d`` the keys written out,
``d.items()`` ``zip(keys, d)``, ``len(d)`` and ``key in d`` numbers and truths
(``if "b" in d``: only the branch taken is read, see key_tests.py).

The keys are known where the comprehension's loop runs over literals, Python's
``range`` of whole numbers, or a module-level tuple or string (its name stays in
the code: rebinding it makes ppto transform the function again). ``d``, or a dict
written out, passed to a function of the user's is passed as its values
(``dict_calls.py``). Anything else done with ``d`` (a key read only when the code
runs, passing ``d`` to a library function, a new key) is refused, saying which
reads work. The keys of what a function returns are kept (``returned_keys``): a
caller reads them, and jvp/vjp hand the values back as a dict. Each function
defined inside the function is rewritten first, in its own scope: a local
function returning a dict is read by its keys too.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from typing import TYPE_CHECKING

import gast

from ppto.transform import trees
from ppto.transform.dict_calls import DictCalls
from ppto.transform.key_tests import DecidedBranches
from ppto.transform.names import Namer, names_in

if TYPE_CHECKING:  # (source.py calls this module as it parses)
    from ppto.transform.source import SourceMap

_KEY_TYPES = (str, int, float, bool)
_READS = (
    "{d}[key] with a key written out, {d}.values(), {d}.items(), {d}.keys(), "
    "for k in {d}, len({d}), key in {d}"
)


def dicts_as_lists(
    definition: gast.FunctionDef, nodes: list, namespace, source: SourceMap
) -> tuple[bool, tuple | None, dict]:
    """Rewrite ``definition``'s dicts as lists (see the module docstring) in place
    (the tree is the caller's own fresh parse; ``nodes``: all of its nodes), the
    functions it defines first, each in its own scope. Returns whether anything
    changed, the keys of the dict it returns (None where it returns none) and the
    stand-ins its calls passing dicts now call (see ``dict_calls.DictCalls``)."""
    if not any(
        isinstance(node, (gast.DictComp, gast.Dict, gast.Call)) for node in nodes
    ):
        return False, None, {}
    calls = DictCalls(namespace, lambda: Namer(names_in(definition)), source)
    nodes = nodes[1:]  # (without the definition itself: trees.walk's first)
    if any(isinstance(node, gast.FunctionDef) for node in nodes):
        nodes = None  # (its own are found without the functions it defines)
    changed, result = _as_lists(definition, namespace, source, set(), {}, calls, nodes)
    return changed, result, calls.made


def _as_lists(
    definition, namespace, source, enclosing: set, returning: dict, calls, nodes=None
) -> tuple[bool, tuple | None]:
    """``dicts_as_lists`` of one function, ``enclosing``: the local names of the
    functions it is defined in, ``returning``: the keys their local functions
    defined before it return (added to for its own); ``nodes``: its own, where
    they are all of its tree's."""
    if nodes is None:
        nodes = _own_nodes(definition)
    nested = [node for node in nodes if isinstance(node, gast.FunctionDef)]
    defined = {inner.name for inner in nested}
    local = _local_names(definition) | enclosing | defined
    changed = False
    for inner in sorted(nested, key=lambda node: (node.lineno, node.col_offset)):
        inner_changed, found = _as_lists(
            inner, namespace, source, local, returning, calls
        )
        changed |= inner_changed
        if found is not None:
            returning[inner.name] = found
    helpers: dict = {}  # id of a call -> the keys its function returns
    for node in nodes:
        if isinstance(node, gast.Call):
            found = _helper_keys(node, namespace, local)
            if found is None and isinstance(node.func, gast.Name):
                found = returning.get(node.func.id)  # (a local function's)
            if found is not None:
                helpers[id(node)] = found
    if not helpers and not any(
        isinstance(node, gast.DictComp) or literal_keys(node) is not None
        for node in nodes
    ):
        return changed, None
    keys = _dict_keys(definition, nodes, namespace, local, helpers, source)
    result = _result_keys(definition, keys, helpers, source)
    from ppto.transform.dict_parameters import dict_parameters, positional_parameters

    taking = dict_parameters(nested, nodes, keys, source)
    for inner in nested:  # (its parameters given dicts read as dicts)
        if inner.name in taking:
            inner_defined = {
                node.name
                for node in _own_nodes(inner)
                if isinstance(node, gast.FunctionDef)
            }
            inner_local = _local_names(inner) | local | inner_defined
            reader = _ReadsAsList(
                dict(taking[inner.name]), source, calls, inner_local, inner_defined
            )
            reader.visit_body(inner)
    calling = {  # (name -> its positional parameters, those given dicts)
        inner.name: (positional_parameters(inner), set(taking[inner.name]))
        for inner in nested
        if inner.name in taking
    }
    reader = _ReadsAsList(keys, source, calls, local, defined, calling)
    reader.visit_body(definition)
    return True, result


def _own_nodes(definition: gast.FunctionDef) -> list:
    """The nodes of ``definition``'s body breadth first, as ``trees.walk``, the
    functions it defines without theirs (a lambda's are its own: rewritten in
    this scope, as a lambda binds no dicts)."""
    found = list(definition.body)
    for node in found:  # (a list iterator also reaches what is appended meanwhile)
        if not isinstance(node, gast.FunctionDef):
            found.extend(gast.iter_child_nodes(node))
    return found


def literal_keys(node) -> tuple | None:
    """The keys of a dict written out with constant keys, each once, else None."""
    if not isinstance(node, gast.Dict) or not node.keys:
        return None
    found = []
    for key in node.keys:
        if not (isinstance(key, gast.Constant) and isinstance(key.value, _KEY_TYPES)):
            return None
        found.append(key.value)
    return tuple(found) if len(set(found)) == len(found) else None


class _Reads(threading.local):
    """Per thread (transforms may run in several): the functions whose source is
    being read for the keys they return (a recursion reads none: ppto refuses it
    when it plans the derivative), and what the reads found, kept while a
    transform runs (``keys_read_once``) or the outermost read does: each helper is
    read once, not once per path to it through the calls (exponentially many
    where helpers share helpers)."""

    def __init__(self) -> None:
        self.reading: set = set()
        self.found: dict = {}
        self.holding = 0


_READS_NOW = _Reads()


@contextlib.contextmanager
def keys_read_once():
    """Keep what helpers return while the code inside runs (one transform: the
    functions it reads are not rebound meanwhile)."""
    _READS_NOW.holding += 1
    try:
        yield
    finally:
        _READS_NOW.holding -= 1
        if not _READS_NOW.holding:
            _READS_NOW.found.clear()


def _helper_keys(call, namespace, local) -> tuple | None:
    """The keys of the dict that ``call``, of a function of the user's named in the
    text, returns, else None (library functions are not read: they return no
    dict of this kind, and reading their source on every parse costs)."""
    from ppto.transform.resolve import is_library
    from ppto.transform.source import returned_keys

    func = call.func
    if not isinstance(func, gast.Name) or func.id in local:
        return None
    function = namespace.get(func.id)
    code = getattr(function, "__code__", None)
    now = _READS_NOW
    if code is None or code in now.reading or is_library(function):
        return None
    if code in now.found:
        return now.found[code]
    now.reading.add(code)
    try:
        found = now.found[code] = returned_keys(function)
    finally:
        now.reading.discard(code)
        if not now.reading and not now.holding:
            now.found.clear()
    return found


def _local_names(definition: gast.FunctionDef) -> set[str]:
    return _parameters(definition) | trees.stores(definition.body)


def _parameters(definition: gast.FunctionDef) -> set[str]:
    return set(trees.named_parameters(definition.args))


def _dict_keys(
    definition, nodes: list, namespace, local: set, helpers: dict, source
) -> dict[str, tuple]:
    """The keys of each name a dict is assigned to (a comprehension, a dict written
    out, a call of ``helpers``), its statements rewritten to make lists; a dict
    comprehension or a helper's dict elsewhere, or a name also bound to something
    else, is refused."""
    keys: dict[str, tuple] = {}
    assigned = []
    for node in nodes:
        if trees.single_target(node) is not None and (
            isinstance(node.value, gast.DictComp)
            or literal_keys(node.value) is not None
            or id(node.value) in helpers
        ):
            assigned.append(node)
    held = {id(node.value) for node in assigned}
    returned = {
        id(node.value)
        for node in nodes
        if isinstance(node, gast.Return) and node.value is not None
    }
    chosen = {  # ``(helper(x) if c else other(x))['k']``: a branch's value
        id(part)
        for node in nodes
        if isinstance(node, gast.IfExp)
        for part in (node.body, node.orelse)
    }
    for node in nodes:
        if (
            isinstance(node, gast.Call)
            and id(node) in helpers
            and not {id(node)} & (held | returned)
        ):
            name = gast.unparse(node.func).strip()
            instead = (
                f"assign it to a name first (d = {name}(...)) and read d[key] with "
                "a key written out"
            )
            if id(node) in chosen:  # (each branch's dict may have keys of its own)
                instead = (
                    f"choose in an if statement, a name for each dict: if ...: d = "
                    f"{name}(...); v = d[key] else: e = ...; v = e[key]"
                )
            raise source.error(
                node,
                f"ppto cannot differentiate this use of {name}(...), which returns a "
                "dict (held as the list of its values): it is read only as a name "
                "bound to it",
                instead,
            )
    for node in nodes:
        if isinstance(node, gast.DictComp) and id(node) not in held:
            raise source.error(
                node,
                "ppto cannot differentiate a dict comprehension here: one is "
                "taken only as the value of an assignment to a name",
                "assign it to a name first (d = {k: ... for k in keys})",
            )
    parameters = _parameters(definition)
    for node in assigned:
        name, comprehension = node.targets[0].id, node.value
        if name in parameters:
            raise source.error(
                node,
                f"ppto cannot differentiate {name} as a parameter and a dict: it "
                "holds the dict's values as a list",
                f"give the dict a name of its own (not {name})",
            )
        if id(comprehension) in helpers:
            found = helpers[id(comprehension)]
        elif isinstance(comprehension, gast.Dict):
            found = literal_keys(comprehension)
            node.value = _values_list(comprehension)
        else:
            found = _static_keys(comprehension, namespace, local, source)
            node.value = gast.copy_location(
                gast.ListComp(comprehension.value, comprehension.generators),
                comprehension,
            )
        if keys.get(name, found) != found:
            raise source.error(
                node,
                f"ppto cannot differentiate {name} assigned dicts of different keys",
                "use one name for each set of keys",
            )
        keys[name] = found
    for node in nodes:
        targets = bound_by(node)
        if targets is None or node in assigned:
            continue
        for name in sorted(trees.stores(targets) & set(keys)):
            raise source.error(
                node,
                f"ppto cannot differentiate {name} as a dict and something else: "
                "it holds the dict's values as a list",
                f"give the other value a name of its own (not {name})",
            )
    return keys


def _values_list(written: gast.Dict) -> gast.List:
    return gast.copy_location(gast.List(list(written.values), gast.Load()), written)


def _result_keys(definition, keys: dict, helpers: dict, source) -> tuple | None:
    """The keys of the dict ``definition`` returns (a dict written out, rewritten to
    the list of its values here, or a name of ``keys``), None where it returns no
    dict; returns of different keys, or of a dict and something else, are
    refused."""
    returns = sorted(  # (in the order written: the later one is refused)
        _own_returns(definition.body), key=lambda node: (node.lineno, node.col_offset)
    )
    found = []
    for node in returns:
        value = node.value
        written = literal_keys(value)
        if written is not None:
            node.value = _values_list(value)
        elif isinstance(value, gast.Name) and value.id in keys:
            written = keys[value.id]
        else:
            written = helpers.get(id(value))
        found.append((node, written))
    kinds = {written for _, written in found}
    if len(kinds) > 1:
        node = next(node for node, written in found if written != found[0][1])
        raise source.error(
            node,
            "ppto cannot differentiate a function returning a dict here and "
            "something else (or a dict of other keys) elsewhere: it returns the "
            "dict's values as a list",
            "return dicts of the same keys, written out, at every return",
        )
    return found[0][1] if found else None


def _own_returns(body: list) -> list:
    """The returns of a value in ``body``, not those of functions defined in it."""
    found = []
    for statement in body:
        for node in gast.walk(statement):
            if isinstance(node, gast.Return) and node.value is not None:
                found.append(node)
        for inner in gast.walk(statement):
            if isinstance(inner, (gast.FunctionDef, gast.AsyncFunctionDef)):
                nested = {id(n) for n in gast.walk(inner)}
                found = [n for n in found if id(n) not in nested]
    return found


def bound_by(node):
    """What ``node`` assigns, or None where it assigns nothing."""
    if isinstance(node, gast.Assign):
        return node.targets
    if isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For, gast.NamedExpr)):
        return node.target
    return None


def _static_keys(comprehension, namespace, local: set, source) -> tuple:
    """The keys of a dict comprehension, known when the code is made, in order."""
    generators = comprehension.generators
    generator = generators[0]
    target = generator.target
    simple = (
        len(generators) == 1
        and not generator.ifs
        and not generator.is_async
        and isinstance(target, gast.Name)
        and isinstance(comprehension.key, gast.Name)
        and comprehension.key.id == target.id
    )
    if not simple:
        raise source.error(
            comprehension,
            "ppto differentiates a dict comprehension of the form "
            "{k: value for k in keys} only (one loop, no if, the loop's name as the "
            "key)",
            "build a list of the values, or write the keys as the loop's names",
        )
    found = _known_items(generator.iter, namespace, local)
    if found is None or not all(isinstance(key, _KEY_TYPES) for key in found):
        raise source.error(
            generator.iter,
            "ppto cannot differentiate a dict comprehension whose keys are not "
            "known when the code is made (they are read as the list's positions)",
            "loop over keys written out, range(...) of whole numbers or a "
            "module-level tuple, or build a list of the values",
        )
    if len(set(found)) != len(found):
        raise source.error(
            generator.iter,
            f"ppto cannot differentiate a dict comprehension over repeated keys "
            f"{found!r} (a later value replaces an earlier one)",
            "loop over each key once",
        )
    return tuple(found)


def _known_items(node, namespace, local: set):
    """The items ``node`` iterates over, where they are known from the source and
    module-level constants alone, else None."""
    if isinstance(node, gast.Constant) and isinstance(node.value, str):
        return tuple(node.value)
    if isinstance(node, (gast.Tuple, gast.List)):
        items = [_known_value(e, namespace, local) for e in node.elts]
        return None if any(i is None for i in items) else tuple(items)
    if (
        trees.called(node, "range")
        and "range" not in local
        and namespace.get("range") is builtins.range
        and not node.keywords
    ):
        bounds = [_known_value(a, namespace, local) for a in node.args]
        if 1 <= len(bounds) <= 3 and all(type(b) is int for b in bounds):
            return tuple(range(*bounds))
        return None
    value = _known_value(node, namespace, local, (tuple, str, range))
    return None if value is None else tuple(value)


def _known_value(node, namespace, local: set, kinds=_KEY_TYPES):
    """A literal, or a module-level value of ``kinds`` (immutable: a list could
    change without ppto seeing it), else None."""
    if isinstance(node, gast.Constant) and isinstance(node.value, kinds):
        return node.value
    if isinstance(node, gast.Name) and node.id not in local and node.id in namespace:
        value = namespace[node.id]
        return value if isinstance(value, kinds) else None
    return None


class _ReadsAsList(DecidedBranches, gast.NodeTransformer):
    """Each read of a dict comprehension's name as the read of its list of values
    (see the module docstring); any other use is refused."""

    def __init__(
        self,
        keys: dict[str, tuple],
        source,
        calls,
        local: set,
        defined: set,
        taking: dict | None = None,
    ) -> None:
        self.keys = keys
        self.source = source
        self.calls: DictCalls = calls
        self.local, self.defined = local, defined  # (defined: its local functions)
        # the local functions given dicts: name -> (its positional parameters,
        # those given dicts) (see dict_parameters.py)
        self.taking = taking or {}
        # (dict, key name) -> the name of the key's position, in ``for k in d:``
        self.positions: dict[tuple[str, str], str] = {}

    def name_of(self, node) -> str | None:
        """The dict's name, where ``node`` is one."""
        if isinstance(node, gast.Name) and node.id in self.keys:
            return node.id
        return None

    def visit_Subscript(self, node):
        name = self.name_of(node.value)
        if name is None:
            return self.generic_visit(node)
        key = node.slice
        keys = self.keys[name]
        if isinstance(key, gast.Name) and (name, key.id) in self.positions:
            position = self.positions[name, key.id]
            node.slice = gast.copy_location(
                gast.Name(position, gast.Load(), None, None), key
            )
            return node
        written = gast.unparse(key).strip()
        if isinstance(node.ctx, gast.Store) and not (
            isinstance(key, gast.Constant) and key.value in keys
        ):
            raise self.source.error(
                key,
                f"ppto cannot add the key {written} to {name}: its keys are fixed "
                f"where it is made ({keys!r}), as it is held as the list of its "
                "values",
                f"write every key where {name} is made, or write to one of its keys",
            )
        if not isinstance(key, gast.Constant) or key.value not in keys:
            known = isinstance(key, gast.Constant)
            raise self.source.error(
                key,
                f"ppto cannot read {name}[{written}]: "
                + (
                    f"{name} has no such key (its keys: {keys!r})"
                    if known
                    else f"{name} is a dict read as the list of its values, so "
                    "its key must be written out"
                ),
                f"loop with for k, v in {name}.items(); the reads that work: "
                + _READS.format(d=name),
            )
        node.slice = gast.copy_location(gast.Constant(keys.index(key.value), None), key)
        return node

    def visit_body(self, definition: gast.FunctionDef) -> None:
        definition.body = self.block(definition.body)

    def visit_FunctionDef(self, node):
        """A function defined here reads the dicts of this one it does not bind
        itself (its own were rewritten already)."""
        shadowed = _local_names(node) & set(self.keys)
        kept = {name: self.keys.pop(name) for name in shadowed}
        try:
            return self.generic_visit(node)
        finally:
            self.keys.update(kept)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, gast.Name) and func.id in self.taking:
            return self.dicts_to_a_local_function(node, *self.taking[func.id])
        rewritten = self.calls.rewritten(
            node, self.keys, self.visit, self.local, self.defined
        )
        if rewritten is not None:
            return rewritten
        func = node.func
        if isinstance(func, gast.Attribute) and self.name_of(func.value):
            name = func.value.id
            if func.attr in ("values", "keys", "items") and not (
                node.args or node.keywords
            ):
                return gast.copy_location(self.view(name, func.attr, node), node)
        if (
            isinstance(func, gast.Name)
            and func.id == "len"
            and len(node.args) == 1
            and self.name_of(node.args[0])
        ):
            count = len(self.keys[node.args[0].id])
            return gast.copy_location(gast.Constant(count, None), node)
        return self.generic_visit(node)

    def dicts_to_a_local_function(self, node, positional: list, dicts: set):
        """A call of a local function reading some parameters as dicts: the dict
        passed there as the list of its values (its name, or one written out)."""

        def passed(parameter, value):
            if parameter not in dicts or isinstance(value, gast.Name):
                return value if parameter in dicts else self.visit(value)
            return self.visit(_values_list(value))

        node.args = [
            passed(positional[n] if n < len(positional) else None, value)
            for n, value in enumerate(node.args)
        ]
        for keyword in node.keywords:
            keyword.value = passed(keyword.arg, keyword.value)
        return node

    def view(self, name: str, method: str, origin):
        values = gast.Name(name, gast.Load(), None, None)
        if method == "values":
            return values
        keys = self.written_keys(name, origin)
        if method == "keys":
            return keys
        zipped = gast.Name("zip", gast.Load(), None, None)
        return gast.Call(zipped, [keys, values], [])

    def written_keys(self, name: str, origin):
        elements = [
            gast.copy_location(gast.Constant(key, None), origin)
            for key in self.keys[name]
        ]
        return gast.copy_location(gast.Tuple(elements, gast.Load()), origin)

    def visit_For(self, node):
        name = self.iterated_keys(node.iter)
        if name is None:
            return self.generic_visit(node)
        node.iter = self.written_keys(name, node.iter)
        key = node.target.id if isinstance(node.target, gast.Name) else None
        if key is None or key in trees.stores(node.body):
            return self.generic_visit(node)
        # for k in d: ... d[k] ...  as  for position, k in enumerate(keys): ...
        # d[position] ...
        position = self.calls.namer.fresh("position")
        target = gast.Tuple(
            [gast.Name(position, gast.Store(), None, None), node.target], gast.Store()
        )
        node.target = gast.copy_location(target, node.target)
        enumerate_ = gast.Name("enumerate", gast.Load(), None, None)
        node.iter = gast.copy_location(gast.Call(enumerate_, [node.iter], []), node)
        outer = self.positions.get((name, key))
        self.positions[name, key] = position
        node.body = self.block(node.body)
        if outer is None:
            del self.positions[name, key]
        else:
            self.positions[name, key] = outer
        node.orelse = self.block(node.orelse)
        return node

    def iterated_keys(self, node) -> str | None:
        """The dict whose keys ``node`` is (``d`` or ``d.keys()``), or None."""
        if self.name_of(node):
            return node.id
        if (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and node.func.attr == "keys"
            and self.name_of(node.func.value)
            and not (node.args or node.keywords)
        ):
            return node.func.value.id
        return None

    def visit_Compare(self, node):
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.In, gast.NotIn))
            and self.name_of(node.comparators[0])
            and isinstance(node.left, gast.Constant)
        ):
            found = node.left.value in self.keys[node.comparators[0].id]
            found = found if isinstance(node.ops[0], gast.In) else not found
            return gast.copy_location(gast.Constant(found, None), node)
        return self.generic_visit(node)

    def visit_Return(self, node):
        if self.name_of(node.value):  # (the caller reads its keys: returned_keys)
            return node
        return self.generic_visit(node)

    def visit_Name(self, node):
        if self.name_of(node) and isinstance(node.ctx, gast.Load):
            raise self.source.error(
                node,
                f"ppto cannot differentiate this use of {node.id}, a dict held as "
                "the list of its values",
                "read it as " + _READS.format(d=node.id),
            )
        return node
