"""``clone``: a fast deep copy of syntax trees (``copy.deepcopy`` spends most of its
time on bookkeeping trees do not need), keeping every attribute a stage attached."""

from __future__ import annotations

import ast

import gast

_ATOMS = frozenset({str, int, float, bool, complex, bytes, type(None)})


def clone(node):
    """A deep copy of a gast/ast node, list of nodes, or leaf value."""
    kind = type(node)
    if kind is list:
        return [clone(item) for item in node]
    if isinstance(node, ast.AST):
        copied = kind.__new__(kind)
        copied.__dict__ = {
            key: value if type(value) in _ATOMS else clone(value)
            for key, value in node.__dict__.items()
        }
        return copied
    return node


def single_target(statement) -> str | None:
    """The name ``statement`` assigns if it is ``name = value``, else None."""
    if (
        type(statement).__name__ == "Assign"
        and len(statement.targets) == 1
        and type(statement.targets[0]).__name__ == "Name"
    ):
        return statement.targets[0].id
    return None


def copied_name(statement) -> str | None:
    """``b`` if ``statement`` is the copy ``a = b``, else None."""
    if single_target(statement) and type(statement.value).__name__ == "Name":
        return statement.value.id
    return None


def loads(node) -> set[str]:
    """Names a tree (or list of trees) reads."""
    return _names(node, "Load")


def called(node, function: str) -> bool:
    """Whether ``node`` is ``function(...)``, a call by that name."""
    return (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and node.func.id == function
    )


def stores(node) -> set[str]:
    """Names a tree (or list of trees) assigns."""
    return _names(node, "Store")


def paired(target, value) -> list:
    """``(name, the expression it is bound to, whether it is all of it)`` for each
    name ``target = value`` binds: ``a, b = c, d`` pairwise (nested alike); names in
    a target the value is not written out for get parts of it (``a, b = t``)."""
    if isinstance(target, gast.Name):
        return [(target.id, value, True)]
    if (
        isinstance(target, (gast.Tuple, gast.List))
        and isinstance(value, (gast.Tuple, gast.List))
        and len(target.elts) == len(value.elts)
    ):
        return [p for t, v in zip(target.elts, value.elts) for p in paired(t, v)]
    return [(name, value, False) for name in sorted(stores(target))]


def bound_arguments(call, parameters) -> list:
    """``(parameter, argument)`` for each argument of ``call``, positional ones in
    order, then keywords: the name among ``parameters`` it is passed as, or None
    where it is none of them (one past the last, ``**options``)."""
    count = len(parameters)
    bound = [
        (parameters[position] if position < count else None, argument)
        for position, argument in enumerate(call.args)
    ]
    return bound + [
        (keyword.arg if keyword.arg in parameters else None, keyword.value)
        for keyword in call.keywords
    ]


def load_counts(node) -> dict[str, int]:
    """How many times a tree (or list of trees) reads each name."""
    return name_counts(node, "Load")


def name_counts(node, context: str | None) -> dict[str, int]:
    """How many times each name is used in ``context`` ("Load", "Store"; None: any)
    in a tree or list of trees."""
    found: dict[str, int] = {}
    for tree in node if isinstance(node, list) else [node]:
        if tree is not None:
            _collect(tree, context, found)
    return found


def _names(node, context: str) -> set[str]:
    return set(name_counts(node, context))


def _collect(node, context: str | None, found: dict) -> None:
    """Counts of names used in ``context`` under ``node`` (a direct walk over the
    nodes' fields with a stack: several times faster than ``ast.walk``'s
    generators; this runs for every statement in several stages)."""
    stack = [node]
    pop, push, AST = stack.pop, stack.append, ast.AST
    child_fields = _CHILD_FIELDS
    while stack:
        node = pop()
        kind = type(node)
        fields = child_fields.get(kind)
        if fields is None:
            fields = _child_fields(kind)
        attributes = node.__dict__
        if kind in _NAMES:
            if context is None or type(node.ctx).__name__ == context:
                found[node.id] = found.get(node.id, 0) + 1
            if attributes.get("annotation") is None:
                continue  # (a parameter's annotation may read names)
        for field in fields:
            value = attributes.get(field)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)


_CHILD_FIELDS: dict = {}  # node class -> the fields that may hold names
_NAMES: set = set()  # the Name classes (ast's and gast's)


def _child_fields(kind) -> tuple:
    if kind.__name__ == "Name":
        _NAMES.add(kind)
    fields = tuple(f for f in kind._fields if f not in ("ctx", "type_comment"))
    _CHILD_FIELDS[kind] = fields
    return fields


def nested_blocks(statement):
    """``(field, statements)`` for each non-empty ``body`` and ``orelse`` directly
    inside ``statement``: an ``if``'s or a loop's blocks (in generated code, the
    only statements with blocks)."""
    for field in ("body", "orelse"):
        inner = getattr(statement, field, None)
        if isinstance(inner, list) and inner:
            yield field, inner


def function_definition(name: str, parameters, body: list):
    """``def name(parameters): body`` as a gast node; ``parameters`` is a list of
    names or a ready ``gast.arguments``."""
    import gast

    if not isinstance(parameters, gast.arguments):
        parameters = gast.arguments(
            args=[gast.Name(p, gast.Param(), None, None) for p in parameters],
            posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
            kwarg=None, defaults=[],
        )  # fmt: skip
    return gast.FunctionDef(
        name=name, args=parameters, body=body, decorator_list=[], returns=None,
        type_comment=None, type_params=[],
    )  # fmt: skip
