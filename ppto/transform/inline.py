"""Inlining a gradient rule: the rule's ``backward`` body, as source, with its
parameters replaced by the operator's actual arguments, ``dY`` by the adjoint of the
result, its local names made fresh, and its free names resolved to objects the
generated code can see. Returns the statements to run and one gradient expression per
input (``None`` where the input needs none).
"""

from __future__ import annotations

import collections
import inspect
from functools import cache

import gast
import numpy as np

from ppto.errors import GradError, PptoError
from ppto.transform import ir, trees
from ppto.transform.analyze import NOT_LITERAL, literal
from ppto.transform.names import Namer
from ppto.transform.optimize import fold_constants
from ppto.transform.source import closure_values
from ppto.transform.structure import until_exit
from ppto.transform.syntax import parse
from ppto.transform.trees import clone, stores


@cache
def _parsed_rule(source: str):
    outer = parse(source).body[0]
    inner = next(node for node in outer.body if isinstance(node, gast.FunctionDef))
    prelude = [
        node
        for node in outer.body
        if node is not inner and not isinstance(node, gast.Return)
    ]
    return outer, inner, prelude


def operand_expr(operand) -> gast.expr:
    """The expression that reads an operand in generated code."""
    if isinstance(operand, str):
        return gast.Name(operand, gast.Load(), None, None)
    if isinstance(operand, ir.Const):
        return gast.Constant(operand.value, None)
    if isinstance(operand, ir.Verbatim):
        return clone(operand.expr)
    if isinstance(operand, list):
        return gast.List([operand_expr(item) for item in operand], gast.Load())
    raise TypeError(operand)


class _Substitute(trees.Transformer):
    """A rule's statements with its names bound, written as a copy: the rule's
    parsed template is never changed (one pass, where a clone and then a
    substitution over it were two)."""

    def __init__(
        self, bindings: dict, resolve_global, ranks: dict, namespace=None
    ) -> None:
        self.bindings = bindings
        self.namespace = namespace if namespace is not None else {}
        self.resolve_global = resolve_global
        self.ranks = ranks
        resolved = resolve_global(
            gast.Name("matrix_transpose", gast.Load(), None, None)
        )
        self.transpose_name = resolved.id if resolved is not None else None
        resolved = resolve_global(gast.Name("getitem", gast.Load(), None, None))
        self.getitem_name = resolved.id if resolved is not None else None

    def generic_visit(self, node):
        return super().generic_visit(trees.copied_node(node))

    def visit_Name(self, node):
        if node.id in self.bindings:
            replacement = self.bindings[node.id]
            if isinstance(replacement, str):
                return gast.Name(replacement, node.ctx, None, None)
            return clone(replacement)
        if isinstance(node.ctx, gast.Load):
            return self.resolve_global(node) or self.generic_visit(node)
        return self.generic_visit(node)

    def visit_Call(self, node):
        helper = self._rank_helper(node.func)
        node = self.generic_visit(node)
        if helper is not None:
            folded = _fold_rank_helper(helper, node, self.ranks)
            if folded is not None:
                return folded
        function = node.func
        from ppto.transform.analyze import expression_rank

        if (
            isinstance(function, gast.Name)
            and function.id == self.transpose_name
            and len(node.args) == 1
            and expression_rank(node.args[0], self.ranks) == 2
        ):  # a matrix: B.T reads better than matrix_transpose(B)
            return gast.Attribute(node.args[0], "T", gast.Load())
        if (
            isinstance(function, gast.Name)
            and function.id == self.getitem_name
            and len(node.args) == 2
            and not node.keywords
        ):  # slices written out: dY[::-1] reads better than getitem(dY, slice(...))
            written = _slice_syntax(node.args[1])
            if written is not None:
                return gast.Subscript(node.args[0], written, gast.Load())
        return node

    def _rank_helper(self, function):
        """The ``rank_helper`` a call of the rule's calls (before its name is
        resolved for the generated code), or None."""
        if not isinstance(function, gast.Name) or function.id in self.bindings:
            return None
        value = self.namespace.get(function.id)
        folds = getattr(value, "folds_on_ranks", None)
        return value if folds is not None else None

    def visit_Attribute(self, node):
        if node.attr == "ndim" and isinstance(node.value, gast.Name):
            from ppto.transform.analyze import expression_rank

            bound = self.bindings.get(node.value.id)
            if isinstance(bound, str):
                bound = gast.Name(bound, gast.Load(), None, None)
            rank = expression_rank(bound, self.ranks) if bound is not None else None
            if rank is not None:
                return gast.Constant(rank, None)
        base = node
        while isinstance(base, gast.Attribute):
            base = base.value
        if not (isinstance(base, gast.Name) and base.id in self.bindings):
            resolved = self.resolve_global(node)
            if resolved is not None:
                return resolved
        return self.generic_visit(node)


