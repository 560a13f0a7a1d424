"""Fast versions of what every stage does to syntax trees: ``clone``, a deep copy
(``copy.deepcopy`` spends most of its time on bookkeeping trees do not need), keeping
every attribute a stage attached; ``walk`` and the ``Visitor`` and ``Transformer``
bases, ``ast.walk`` and ``ast.NodeVisitor``/``NodeTransformer`` node for node (the
same nodes in the same order, the same methods called), in less time: the standard
ones read each node's fields through generators and ``getattr`` and took a third of
a transformation's time. And what stages ask of trees: the names they read and
write."""

from __future__ import annotations

import ast

import gast

_ATOMS = frozenset({str, int, float, bool, complex, bytes, type(None)})


def _leaf_classes() -> frozenset:
    """The node classes (ast's and gast's) with nothing inside: expression
    contexts and operator symbols (no fields), and constants (atoms only)."""
    bases = ("expr_context", "operator", "unaryop", "cmpop", "boolop")
    leaves = set()
    for module in (ast, gast):
        for base in bases:
            leaves.update(getattr(module, base).__subclasses__())
        leaves.add(module.Constant)
    return frozenset(leaves)


_LEAVES = _leaf_classes()
# contexts and operator symbols: nothing in them to change, so a copy shares them
# (as ast.parse's trees do)
_SHARED = frozenset(leaf for leaf in _LEAVES if not leaf._fields)
_KEPT = _ATOMS | _SHARED


def clone(node):
    """A deep copy of a gast/ast node, list of nodes, or leaf value (contexts and
    operator symbols shared, not copied)."""
    kind = type(node)
    if kind is list:
        return [clone(item) for item in node]
    if kind in _SHARED:
        return node
    if isinstance(node, ast.AST):
        copied = kind.__new__(kind)
        copied.__dict__ = {
            key: value if type(value) in _KEPT else clone(value)
            for key, value in node.__dict__.items()
        }
        return copied
    return node


def walk(node):
    """``ast.walk(node)``: every node of the tree, breadth first, ``node`` first (a
    node's children are read when it is reached, before it is yielded)."""
    todo = [node]
    push, AST, known_fields = todo.append, ast.AST, _FIELDS
    for node in todo:  # (a list iterator also reaches what is pushed meanwhile)
        attributes = node.__dict__
        fields = known_fields.get(type(node))
        if fields is None:
            fields = _all_fields(type(node))
        for field in fields:
            value = attributes.get(field, _MISSING)
            if value is _MISSING:
                value = getattr(node, field, None)  # (a class default: None)
            if type(value) in _ATOMS:
                continue
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
        yield node


# visit_Constant, and the methods of the node classes constants replaced (which
# ast.NodeVisitor's own visit_Constant looks for)
_CONSTANT_METHODS = {"Constant", "Num", "Str", "Bytes", "NameConstant", "Ellipsis"}
_LEAF_METHODS = {leaf.__name__ for leaf in _LEAVES} | _CONSTANT_METHODS


def nodes_by_kind(tree) -> dict:
    """Each class of node in ``tree`` -> its nodes in ``walk``'s order: one walk
    that serves several passes over the same unchanged tree, each reading a few
    kinds (a walk costs far more than reading its kinds' lists)."""
    found: dict = {}
    for node in walk(tree):
        nodes = found.get(type(node))
        if nodes is None:
            found[type(node)] = [node]
        else:
            nodes.append(node)
    return found


def _passed_over_by(cls) -> frozenset:
    """The leaf classes a visitor class has no method of its own for: its bases'
    less those its own methods visit; none where it has its own ``visit`` or
    ``generic_visit`` (which might want to see every node). (Classes are made
    inside functions that run for every transformation: this reads only the
    class's own attributes.)"""
    if "visit" in cls.__dict__ or "generic_visit" in cls.__dict__:
        return frozenset()
    passed_over = _LEAVES
    for base in cls.__bases__:
        passed_over = passed_over & getattr(base, "_passed_over", _LEAVES)
    handled = {
        key[6:]
        for key in cls.__dict__
        if key.startswith("visit_") and key[6:] in _LEAF_METHODS
    }
    if handled & _CONSTANT_METHODS:
        handled |= {"Constant"}
    if not handled:
        return passed_over
    return frozenset(leaf for leaf in passed_over if leaf.__name__ not in handled)


