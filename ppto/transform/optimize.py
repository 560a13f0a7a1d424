"""Optimizations on generated statements that are sound for arrays: constant folding
(``2 - 1`` -> ``1``, ``x ** 1`` -> ``x``, ``if True:``), and removal of assignments
nobody reads. Nothing is folded that would change a result's shape or dtype (no
``0 * x`` -> ``0``).
"""

from __future__ import annotations

import operator

import gast
import numpy as np

from ppto.transform import trees
from ppto.transform.analyze import NOT_LITERAL, expression_shape, literal
from ppto.transform.trees import (
    bound_arguments,
    clone,
    copied_name,
    load_counts,
    loads,
    name_counts,
    nested_blocks,
    single_target,
    stores,
)

_FOLD = {
    gast.Add: operator.add,
    gast.Sub: operator.sub,
    gast.Mult: operator.mul,
    gast.Div: operator.truediv,
}
_COMPARE = {
    gast.Eq: operator.eq,
    gast.NotEq: operator.ne,
    gast.Lt: operator.lt,
    gast.LtE: operator.le,
    gast.Gt: operator.gt,
    gast.GtE: operator.ge,
}


def _number(node) -> bool:
    return (
        isinstance(node, gast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    )


def _text(node) -> bool:
    return isinstance(node, gast.Constant) and isinstance(node.value, str)


def _signed_number(node) -> bool:
    """A number written with its sign (``-1``: a rule's ``axis`` given as -1)."""
    return (
        isinstance(node, gast.UnaryOp)
        and isinstance(node.op, (gast.USub, gast.UAdd))
        and _number(node.operand)
    )


class _Fold(trees.Transformer):
    def visit_BinOp(self, node):
        self.generic_visit(node)
        if _number(node.left) and _number(node.right) and type(node.op) in _FOLD:
            try:
                return gast.Constant(
                    _FOLD[type(node.op)](node.left.value, node.right.value), None
                )
            except ZeroDivisionError:
                return node
        if (
            isinstance(node.op, gast.Pow)
            and _number(node.right)
            and node.right.value == 1
        ):
            return node.left
        if (
            isinstance(node.op, (gast.Add, gast.Sub))
            and isinstance(node.right, gast.UnaryOp)
            and isinstance(node.right.op, gast.USub)
        ):  # a + -b -> a - b, a - -b -> a + b
            flipped = gast.Sub() if isinstance(node.op, gast.Add) else gast.Add()
            return gast.BinOp(node.left, flipped, node.right.operand)
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Not) and isinstance(node.operand, gast.Constant):
            # (a rule's ``if not compute_uv:`` where the keyword is written out)
            return gast.Constant(not node.operand.value, None)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.Is, gast.IsNot))
            and isinstance(node.left, gast.Constant)
            and isinstance(node.comparators[0], gast.Constant)
        ):
            same = node.left.value is node.comparators[0].value
            return gast.Constant(
                same if isinstance(node.ops[0], gast.Is) else not same, None
            )
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.Is, gast.IsNot))
            and isinstance(node.comparators[0], gast.Constant)
            and (
                isinstance(node.left, (gast.Tuple, gast.List))
                or (_signed_number(node.left) and node.comparators[0].value is None)
            )
        ):  # a literal tuple or signed number is never None (``-1 is None`` left in
            # the code is a SyntaxWarning: an error where warnings are errors)
            return gast.Constant(isinstance(node.ops[0], gast.IsNot), None)
        if (
            len(node.ops) == 1
            and type(node.ops[0]) in _COMPARE
            and _number(node.left)
            and _number(node.comparators[0])
        ) or (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.Eq, gast.NotEq))
            and _text(node.left)
            and _text(node.comparators[0])
        ):  # (numbers compared, or two strings: a rule's test of a kind it folded)
            result = _COMPARE[type(node.ops[0])](
                node.left.value, node.comparators[0].value
            )
            return gast.Constant(result, None)
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.In, gast.NotIn))
            and _text(node.left)
            and isinstance(node.comparators[0], gast.Tuple)
            and all(_text(item) for item in node.comparators[0].elts)
        ):  # a kind among written kinds ("sum" in ("sum", "power"))
            found = node.left.value in [item.value for item in node.comparators[0].elts]
            return gast.Constant(found == isinstance(node.ops[0], gast.In), None)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if isinstance(node.test, gast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else node.orelse
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if all(isinstance(v, gast.Constant) for v in node.values):
            values = [v.value for v in node.values]
            result = all(values) if isinstance(node.op, gast.And) else any(values)
            return gast.Constant(result, None)
        if all(_boolean(v) for v in node.values):
            return _fold_comparisons(node)
        return node


def _boolean(node) -> bool:
    """A comparison or a written True or False: its value is a bool."""
    return isinstance(node, gast.Compare) or (
        isinstance(node, gast.Constant) and isinstance(node.value, bool)
    )


def _fold_comparisons(node: gast.BoolOp):
    """``and``/``or`` of comparisons, some of them decided (a rule's ``if a.ndim ==
    2 and b.ndim == 1`` where only b's rank is known): ``x and True`` is ``x``, ``x
    and False`` is False (as ``or`` with the two swapped); every value is a bool,
    so the value read is the same."""
    absorbing = isinstance(node.op, gast.Or)  # the constant that decides the whole
    if any(isinstance(v, gast.Constant) and v.value is absorbing for v in node.values):
        return gast.Constant(absorbing, None)
    rest = [v for v in node.values if not isinstance(v, gast.Constant)]
    if not rest:
        return gast.Constant(not absorbing, None)
    return rest[0] if len(rest) == 1 else gast.BoolOp(node.op, rest)


def fold_constants(body: list) -> list:
    """Fold constant arithmetic and prune ``if`` statements with a constant test."""
    folder = _Fold()
    out = []
    # rank tests of ifs that returned, since the last other statement: a later if
    # with the same test is never taken (dot's rule with A's rank unknown and B a
    # matrix tests ``A.ndim == 1`` twice, the second time for a vector B)
    returned: set = set()
    for statement in body:
        statement = folder.visit(statement)
        if isinstance(statement, gast.If):
            statement.body = fold_constants(statement.body)
            statement.orelse = fold_constants(statement.orelse)
            test = gast.dump(statement.test) if _rank_test(statement.test) else None
            returns = bool(statement.body) and isinstance(
                statement.body[-1], gast.Return
            )
            if test in returned:
                statement.test = gast.Constant(False, None)
            elif stores(statement.orelse if returns else [statement]):
                returned.clear()  # (a name a test reads may be rebound)
            if test and returns:
                returned.add(test)
            if isinstance(statement.test, gast.Constant):
                out.extend(statement.body if statement.test.value else statement.orelse)
                if out and isinstance(out[-1], gast.Return):
                    return out  # what follows a return is never reached
                continue
        else:
            returned.clear()
        out.append(statement)
        if isinstance(statement, gast.Return):
            return out
    return out


def _rank_test(test) -> bool:
    """A comparison of a name's ``ndim`` with numbers (or ``and``/``or`` of them):
    pure, so the same test twice has the same value."""
    if isinstance(test, gast.BoolOp):
        return all(_rank_test(value) for value in test.values)
    return (
        isinstance(test, gast.Compare)
        and isinstance(test.left, gast.Attribute)
        and test.left.attr == "ndim"
        and isinstance(test.left.value, gast.Name)
        and all(_number(c) for c in test.comparators)
    )


def remove_unused(body: list, keep: set[str], removable: set[str]) -> list:
    """Drop assignments to names in ``removable`` that nothing reads (iterated:
    what a dropped statement read may be read no more). The reads are counted
    once, and a dropped statement's taken off, not counted again in every round."""
    reads = load_counts(body)
    while True:
        used = set(keep) | {name for name, count in reads.items() if count}
        removed: list = []
        body = _prune(body, used, removable, removed)
        if not removed:
            return body
        for statement in removed:  # (an if: dropped once its blocks were empty)
            if isinstance(statement, gast.Assign) and _is_pop(statement.value):
                continue  # the pop stays, reading what it read
            for name, count in load_counts(statement).items():
                reads[name] -= count


def _prune(body, used, removable, removed: list):
    out = []
    for statement in body:
        if isinstance(statement, (gast.For, gast.While)):
            statement.body = _prune(statement.body, used, removable, removed) or [
                gast.Pass()
            ]
        elif isinstance(statement, gast.If):
            statement.body = _prune(statement.body, used, removable, removed)
            statement.orelse = _prune(statement.orelse, used, removable, removed)
            if not statement.body and not statement.orelse:
                removed.append(statement)
                continue
            if not statement.body:
                statement.body = [gast.Pass()]
        elif isinstance(statement, gast.Assign) and all(
            isinstance(t, gast.Name) and t.id in removable and t.id not in used
            for t in statement.targets
        ):
            removed.append(statement)
            if _is_pop(statement.value):  # the pop itself must still happen
                out.append(gast.copy_location(gast.Expr(statement.value), statement))
            continue
        out.append(statement)
    return out


def _is_pop(value) -> bool:
    return (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "pop"
    )


def coalesce_copies(body: list, temporaries: set[str]) -> list:
    """``t = ...; x = t`` with ``t`` a temporary read only there becomes ``x = ...``,
    in every block; also when ``t`` is assigned in both branches of an ``if``."""
    counts = load_counts(body), name_counts(body, "Store")
    return _coalesce_block(body, temporaries, counts)


def _coalesce_block(body: list, temporaries, counts) -> list:
    """Coalesce in ``body`` (inner blocks first). ``counts`` (loads and stores of
    each name in the whole function) are kept current after every rewrite: a
    rewrite moves stores from one name to another, and a later decision about that
    name (``_renamable``'s "all the stores") must see them."""
    loads, stores = counts
    for statement in body:
        for field in ("body", "orelse"):
            block = getattr(statement, field, None)
            if isinstance(block, list) and block:
                setattr(statement, field, _coalesce_block(block, temporaries, counts))
    out = list(body)
    position = 0
    while position < len(out):
        statement = out[position]
        source = _copied_temporary(statement, temporaries, loads)
        if source is not None:
            target = statement.targets[0].id
            definition = _last_definition(out[:position], source)
            if definition is not None and _renamable(
                out, definition, position, target, stores.get(source, 0)
            ):
                moved = name_counts(out[definition], "Store").get(source, 0)
                rename(out[definition], source, target, gast.Store)
                stores[source] -= moved
                stores[target] = stores.get(target, 0) + moved
                if not _mentions([out[definition]], source):
                    del out[position]
                    loads[source] -= 1
                    stores[target] -= 1
                    continue
        position += 1
    return out


def _renamable(block, definition, copy, target, stores: int) -> bool:
    """Whether the temporary's stores in ``block[definition]`` can take the name
    ``target`` that ``block[copy]`` copies it to: nothing between them mentions
    ``target``, nor the definition itself where it is compound (an if or a loop
    may read or set ``target`` after storing the temporary, as a loop's branches
    read the value its turn started from: renamed, they would read the new one).
    A compound definition must also hold all ``stores`` of the temporary: a loop
    that may run no turn, or an if storing in one branch, leaves the copy reading
    a value stored before it (a loop's carried tangent), which keeps its name.
    A plain assignment reads its value before it stores, so ``t = f(x); x = t``
    becomes ``x = f(x)``."""
    if _mentions(block[definition + 1 : copy], target):
        return False
    statement = block[definition]
    compound = any(
        isinstance(getattr(statement, field, None), list)
        for field in ("body", "orelse")
    )
    if not compound:
        return True
    source = copied_name(block[copy])
    held = name_counts(statement, "Store").get(source, 0)
    return held == stores and not _mentions([statement], target)


def _copied_temporary(statement, temporaries, loads):
    source = copied_name(statement)
    if source in temporaries and loads.get(source) == 1:
        return source
    return None


def _last_definition(block, identifier):
    for position in range(len(block) - 1, -1, -1):
        stored = {
            node.id
            for node in trees.walk(block[position])
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
        }
        if identifier in stored:
            return position
    return None


def rename(tree, old: str, new: str, context: type) -> None:
    """Rename the names ``old`` of ``context`` (gast.Load or gast.Store) in a tree
    (or list of trees) to ``new``."""
    for root in tree if isinstance(tree, list) else [tree]:
        for node in trees.walk(root):
            if (
                isinstance(node, gast.Name)
                and node.id == old
                and isinstance(node.ctx, context)
            ):
                node.id = new


def _mentions(body, identifier) -> bool:
    return any(
        isinstance(node, gast.Name) and node.id == identifier
        for statement in body
        for node in trees.walk(statement)
    )


def _is_default(argument, name, op) -> bool:
    return (
        name in op.defaults
        and isinstance(argument, gast.Constant)
        and type(argument.value) is type(op.defaults[name])
        and argument.value == op.defaults[name]
    )


def drop_default_arguments(body: list, namespace: dict) -> list:
    """Leave out trailing positional arguments of operator calls that equal their
    defaults (``unreduce(dy, x, None, False)`` -> ``unreduce(dy, x)``)."""
    transformer = _DropDefaults(namespace)
    return [transformer.visit(statement) for statement in body]


class _DropDefaults(trees.Transformer):
    """``drop_default_arguments``' rewrite (a class made once, not per call)."""

    def __init__(self, namespace: dict) -> None:
        self.namespace = namespace

    def visit_Call(self, node):
        self.generic_visit(node)
        op = trees.called_value(node, self.namespace)
        names = getattr(op, "param_names", None)
        if not names:
            return node
        if op.positional:  # (by name: its positional order is not its own)
            node = trees.passed_by_name(node, op.positional) or node
        arity = len(op.input_names)
        while len(node.args) > arity:
            position = len(node.args) - 1 - arity
            argument = node.args[-1]
            name = names[position] if position < len(names) else None
            if _is_default(argument, name, op):
                node.args.pop()
            else:
                break
        node.keywords = [
            k for k in node.keywords if not _is_default(k.value, k.arg, op)
        ]
        return node


_ARITHMETIC = (gast.Add, gast.Sub, gast.Mult, gast.Div)


def fold_reduced_counts(
    body: list, namespace: dict, shapes: dict, dtypes: dict
) -> list:
    """``reduced_count(x, axis)`` -> the number, where ``x``'s shape is known (the
    gradient of a mean reads ``dy / 8``, as one would write it), and ``floating(x)``
    -> True or False where ``x``'s dtype is; then the arithmetic around them."""
    folder = _FoldCounts(namespace, shapes, dtypes)
    if not _names_any(body, namespace, folder.folded_functions):
        return list(body)  # (nothing to fold: the walk below would change nothing)
    arithmetic, folded_body = _Fold(), []
    for statement in body:
        folder.folded = False
        statement = folder.visit(statement)
        if folder.folded:  # ``(12 - 0)``, ``a if True else b``: done now
            statement = arithmetic.visit(statement)
        folded_body.append(statement)
    return folded_body


def _names_any(body: list, namespace: dict, values: tuple) -> bool:
    """Whether ``body`` reads a name bound in ``namespace`` to one of ``values``:
    a rewrite of calls of those alone has nothing to do where none is (a walk
    over names costs less than a rewriting visit of every node)."""
    return any(
        any(namespace.get(read) is value for value in values) for read in loads(body)
    )


class _FoldCounts(trees.Transformer):
    """``fold_reduced_counts``' rewrite of calls (a class made once, not per call);
    ``folded`` says whether it changed the statement it last visited."""

    def __init__(self, namespace: dict, shapes: dict, dtypes: dict) -> None:
        from ppto.ops.elementwise import where
        from ppto.ops.reductions import (
            degrees_of_freedom,
            divide_by_count,
            reduced_count,
        )
        from ppto.ops.shape import floating

        self.namespace, self.shapes, self.dtypes = namespace, shapes, dtypes
        self.folded = False
        self.folded_functions = (where, reduced_count, degrees_of_freedom, floating)
        self.reduced_count, self.divide_by_count = reduced_count, divide_by_count

    def visit_Call(self, node):
        exact = self.divides_exactly(node)
        self.generic_visit(node)
        where, reduced_count, degrees_of_freedom, floating = self.folded_functions
        function = trees.called_value(node, self.namespace)
        if exact:  # ``divide_by_count(dy, 8)`` -> ``dy / 8``
            self.folded = True
            return gast.BinOp(node.args[0], gast.Div(), node.args[1])
        chosen = _chosen(node) if function is where else None
        if chosen is not None:  # ``where(True, d, 0.0)`` -> ``d``
            self.folded = True
            return chosen
        value = None
        if function is reduced_count and len(node.args) == 2:
            value = self.count_of(node)
        elif function is degrees_of_freedom and len(node.args) == 3:
            count, ddof = self.count_of(node), literal(node.args[2])
            if count is not None and type(ddof) is int:
                value = max(count - ddof, 0)
        elif function is floating and len(node.args) == 1:
            value = self.kind_of(node)
        if value is None or node.keywords:
            return node
        self.folded = True
        return gast.Constant(value, None)

    def divides_exactly(self, node) -> bool:
        """Whether ``node`` is ``divide_by_count(dy, reduced_count(x, axis))``
        where ``dy / count`` gives what NumPy's mean gives: a count exact in
        float16 (at most 2048), or ``x``'s dtype known and not float16 (whose
        mean NumPy divides in float32)."""
        called = trees.called_value(node, self.namespace)
        if called is not self.divide_by_count or len(node.args) != 2 or node.keywords:
            return False
        counted = node.args[1]
        if not (
            isinstance(counted, gast.Call)
            and trees.called_value(counted, self.namespace) is self.reduced_count
            and len(counted.args) == 2
            and isinstance(counted.args[0], gast.Name)
        ):
            return False
        count = self.count_of(counted)
        if count is not None and count <= 2048:
            return True
        dtype = self.dtypes.get(counted.args[0].id)
        return dtype is not None and np.dtype(dtype) != np.float16

    def count_of(self, node):
        from ppto.ops.reductions import reduced_axes

        shape = expression_shape(node.args[0], self.shapes, self.dtypes)
        axis = literal(node.args[1])
        if not isinstance(shape, tuple) or axis is NOT_LITERAL:
            return None
        try:
            axes = reduced_axes(len(shape), axis)
        except (TypeError, ZeroDivisionError):
            return None  # an axis the reduction itself refuses
        count = 1
        for number in axes:
            count *= shape[number]
        return int(count)

    def kind_of(self, node):
        argument = node.args[0]
        dtypes = self.dtypes
        dtype = dtypes.get(argument.id) if isinstance(argument, gast.Name) else None
        return None if dtype is None else np.dtype(dtype).kind in "fc"


def _chosen(node):
    """``d`` for ``where(True, d, e)``, ``e`` for ``where(False, d, e)`` (of two
    numbers, a float where either is one, as NumPy's result), else None."""
    test = node.args[0] if len(node.args) == 3 and not node.keywords else None
    if not (isinstance(test, gast.Constant) and type(test.value) is bool):
        return None
    chosen = node.args[1] if test.value else node.args[2]
    if all(_number(branch) for branch in node.args[1:]) and any(
        type(branch.value) is float for branch in node.args[1:]
    ):
        return gast.Constant(float(chosen.value), None)
    return chosen


def elide_broadcasts(body: list, namespace: dict, shapes: dict, dtypes: dict) -> list:
    """``b = unreduce(s, like)`` read by arithmetic whose other operand has the shape
    of ``like``: the arithmetic broadcasts ``s`` itself, so ``b`` need not be made
    (``dt = unreduce(dy, (n,)); dt * t`` -> ``dy * t``). Only where ``s`` keeps the
    rank of ``like`` or is a full reduction's scalar, so broadcasting lines its axes
    up; only within one block, up to the next assignment of either name."""
    from ppto.ops.reductions import unreduce

    for statement in body:
        for _, inner in nested_blocks(statement):
            elide_broadcasts(inner, namespace, shapes, dtypes)
    for position, statement in enumerate(body):
        found = _broadcast_of_scalar(statement, namespace, unreduce, shapes)
        if found is None:
            continue
        broadcast, source, shape = found
        # the broadcast and its copies (``dt1 = dt2``)
        substitute = _SubstituteBroadcast(
            {broadcast}, source, shape, namespace, (shapes, dtypes)
        )
        aliases, read = substitute.aliases, loads(source)
        for later in body[position + 1 :]:
            written = stores(later)
            if read & written:
                break
            if not aliases.isdisjoint(loads(later)):  # (else nothing to rewrite)
                substitute.visit(later)
            if copied_name(later) in aliases:
                aliases.add(later.targets[0].id)
                continue
            aliases -= written
            if not aliases:
                break
    return body


class _SubstituteBroadcast(trees.Transformer):
    """``elide_broadcasts``' rewrite of the arithmetic after one broadcast ``b`` of
    ``s`` (``aliases``: ``b`` and its copies) to ``shape``. (Classes made once, not
    for every broadcast found.)"""

    def __init__(
        self, aliases: set, source, shape: tuple, namespace: dict, known: tuple
    ) -> None:
        self.aliases, self.source, self.shape = aliases, source, shape
        self.namespace = namespace
        self.shapes, self.dtypes = known  # (the values' known shapes and dtypes)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, _ARITHMETIC):
            return node
        for side, other in (("left", "right"), ("right", "left")):
            operand = getattr(node, side)
            if (
                self.scalar_like(operand)
                and self.shape_of(getattr(node, other)) == self.shape
            ):
                renamed = _ReadSource(self.aliases, self.source).visit(clone(operand))
                setattr(node, side, renamed)
        return node

    def scalar_like(self, node) -> bool:
        """The broadcast, negated or scaled by numbers (``-b``, ``b * 2``):
        reading ``s`` there instead gives what broadcasting gives."""
        if isinstance(node, gast.Name):
            return node.id in self.aliases
        if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
            return self.scalar_like(node.operand)
        if isinstance(node, gast.BinOp) and isinstance(node.op, _ARITHMETIC):
            sides = (node.left, node.right)
            return any(self.scalar_like(x) for x in sides) and all(
                self.scalar_like(x) or isinstance(x, gast.Constant) for x in sides
            )
        return False

    def shape_of(self, node):
        """An expression's shape where known: ``expression_shape``'s, and that of
        an elementwise operator applied to operands of known shapes."""
        from ppto.fusion.kernels import ELEMENTWISE

        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name):
            op = self.namespace.get(node.func.id)
            if getattr(op, "name", None) in ELEMENTWISE and not node.keywords:
                operands = [self.shape_of(argument) for argument in node.args]
                if operands and None not in operands:
                    try:
                        return tuple(np.broadcast_shapes(*operands))
                    except ValueError:
                        return None
            return None
        return expression_shape(node, self.shapes, self.dtypes)


