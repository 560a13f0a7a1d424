"""Dicts passed to functions of the user's, as ``dicts.py`` holds them (the list of
their values in key order): a call passing one, ``layer(p, x)`` or ``layer({"W": W,
"b": b}, x)``, becomes a call of ``layer``'s stand-in taking the dict's values one
by one (``layer_leaves(p[0], p[1], x)``, see ``ppto.transform.pytrees``), which
reads ``p["W"]`` as its parameter of that key, as it reads a differentiated dict.

A dict written out in the call may hold dicts, lists and tuples written out
(``mlp({"layers": [{"W": W1}, {"W": W2}]})``); a dict held in a name is passed
with its values as they are. What is refused, at the user's line: a dict
unpacked into keywords (``f(**d)``), one passed to ``*args`` or ``**kwargs``, or
nested in a list passed to a local function (lifted later, it has no stand-in:
``dict_parameters.py`` reads a dict given to one of its parameters).
"""

from __future__ import annotations

import inspect

import gast

from ppto.ops.primitive import OperatorDef
from ppto.transform.names import Namer
from ppto.transform.trees import positions_known

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)


class DictCalls:
    """Rewrites the calls of one function passing dicts; ``made``: the stand-ins
    it called, name -> (stand-in, (the name written, the function it stands
    for)), which the parsed function binds and watches."""

    def __init__(self, namespace, make_namer, source) -> None:
        self.namespace, self.source = namespace, source
        self._make_namer, self._namer = make_namer, None
        self.made: dict = {}

    @property
    def namer(self) -> Namer:
        """The function's namer, made when first asked (it reads the whole tree:
        most functions parsed pass no dict and loop over none)."""
        if self._namer is None:
            self._namer = self._make_namer()
        return self._namer

    def rewritten(
        self, node: gast.Call, keys: dict, visit, local: set, local_functions: set
    ):
        """``node`` calling a stand-in where it passes a dict to a function of
        the user's (its other arguments ``visit``-ed), else None; a dict passed
        where it cannot be is refused. ``local``: the names bound in the
        function (and those it is defined in), ``local_functions``: the names of
        the functions it defines."""
        func = node.func
        passed = {}  # position or keyword -> (structure, leaves)
        for position, argument in enumerate(node.args):
            found = _passed(argument, keys)
            if found is not None:
                passed[position] = found
        for keyword in node.keywords:
            if keyword.arg is None:
                self._refuse_unpacking(node, keyword.value, keys)
                continue
            found = _passed(keyword.value, keys)
            if found is not None:
                passed[keyword.arg] = found
        if not passed:
            return None
        if not isinstance(func, gast.Name):
            return None  # (a method's or a library's: read as a dict's use)
        if func.id in local_functions:
            argument = self._argument(node, next(iter(passed)))
            raise self.source.error(
                argument,
                f"ppto cannot pass this to {func.id}, a local function: one takes "
                "a dict only as a parameter of its own given a dict's name or a "
                "dict written out at every call (held as the list of its values)",
                f"pass each dict as a parameter of {func.id}, or define {func.id} "
                "at module level (ppto passes nested dicts to those)",
            )
        function = None if func.id in local else self.namespace.get(func.id)
        if isinstance(function, OperatorDef):
            raise self.source.error(
                self._argument(node, next(iter(passed))),
                f"ppto cannot pass a dict to {func.id}, a ppto operator: an "
                "operator's inputs are arrays (and its rule, where it has one, "
                "takes them)",
                "pass the dict's values as arguments of their own, or call a plain "
                "function of yours (without @ppto.operator)",
            )
        if not self._takes_dicts(function):
            return None
        return self._stand_in_call(node, function, passed, visit)

    @staticmethod
    def _takes_dicts(function) -> bool:
        from ppto.transform.resolve import is_library

        return inspect.isfunction(function) and not is_library(function)

    def _argument(self, node: gast.Call, where):
        if isinstance(where, int):
            return node.args[where]
        return next(k.value for k in node.keywords if k.arg == where)

    def _refuse_unpacking(self, node, value, keys: dict) -> None:
        if isinstance(value, gast.Name) and value.id in keys:
            name, written = value.id, keys[value.id]
        else:
            name, written = "d", _literal_keys(value)
            if written is None:
                return  # (fence.py refuses **-unpacking of anything else)
        spelled = ", ".join(f"{key}={name}[{key!r}]" for key in written)
        raise self.source.error(
            node,
            f"ppto cannot unpack the dict {gast.unparse(value).strip()} into "
            f"keyword arguments (**{name}): it holds a dict as the list of its "
            "values",
            f"write the keywords out ({spelled}), or pass the dict itself",
        )

    def _stand_in_call(self, node, function, passed: dict, visit):
        from ppto.transform.pytrees import leaf_names, named_trees, stand_in
        from ppto.transform.source import signature

        parameters = list(signature(function).parameters.values())
        by_position = [p.name for p in parameters if p.kind in _POSITIONAL]
        named = {p.name for p in parameters if p.kind is not p.VAR_POSITIONAL}
        named -= {p.name for p in parameters if p.kind is p.VAR_KEYWORD}
        structures = {}
        for where, (structure, _) in passed.items():
            parameter = where
            if isinstance(where, int):
                parameter = by_position[where] if where < len(by_position) else None
            if parameter is None or parameter not in named:
                star = next(
                    (
                        ("*" if p.kind is p.VAR_POSITIONAL else "**") + p.name
                        for p in parameters
                        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                    ),
                    "its parameters",
                )
                raise self.source.error(
                    self._argument(node, where),
                    f"ppto cannot pass a dict to {star} of {node.func.id}: it "
                    "passes a dict's values to a parameter of the function's",
                    f"give {node.func.id} a parameter for it",
                )
            structures[parameter] = structure
        made = stand_in(function, structures)
        self._refuse_writes(node, made)
        theirs = named_trees(made)
        arguments = []
        for position, argument in enumerate(node.args):
            if position in passed:
                arguments += _visited(passed[position][1], visit)
            else:
                arguments.append(visit(argument))
        keywords = []
        for keyword in node.keywords:
            if keyword.arg in passed:
                leaves = _visited(passed[keyword.arg][1], visit)
                pairs = zip(leaf_names(theirs[keyword.arg]), leaves)
                keywords += [gast.keyword(their, leaf) for their, leaf in pairs]
            else:
                keywords.append(gast.keyword(keyword.arg, visit(keyword.value)))
        name = next((n for n, (f, _) in self.made.items() if f is made), None)
        if name is None:
            name = self.namer.fresh(f"{node.func.id}_leaves")
            self.made[name] = (made, (node.func.id, function))
        callee = gast.copy_location(gast.Name(name, gast.Load(), None, None), node)
        return gast.copy_location(gast.Call(callee, arguments, keywords), node)

    def _refuse_writes(self, node: gast.Call, made) -> None:
        """Refuse the call where the function writes into a dict it is given:
        its stand-in calls it with a dict made of the values, so the caller's
        dict would not change (NumPy's does), whether the call is differentiated
        or runs as written (its result unused, or given no differentiated
        value: d = {"a": np.ones(3), "b": z}; set_b(d, 2.0) left d["b"] as it
        was, silently)."""
        from ppto.errors import TransformError
        from ppto.transform.pytree_reads import refuse_writes_into_leaves

        try:
            refuse_writes_into_leaves(made)
        except TransformError as error:
            raise self.source.error(
                node,
                f"cannot differentiate the call to {node.func.id}: "
                f"{error.msg.splitlines()[0]}",
            ) from error