def _local_names(statements) -> set[str]:
    return stores(statements)


def inline_rule(
    rule,
    statement: ir.Apply,
    adjoint: str,
    needed: list[bool],
    namer: Namer,
    resolve_global,
    ranks: dict,
    dtypes: dict | None = None,
):
    """``(statements, gradients)`` for one application of ``rule`` (module doc);
    ``dtypes``: the operands' dtypes where known."""
    outer, inner, _ = _parsed_rule(rule.source)
    adjoint_binding = {inner.args.args[0].id: adjoint}
    body = _instantiate(
        rule, statement, adjoint_binding, namer, resolve_global, ranks, dtypes
    )
    return _returns_to_gradients(
        body, len(statement.op.input_names), needed, namer, statement.op.name
    )


def inline_tangent(
    rule,
    statement: ir.Apply,
    tangents: list,
    namer: Namer,
    resolve_global,
    ranks: dict,
    dtypes: dict | None = None,
):
    """``(statements, tangent expression)`` for one application of a tangent rule;
    ``tangents`` holds one expression per input."""
    _, inner, _ = _parsed_rule(rule.source)
    inner_bindings = {a.id: t for a, t in zip(inner.args.args, tangents)}
    body = _instantiate(
        rule, statement, inner_bindings, namer, resolve_global, ranks, dtypes
    )
    returns = [node for node in _walk_statements(body) if isinstance(node, gast.Return)]
    if len(returns) == 1 and body[-1] is returns[0]:
        return body[:-1], returns[0].value
    # a branch the ranks left undecided returns on its own path: each path assigns
    # the tangent (a return copied as it stands would leave the generated function)
    tangent = namer.temporary()
    code = until_exit(body, gast.Return, lambda node: [_assign(tangent, node.value)])
    return code, gast.Name(tangent, gast.Load(), None, None)


def _instantiate(
    rule,
    statement: ir.Apply,
    inner_bindings: dict,
    namer: Namer,
    resolve_global,
    ranks: dict,
    dtypes: dict | None = None,
) -> list:
    """The rule's inner body with parameters, inner arguments and locals bound."""
    outer, inner, prelude = _parsed_rule(rule.source)
    op = statement.op
    arguments = dict(zip(op.input_names, statement.inputs))
    bindings: dict = {}
    keyword_defaults = dict(zip(outer.args.kwonlyargs, outer.args.kw_defaults))
    for argument in [*outer.args.args, *outer.args.kwonlyargs]:
        name = argument.id
        if name == "out":
            bindings[name] = statement.target
        elif name in arguments:
            bindings[name] = operand_expr(arguments[name])
        elif name in statement.params:
            bindings[name] = clone(statement.params[name])
        elif argument in keyword_defaults:  # (def _(x, *, eps=1e-3): NameError)
            default = keyword_defaults[argument]
            bindings[name] = clone(default) if default else gast.Constant(None, None)
        elif argument is not None:
            bindings[name] = _default_of(outer, name)
    bindings.update(inner_bindings)
    body = _taken(prelude + inner.body, bindings, ranks, dtypes or {})  # (its own)
    copies = []
    for name in sorted(_local_names(body)):
        fresh = namer.fresh(name)
        if name in bindings:  # a parameter the rule rebinds starts from its value
            copies.append(_assign(fresh, _bound_expr(bindings[name])))
        bindings[name] = fresh
    namespace = collections.ChainMap(closure_values(rule.fn), rule.fn.__globals__)
    substitute = _Substitute(bindings, resolve_global, ranks, namespace)
    body = [substitute.visit(node) for node in body]
    return fold_constants(copies + body)