class _ReadSource(trees.Transformer):
    """Reads of the broadcast (``aliases``) made reads of its ``source``."""

    def __init__(self, aliases: set, source) -> None:
        self.aliases, self.source = aliases, source

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, gast.Load):
            return clone(self.source)
        return node


def _broadcast_of_scalar(statement, namespace, unreduce, shapes):
    """``(b, s, shape)`` for ``b = unreduce(s, like, axis, keepdims)`` with ``like``'s
    shape known and ``s`` broadcastable as it is (see ``elide_broadcasts``)."""
    if not (
        single_target(statement)
        and isinstance(statement.value, gast.Call)
        and isinstance(statement.value.func, gast.Name)
        and namespace.get(statement.value.func.id) is unreduce
    ):
        return None
    call = statement.value
    arguments = dict(bound_arguments(call, ("x", "like", "axis", "keepdims")))
    source, like = arguments.get("x"), arguments.get("like")
    axis = literal(arguments.get("axis", gast.Constant(None, None)))
    keepdims = literal(arguments.get("keepdims", gast.Constant(False, None)))
    if not _cheap(source, namespace) or not (axis is None or keepdims is True):
        return None
    shape = shapes.get(like.id) if isinstance(like, gast.Name) else literal(like)
    if not (isinstance(shape, tuple) and all(isinstance(n, int) for n in shape)):
        return None
    return statement.targets[0].id, source, shape