def _literal_keys(node) -> tuple | None:
    from ppto.transform.dicts import literal_keys

    return literal_keys(node)


def _visited(leaves: list, visit) -> list:
    return [visit(leaf) if written else leaf for leaf, written in leaves]


def _passed(node, keys: dict) -> tuple | None:
    """``(structure, leaves)`` of a dict ``node`` passes (a name of ``keys``, or
    one written out), or of a list or tuple written out holding one; else None.
    A structure is ``ppto.pytrees.structure``'s (None at each leaf); the leaves
    are the expressions passed for them, in order, each with whether the user
    wrote it (to be visited then: only once the call is rewritten)."""
    if isinstance(node, gast.Name) and node.id in keys:
        entries = tuple((key, None) for key in keys[node.id])
        leaves = [
            (
                gast.copy_location(
                    gast.Subscript(
                        gast.Name(node.id, gast.Load(), None, None),
                        gast.Constant(number, None),
                        gast.Load(),
                    ),
                    node,
                ),
                False,
            )
            for number in range(len(entries))
        ]
        return ("dict", entries), leaves
    written = _literal_keys(node)
    if written is not None:
        values = node.values
    elif positions_known(node):
        values = node.elts
    else:
        return None
    items = [_passed(value, keys) for value in values]
    if written is None and all(item is None for item in items):
        return None  # (a list of arrays: passed as it is)
    structures, leaves = [], []
    for value, item in zip(values, items):
        if item is None:
            structures.append(None)
            leaves.append((value, True))
        else:
            structures.append(item[0])
            leaves += item[1]
    if written is not None:
        return ("dict", tuple(zip(written, structures))), leaves
    kind = "list" if isinstance(node, gast.List) else "tuple"
    return (kind, tuple(structures)), leaves