def _fold_rank_helper(helper, call, ranks: dict):
    """The result of a ``rank_helper``'s call, as a literal, where its arguments are
    literals, and arrays whose ranks are known (or not needed: einsum subscripts
    without ``...``); else None, and the call stays in the generated code."""
    from ppto.ops.rules import RankNotKnown, RankStandIn
    from ppto.transform.analyze import expression_rank

    if call.keywords or any(isinstance(a, gast.Starred) for a in call.args):
        return None
    try:
        parameters = list(inspect.signature(helper).parameters)
    except (TypeError, ValueError):
        return None
    if len(call.args) > len(parameters):
        return None
    values = []
    for parameter, argument in zip(parameters, call.args):
        if parameter in helper.folds_on_ranks:
            values.append(RankStandIn(expression_rank(argument, ranks)))
            continue
        value = literal(argument)
        if value is NOT_LITERAL:  # (only a run will tell)
            return None
        values.append(value)
    try:
        result = helper(*values)
    except (RankNotKnown, PptoError):  # (an error is raised where the code runs)
        return None
    return _literal(result)


def _literal(value):
    """``value`` (a string, number, bool, None, or tuple or list of them) written
    as an expression; None for anything else."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return gast.Constant(value, None)
    if isinstance(value, (tuple, list)):
        items = [_literal(item) for item in value]
        if any(item is None for item in items):
            return None
        kind = gast.Tuple if isinstance(value, tuple) else gast.List
        return kind(items, gast.Load())
    return None


def _bound_expr(bound) -> gast.expr:
    """The expression a binding stands for (a name, or a copy of its tree)."""
    if isinstance(bound, str):
        return gast.Name(bound, gast.Load(), None, None)
    return clone(bound)


def _taken(body: list, bindings: dict, ranks: dict, dtypes: dict) -> list:
    """The statements of a rule that run for these ranks: an ``if`` on a parameter's
    ``ndim`` that the ranks decide is replaced by its branch (before anything is
    copied: a rule such as dot's has a branch per case)."""
    from ppto.transform.analyze import expression_rank

    def rank(parameter: str):
        bound = bindings.get(parameter)
        if isinstance(bound, str):
            bound = gast.Name(bound, gast.Load(), None, None)
        return expression_rank(bound, ranks) if bound is not None else None

    out = []
    for statement in body:
        decided = (
            _decide(statement.test, rank, bindings, ranks, dtypes)
            if isinstance(statement, gast.If)
            else None
        )
        if decided is None:
            out.append(statement)
            if isinstance(statement, gast.Return):
                break
            continue
        branch = _taken(
            statement.body if decided else statement.orelse, bindings, ranks, dtypes
        )
        out.extend(branch)
        if branch and isinstance(branch[-1], gast.Return):
            break  # what follows is not reached
    return out


_COMPARISONS = {
    gast.Eq: lambda a, b: a == b,
    gast.NotEq: lambda a, b: a != b,
    gast.Lt: lambda a, b: a < b,
    gast.LtE: lambda a, b: a <= b,
    gast.Gt: lambda a, b: a > b,
    gast.GtE: lambda a, b: a >= b,
}


def _decide(test, rank, bindings: dict, ranks: dict, dtypes: dict):
    """The value of ``p.ndim <op> <int>``, ``may_repeat(index)`` or
    ``whole_numbers(p)`` (or ``and``/``or``/``not`` of such) when the ranks, the
    index written and the dtypes known decide it, else None."""
    if isinstance(test, gast.Call) and getattr(test.func, "id", "") == "whole_numbers":
        argument = test.args[0] if len(test.args) == 1 else None
        dtype = _bound_dtype(bindings.get(getattr(argument, "id", None)), dtypes)
        return None if dtype is None else np.dtype(dtype).kind in "biu"
    if (
        isinstance(test, gast.Call)
        and getattr(test.func, "id", "") == "reorders_in_place"
        and len(test.args) == 1
    ):  # (where the index is not written out, the scatter: right for any index)
        return _reorders_in_place(bindings.get(getattr(test.args[0], "id", None)))
    if isinstance(test, gast.Call) and getattr(test.func, "id", "") == "may_repeat":
        argument = test.args[0] if len(test.args) == 1 else None
        bound = bindings.get(getattr(argument, "id", None))
        unique = _unique(bound, ranks)
        return None if unique is None else not unique
    if isinstance(test, gast.BoolOp):
        values = [
            _decide(value, rank, bindings, ranks, dtypes) for value in test.values
        ]
        if None in values:
            return None
        return all(values) if isinstance(test.op, gast.And) else any(values)
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        value = _decide(test.operand, rank, bindings, ranks, dtypes)
        return None if value is None else not value
    if not (
        isinstance(test, gast.Compare)
        and len(test.ops) == 1
        and type(test.ops[0]) in _COMPARISONS
        and isinstance(test.left, gast.Attribute)
        and test.left.attr == "ndim"
        and isinstance(test.left.value, gast.Name)
        and isinstance(test.comparators[0], gast.Constant)
        and type(test.comparators[0].value) is int
    ):
        return None
    known = rank(test.left.value.id)
    if known is None:
        return None
    return _COMPARISONS[type(test.ops[0])](known, test.comparators[0].value)


def _bound_dtype(bound, dtypes: dict):
    """The dtype of the operand a rule's parameter is bound to (a name, or a name
    indexed: ``c[1:]`` has c's), where known."""
    if isinstance(bound, str):
        return dtypes.get(bound)
    while isinstance(bound, gast.Subscript):
        bound = bound.value
    return dtypes.get(bound.id) if isinstance(bound, gast.Name) else None


def _unique(index, ranks: dict):
    """True where the index written selects no element twice (integers, slices,
    ``None``, ``...``, scalars, a list of distinct integers), False for a list
    repeating one, None where only its value will tell."""
    if isinstance(index, str):
        index = gast.Name(index, gast.Load(), None, None)
    if isinstance(index, gast.Constant):
        return (
            index.value is None or index.value is Ellipsis or type(index.value) is int
        )
    if isinstance(index, gast.Call) and getattr(index.func, "id", "") == "slice":
        return True
    if isinstance(index, gast.Tuple):
        parts = [_unique(part, ranks) for part in index.elts]
        return None if None in parts else all(parts)
    if isinstance(index, gast.List) and all(  # integers written out: repeats?
        isinstance(e, gast.Constant) and type(e.value) is int for e in index.elts
    ):
        values = [e.value for e in index.elts]
        return len(set(values)) == len(values)
    if isinstance(index, gast.Name):
        from ppto.transform.analyze import expression_rank

        return True if expression_rank(index, ranks) == 0 else None
    return None


def _reorders_in_place(index) -> bool:
    """Whether the index written is slices ``:`` and ``::-1`` and ``...`` only
    (``reorders_in_place`` in ppto/ops/indexing.py)."""
    if isinstance(index, gast.Tuple):
        return all(_reorders_in_place(part) for part in index.elts)
    if isinstance(index, gast.Constant):
        return index.value is Ellipsis
    bounds = _slice_bounds(index)
    if bounds is None:
        return False
    start, stop, step = (literal(part) for part in bounds)
    return start is None and stop is None and step in (None, 1, -1)


def _slice_bounds(index):
    """``(start, stop, step)`` of a written ``slice(...)`` call, else None."""
    if not (
        isinstance(index, gast.Call)
        and getattr(index.func, "id", "") == "slice"
        and not index.keywords
        and 1 <= len(index.args) <= 3
        and not any(isinstance(a, gast.Starred) for a in index.args)
    ):
        return None
    none = gast.Constant(None, None)
    if len(index.args) == 1:
        return none, index.args[0], none
    return tuple(index.args) + (none,) * (3 - len(index.args))


def _slice_syntax(index):
    """An index of written ``slice(...)`` calls and ``...`` in subscript syntax
    (``slice(None, None, -1)`` -> ``::-1``), else None."""
    if isinstance(index, gast.Tuple):
        parts = [_slice_syntax(part) for part in index.elts]
        if not parts or None in parts:
            return None
        return gast.Tuple(parts, gast.Load())
    if isinstance(index, gast.Constant) and index.value is Ellipsis:
        return index
    bounds = _slice_bounds(index)
    if bounds is None:
        return None
    start, stop, step = (
        None if isinstance(part, gast.Constant) and part.value is None else part
        for part in bounds
    )
    return gast.Slice(start, stop, step)


def _default_of(definition, name):
    arguments = definition.args
    defaults = arguments.defaults
    offset = len(arguments.args) - len(defaults)
    for position, argument in enumerate(arguments.args):
        if argument.id == name and position >= offset:
            return defaults[position - offset]
    return gast.Constant(None, None)


def _returns_to_gradients(body, count, needed, namer, op_name: str):
    """Straight-line rules give their return expressions; branching rules assign a
    gradient variable on each path (code after an ``if`` that returns moves into the
    branch that does not)."""
    returns = [node for node in _walk_statements(body) if isinstance(node, gast.Return)]
    if len(returns) == 1 and body and body[-1] is returns[0]:
        return body[:-1], _split(returns[0].value, count, needed, op_name)
    names = [namer.temporary() if needed[i] else None for i in range(count)]

    def assign_gradients(node) -> list:
        values = _split(node.value, count, needed, op_name)
        return [
            _assign(name, value if value is not None else gast.Constant(None, None))
            for name, value in zip(names, values)
            if name is not None
        ]

    gradients = [gast.Name(n, gast.Load(), None, None) if n else None for n in names]
    return until_exit(body, gast.Return, assign_gradients), gradients


def _walk_statements(body):
    for node in body:
        yield node
        if isinstance(node, gast.If):
            yield from _walk_statements(node.body)
            yield from _walk_statements(node.orelse)


def _split(value, count, needed, op_name: str):
    written_out = isinstance(value, (gast.Tuple, gast.List))  # (a list too, as read)
    if written_out and (count > 1 or len(value.elts) != 1):
        elements = list(value.elts)
    elif any(needed[1:]) and isinstance(value, (gast.Name, gast.Call)):
        # (a name or call holding them read as one gradient: "returns 1 gradient")
        raise GradError(
            f"the gradient rule of {op_name} returns "
            f"{gast.unparse(value).strip()} "
            f"from backward, which ppto reads as the rule's source: write the "
            f"{count} gradients out in the return, one per positional input "
            f"(return dx, dy, None for an input that gets none)"
        )
    else:
        elements = [value]
    missing_needed = any(needed[len(elements) :])  # would read as zero, silently
    if len(elements) > count or missing_needed:
        raise GradError(
            f"the gradient rule of {op_name} returns {len(elements)} "
            f"gradient{'s' if len(elements) != 1 else ''} from backward, but "
            f"{op_name} has {count} input{'s' if count != 1 else ''}: return one "
            "per positional input, in order, as a tuple (None for an input that "
            "gets none)"
        )
    elements += [None] * (count - len(elements))
    return [
        None if not needed[i] or _is_none(elements[i]) else elements[i]
        for i in range(count)
    ]


def _is_none(node) -> bool:
    return node is None or (isinstance(node, gast.Constant) and node.value is None)


def _assign(name, value):
    return gast.Assign([gast.Name(name, gast.Store(), None, None)], value, None)