def _cheap(node, namespace) -> bool:
    """Names, numbers, arithmetic on them and ``reduced_count``: an expression worth
    repeating where it is read rather than broadcasting it once."""
    from ppto.ops.reductions import reduced_count

    if isinstance(node, (gast.Name, gast.Constant)):
        return True
    if isinstance(node, gast.BinOp) and isinstance(node.op, _ARITHMETIC):
        return _cheap(node.left, namespace) and _cheap(node.right, namespace)
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        return _cheap(node.operand, namespace)
    return (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and namespace.get(node.func.id) is reduced_count
    )


def drop_unit_factors(body: list, namespace: dict, activity) -> list:
    """``one * t`` -> ``t`` where ``one = ones_like(y)`` is the seed of a gradient (a
    0-d one of y's dtype) and ``t`` has that same dtype: the product would be an exact
    copy (``dy = dsum * t`` for ``sum(t)``). ``t`` must be a new array (made by an
    elementwise operator), or the product be read only by arithmetic, so that no
    gradient handed back aliases an array the caller holds."""
    from ppto.ops.shape import ones_like

    units = {}
    for statement in body:  # seeds are assigned once, at the top level
        value = getattr(statement, "value", None)
        if (
            single_target(statement)
            and isinstance(value, gast.Call)
            and isinstance(value.func, gast.Name)
            and namespace.get(value.func.id) is ones_like
            and len(value.args) == 1
            and isinstance(value.args[0], gast.Name)
            and activity.shapes.get(value.args[0].id) == ()
            and activity.dtypes.get(value.args[0].id) is not None
        ):
            units[statement.targets[0].id] = activity.dtypes[value.args[0].id]
    if not units:
        return body
    stored = name_counts(body, "Store")
    units = {u: d for u, d in units.items() if stored.get(u) == 1}  # assigned once
    if not units:
        return body
    # only statements reading a unit can change: the others are not visited
    readers = [not units.keys().isdisjoint(loads(statement)) for statement in body]
    if not any(readers):
        return body
    # which names only arithmetic reads matters only where a product's factor is
    # no new array: a walk of every statement, most of this pass's time, saved
    # where no statement can ask
    private, fresh = set(), activity.fresh
    if any(
        _may_keep_a_product(statement, units, fresh)
        for statement, reads in zip(body, readers)
        if reads
    ):
        private = _read_only_by_arithmetic(body)
    drop = _DropUnits(units, activity, private)
    return [
        drop.visit(statement) if reads else statement
        for statement, reads in zip(body, readers)
    ]