class Visitor(ast.NodeVisitor):
    """``ast.NodeVisitor`` with a faster ``visit`` and ``generic_visit``. Nodes
    with nothing inside (an expression's context, an operator's symbol, a
    constant) are passed over where the visitor has no method of its own for them:
    visiting one did nothing, and they are a third of a tree's nodes."""

    _passed_over: frozenset = _LEAVES  # (each subclass's: _passed_over_by)

    def __init_subclass__(cls, **keywords) -> None:
        super().__init_subclass__(**keywords)
        cls._passed_over = _passed_over_by(cls)

    def visit(self, node):
        name = _VISIT_NAMES.get(type(node))
        if name is None:
            name = _visit_name(type(node))
        method = getattr(self, name, None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node):
        attributes, AST, passed_over = node.__dict__, ast.AST, self._passed_over
        fields = _FIELDS.get(type(node))
        for field in fields if fields is not None else _all_fields(type(node)):
            value = attributes.get(field, _MISSING)
            if value is _MISSING:
                value = getattr(node, field, None)
            kind = type(value)
            if kind in _ATOMS or kind in passed_over:
                continue
            if kind is list:
                for item in value:
                    if isinstance(item, AST) and type(item) not in passed_over:
                        self.visit(item)
            elif isinstance(value, AST):
                self.visit(value)


class Transformer(ast.NodeTransformer):
    """``ast.NodeTransformer`` with a faster ``visit`` and ``generic_visit``: a
    ``visit_X`` returns the node to put in its place, None to remove it, or a list
    of nodes to put in a list's place. Nodes with nothing inside are passed over
    (kept as they are) as ``Visitor`` passes them over."""

    _passed_over: frozenset = _LEAVES

    def __init_subclass__(cls, **keywords) -> None:
        super().__init_subclass__(**keywords)
        cls._passed_over = _passed_over_by(cls)

    visit = Visitor.visit

    def generic_visit(self, node):
        attributes, AST, passed_over = node.__dict__, ast.AST, self._passed_over
        fields = _FIELDS.get(type(node))
        for field in fields if fields is not None else _all_fields(type(node)):
            old_value = attributes.get(field, _MISSING)
            if old_value is _MISSING:
                old_value = getattr(node, field, None)
            kind = type(old_value)
            if kind in _ATOMS or kind in passed_over:
                continue
            if kind is list:
                new_values = []
                for value in old_value:
                    if isinstance(value, AST) and type(value) not in passed_over:
                        value = self.visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old_value[:] = new_values
            elif isinstance(old_value, AST):
                new_node = self.visit(old_value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node


def copied_node(node):
    """A copy of ``node`` alone, sharing its children (its lists copied, so that
    changing them leaves ``node``'s alone): what a ``Transformer`` that writes a
    changed copy of a tree, leaving it as it is, visits in place of each node.
    Contexts and operator symbols are shared, as ``clone`` shares them."""
    kind = type(node)
    if kind in _SHARED:
        return node
    copied = kind.__new__(kind)
    copied.__dict__ = {
        key: list(value) if type(value) is list else value
        for key, value in node.__dict__.items()
    }
    return copied


_MISSING = object()
_FIELDS: dict = {}  # node class -> its fields
_VISIT_NAMES: dict = {}  # node class -> "visit_" + its name


def _all_fields(kind) -> tuple:
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(kind._fields)
    return fields


def _visit_name(kind) -> str:
    name = _VISIT_NAMES.get(kind)
    if name is None:
        name = _VISIT_NAMES[kind] = "visit_" + kind.__name__
    return name


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


def written_position(index) -> bool:
    """Whether a subscript's index is an item's position written out (``xs[0]``,
    ``xs[-1]``): never a slice, whose write may change a list's length."""
    if isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub):
        index = index.operand
    return isinstance(index, gast.Constant) and type(index.value) is int


def called_value(call, namespace: dict):
    """What the name a call calls is bound to in ``namespace`` (an operator, a rule
    helper), or None where it calls anything but a plain name."""
    if isinstance(call.func, gast.Name):
        return namespace.get(call.func.id)
    return None


def stores(node) -> set[str]:
    """Names a tree (or list of trees) assigns."""
    return _names(node, "Store")


def function_names(tree, nodes: dict) -> tuple[set, set, set]:
    """Of a function definition, from its nodes by kind (``nodes_by_kind``, one
    walk): the names it assigns, those its body uses (reads, assigns, or defines
    a function by) and those its body assigns: ``stores(tree)``,
    ``names.names_in`` of its body and ``stores(tree.body)``, without their three
    walks. Names of the header (parameters, their defaults and annotations,
    decorators) are left out of the body's: a small walk finds them."""
    header = set()
    for field in tree._fields:
        value = getattr(tree, field, None) if field != "body" else None
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, ast.AST):
                header.update(map(id, walk(part)))
    stored, used, rebound = set(), set(), set()
    store = _CONTEXTS["Store"]
    for kind in _NAMES:  # (ast's names too, as stores finds them; names_in: gast's)
        for node in nodes.get(kind, ()):
            assigned = type(node.ctx) in store
            if assigned:
                stored.add(node.id)
            if id(node) in header:
                continue
            if kind is gast.Name:
                used.add(node.id)
            if assigned:
                rebound.add(node.id)
    used.update(f.name for f in nodes.get(gast.FunctionDef, ()) if f is not tree)
    return stored, used, rebound


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