class _DropUnits(trees.Transformer):
    """``drop_unit_factors``' rewrite (a class made once, not per call): ``units``
    maps each unit's name to its dtype; ``private``, the names only arithmetic
    reads."""

    def __init__(self, units: dict, activity, private: set) -> None:
        self.units, self.activity, self.private = units, activity, private

    def factor(self, node):
        """The factor the unit multiplies in ``node``, if it may stand for it."""
        if not (isinstance(node, gast.BinOp) and isinstance(node.op, gast.Mult)):
            return None
        units, dtypes = self.units, self.activity.dtypes
        for unit, other in ((node.left, node.right), (node.right, node.left)):
            if (
                isinstance(unit, gast.Name)
                and unit.id in units
                and isinstance(other, gast.Name)
                and dtypes.get(other.id) is not None  # (None == float64!)
                and dtypes[other.id] == units[unit.id]
            ):
                return other
        return None

    def visit_Assign(self, node):
        self.generic_visit(node)
        other = self.factor(node.value)
        target = single_target(node)
        if other is not None and target is not None:
            if other.id in self.activity.fresh or target in self.private:
                node.value = other
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        other = self.factor(node)
        return other if other is not None and other.id in self.activity.fresh else node


def _may_keep_a_product(statement, units: dict, fresh: set) -> bool:
    """Whether ``_DropUnits`` may ask, in ``statement``, which names only arithmetic
    reads: it does at an assignment of a unit times a name that is no new array.
    Its rewriting of a product's operands leaves a name only where one was or
    puts a new array's (a product of a unit), so the assignment is one of a
    product of a name that is no new array and a unit or another product (in a
    compound statement: its own assignments are not looked into)."""
    if not isinstance(statement, gast.Assign):
        return hasattr(statement, "body")
    value = statement.value
    if not (isinstance(value, gast.BinOp) and isinstance(value.op, gast.Mult)):
        return False
    for unit, other in ((value.left, value.right), (value.right, value.left)):
        if (
            isinstance(other, gast.Name)
            and other.id not in fresh
            and (isinstance(unit, gast.BinOp) or getattr(unit, "id", None) in units)
        ):
            return True
    return False


def _read_only_by_arithmetic(body: list) -> set:
    """Names every read of which is an operand of arithmetic (whose result is a new
    array), so they never reach the caller or an alias."""
    reads = load_counts(body)
    operands: dict = {}
    for statement in body:
        for node in trees.walk(statement):
            children = ()
            if isinstance(node, gast.BinOp):
                children = (node.left, node.right)
            elif isinstance(node, gast.UnaryOp):
                children = (node.operand,)
            for child in children:
                if isinstance(child, gast.Name):
                    operands[child.id] = operands.get(child.id, 0) + 1
    return {name for name, count in operands.items() if reads.get(name) == count}