def named_parameters(arguments) -> list[str]:
    """The parameters a def or lambda (its ``arguments``) names one by one, in
    order: positional and keyword-only (not ``*args`` nor ``**kwargs``)."""
    return [a.id for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]


def positions_known(node) -> bool:
    """Whether ``node`` is a list or tuple written out with no item starred: each
    item's position is known (after ``*rest`` none is)."""
    return isinstance(node, (gast.List, gast.Tuple)) and not any(
        isinstance(item, gast.Starred) for item in node.elts
    )


def passed_by_name(call, names: tuple):
    """``call`` (a new node) with its positional arguments after the first passed
    by ``names`` instead: an operator's positional order where it is not its own
    (``OperatorDef.positional``: ``pad(x, 1)`` is ``pad(x, pad_width=1)``). None
    where it has more positional arguments than ``names``, or a starred one."""
    if len(call.args) > len(names) or any(
        isinstance(argument, gast.Starred) for argument in call.args
    ):
        return None
    keywords = [gast.keyword(n, a) for n, a in zip(names[1:], call.args[1:])]
    passed = gast.Call(call.func, call.args[:1], keywords + call.keywords)
    return gast.copy_location(passed, call)


def operator_inputs(call, op) -> list | None:
    """The arguments ``call`` passes for the inputs of the operator ``op``, in its
    order (by position or by name; after ``passed_by_name`` where its positional
    order is not its own); None where one is not given."""
    if op.positional:
        call = passed_by_name(call, op.positional)
        if call is None:
            return None
    given = dict(bound_arguments(call, list(op.input_names)))
    given.pop(None, None)
    if len(given) < len(op.input_names):
        return None
    return [given[name] for name in op.input_names]


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
    generators; this runs for every statement in several stages). A name is
    counted where its parent reaches it, and nodes with nothing inside (constants,
    contexts) are not pushed: most of a statement's nodes are one or the other."""
    wanted = None if context is None else _CONTEXTS[context]
    stack = []
    pop, push, AST = stack.pop, stack.append, ast.AST
    known, names = _CHILD_FIELDS, _NAMES
    # (the root as a parent reaches a child: a Name counted, a leaf left)
    fields = known.get(type(node))
    if fields is None:
        fields = _child_fields(type(node))
    if type(node) in names:
        if wanted is None or type(node.ctx) in wanted:
            found[node.id] = found.get(node.id, 0) + 1
        annotation = node.__dict__.get("annotation")
        if annotation is not None:  # (a parameter's annotation may read names)
            _collect(annotation, context, found)
    elif fields:
        push(node)
    while stack:
        node = pop()
        fields = known[type(node)]  # (found when it was pushed)
        attributes = node.__dict__
        for field in fields:
            value = attributes.get(field)
            # (the same steps for a list's items and for a single child, written
            # out twice: a call per child cost more than the walk)
            if type(value) is list:
                for item in value:
                    kind = type(item)
                    if kind in names:
                        if wanted is None or type(item.ctx) in wanted:
                            found[item.id] = found.get(item.id, 0) + 1
                        annotation = item.__dict__.get("annotation")
                        if annotation is not None:
                            _collect(annotation, context, found)
                        continue
                    inside = known.get(kind)
                    if inside is None and isinstance(item, AST):
                        inside = _child_fields(kind)
                    if inside:
                        push(item)
                continue
            kind = type(value)
            if kind in names:
                if wanted is None or type(value.ctx) in wanted:
                    found[value.id] = found.get(value.id, 0) + 1
                annotation = value.__dict__.get("annotation")
                if annotation is not None:
                    _collect(annotation, context, found)
                continue
            inside = known.get(kind)
            if inside is None and isinstance(value, AST):
                inside = _child_fields(kind)
            if inside:
                push(value)


_CHILD_FIELDS: dict = {}  # node class -> the fields that may hold names
_NAMES: set = {ast.Name, gast.Name}
# fields that hold only an expression's context, an operator's symbol or a comment
_NO_NAMES = ("ctx", "op", "ops", "type_comment")
# a context's name -> its classes (ast's and gast's)
_CONTEXTS = {
    name: frozenset({getattr(ast, name), getattr(gast, name)})
    for name in ("Load", "Store", "Del")
}


def child_fields(kind) -> tuple:
    """The fields of nodes of class ``kind`` that may hold nodes reading or
    writing names (not a context, an operator's symbol or a type comment)."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _child_fields(kind)
    return fields


def _child_fields(kind) -> tuple:
    # (none for nodes with nothing inside: a constant's value is no node)
    fields = (
        () if kind in _LEAVES else tuple(f for f in kind._fields if f not in _NO_NAMES)
    )
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
