"""Activity analysis and rank inference over the normalized program.

A value is *varied* if it depends on a differentiated parameter through differentiable
operators, *useful* if the result depends on it; only values that are both get
adjoints. A value computed by something ppto cannot differentiate from a varied value
is *tainted*: using it on the way to the result would give a silently wrong gradient,
so that raises ``TransformError`` at its line. Ranks (numbers of axes) are propagated
from the arguments where they are known, so rules can be specialised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gast
import numpy as np

from ppto.errors import GradError, ShapeError
from ppto.fusion.kernels import ELEMENTWISE, TERNARY, ufunc
from ppto.ops.primitive import Primitive
from ppto.ops.reductions import REDUCTIONS, reduced_shape
from ppto.ops.shapes import ABSENT, SAME_AS_FIRST, SHAPE_RULES, result_shape
from ppto.ops.signature import matmul_shape
from ppto.transform import ir, trees


@dataclass
class Activity:
    varied: set = field(default_factory=set)
    useful: set = field(default_factory=set)
    tainted: dict = field(default_factory=dict)  # name -> Passive statement
    blocked: list = field(default_factory=list)  # nondifferentiable ops on the way
    whole: set = field(default_factory=set)  # results of whole numbers (no derivative)
    ranks: dict = field(default_factory=dict)
    # the ranks of a tuple's parts, where an operator returns it (eigh's (1, 2))
    part_ranks: dict = field(default_factory=dict)
    ranges: set = field(default_factory=set)  # variables holding a range()
    layouts: dict = field(default_factory=dict)  # image layout hints of variables
    # a tuple's items' hints, where it is built once (``return conv, pooled``)
    item_layouts: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)  # shapes known when specialising
    dtypes: dict = field(default_factory=dict)  # dtypes known when specialising
    made_new: set = field(default_factory=set)  # assigned by elementwise operators
    made_otherwise: set = field(default_factory=set)  # assigned by anything else
    # 0-d, a number (which ``+=`` rebinds) or a 0-d array (which it writes into):
    # names every assignment of which makes a number (see ``makes_a_number``),
    # and parameters passed as Python numbers, are in made_numbers alone
    made_numbers: set = field(default_factory=set)
    made_arrays: set = field(default_factory=set)  # (maybe: 0-d arrays or others)
    # (statement, operator name): image operators given an image whose layout
    # cannot be told (see _check_layouts)
    unknown_layouts: list = field(default_factory=list)
    own_lists: set = field(default_factory=set)  # lists the function makes (xs = [])
    # (call statement, activity) -> (shape, dtype) of the value a user function's
    # call returns, where the called function's analysis on its arguments' shapes
    # tells it (None: not known); without it calls' results have no known shape
    call_result: object = None
    # parameters given tuples or lists of Python numbers (told by the caller): a
    # call passing one on says so, for the called function's alias check
    numbers: set = field(default_factory=set)

    @property
    def fresh(self) -> set:
        """Values always made by elementwise operators: new arrays, aliasing none."""
        return self.made_new - self.made_otherwise

    def active(self, name) -> bool:
        return isinstance(name, str) and name in self.varied and name in self.useful

    def number(self, name) -> bool:
        """Whether ``name`` holds a number where it is 0-d, never a 0-d array."""
        return name in self.made_numbers and name not in self.made_arrays


def analyze(
    body: list,
    wrt: list[str],
    ranks: dict,
    source,
    layouts=None,
    shapes=None,
    dtypes=None,
    call_result=None,
) -> Activity:
    activity = Activity(
        varied=set(wrt),
        ranks=dict(ranks),
        layouts=dict(layouts or {}),
        shapes=dict(shapes or {}),
        dtypes=dict(dtypes or {}),
        call_result=call_result,
    )
    # (a parameter 0-d of no dtype is a Python number: arrays' dtypes are told)
    activity.made_numbers = {
        name
        for name, rank in ranks.items()
        if rank == 0 and name not in activity.dtypes
    }
    _forward(body, activity)
    _read_layouts(body, activity, set(ranks), source)
    activity.own_lists = {s.target for s in ir.walk(body) if isinstance(s, ir.ListNew)}
    _backward(body, activity)
    _check_taint(body, activity, source)
    _check_ranks(body, activity, source)  # (before a signature's ShapeError)
    _check_layouts(activity, source)
    _check_shapes(body, activity, source)
    return activity


def _check_ranks(body, activity: Activity, source) -> None:
    """An operator spelled as a NumPy function that means something else for its
    operands' ranks (``np.dot`` of 3-d arrays is not ``np.matmul``) raises
    ``TransformError`` at the user's line: generated code would compute the
    operator's meaning, a silently different value and derivative. On every path,
    since a rank is the same whether or not a branch is taken. Where a rank is not
    known, the statement runs an operator that checks the ranks it is given."""
    for statement in ir.walk(body):
        if getattr(statement, "rank_check", None) is None:
            continue
        check, call = statement.rank_check
        ranks = [operand_rank(x, activity.ranks) for x in statement.inputs[:2]]
        refusal = check.refusal(*ranks)
        if refusal is not None:
            raise source.error(call, refusal, "np.matmul(a, b), a @ b or a * b")
        if None in ranks:
            statement.op = check.checked


def _check_shapes(body, activity: Activity, source) -> None:
    """An operator whose arguments' shapes are known to break its signature raises
    ``ShapeError`` at the user's line now, as calling it on tensors does (the
    generated code would raise NumPy's error from its own line). Only statements
    that always run are checked: a branch not taken may hold code that would not
    fit these shapes."""
    for statement in body:
        if not isinstance(statement, ir.Apply) or not isinstance(
            statement.op, Primitive
        ):
            continue
        shapes = [  # (None for a list)
            operand_shape(x, activity.shapes, activity.dtypes) for x in statement.inputs
        ]
        if None in shapes or not shapes:
            continue
        try:
            statement.op.signature.check(statement.op.name, shapes)
        except ShapeError as error:
            where = statement.origin if statement.origin is not None else statement
            raise ShapeError(str(source.error(where, str(error)))) from None


def _any_varied(operands, activity) -> bool:
    return bool(ir.operand_names(operands) & activity.varied)


def _fixpoint(walk, block, activity: Activity) -> None:
    """Walk a loop body until what is known stops changing: the activity sets only
    grow and shapes and dtypes only ever become unknown (so this ends), but a change
    can take a pass per statement to come round (``b = c; c = c[1:]`` reaches
    ``b * b`` on the third pass)."""
    before = None
    while before != _state(activity):
        before = _state(activity)
        walk(block, activity)


def _state(activity: Activity) -> tuple:
    def unknown(values: dict) -> tuple:
        return len(values), sum(value is None for value in values.values())

    return (
        len(activity.varied),
        len(activity.useful),
        len(activity.tainted),
        unknown(activity.shapes),
        unknown(activity.dtypes),
        len(activity.made_arrays),
    )


# The hint of a value that may be an image whose layout cannot be told here: one
# that came through a helper, a tuple or code ppto leaves as it is.
UNKNOWN_LAYOUT = "unknown"


def _read_layouts(body: list, activity: Activity, parameters: set, source) -> None:
    """``x.layout`` read in the code becomes the layout the analysis knows for x:
    generated code runs on raw arrays, which have none. A value whose layout
    cannot be told here (it came through a helper, or differs round a loop) is
    refused rather than read as None."""
    made_here = parameters | {
        s.target for s in ir.walk(body) if isinstance(s, ir.Apply)
    }
    reader = _LayoutReader(activity.layouts, made_here, source)
    for statement in ir.walk(body):
        if isinstance(statement, ir.Passive):
            statement.node = reader.visit(statement.node)
        elif isinstance(statement, ir.Apply):
            statement.params = {k: reader.visit(v) for k, v in statement.params.items()}
            for operand in statement.inputs:
                if isinstance(operand, ir.Verbatim):
                    operand.expr = reader.visit(operand.expr)
        elif isinstance(statement, ir.While):
            statement.test = reader.visit(statement.test)


class _LayoutReader(trees.Transformer):
    def __init__(self, layouts: dict, made_here: set, source) -> None:
        self.layouts, self.made_here, self.source = layouts, made_here, source

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr != "layout" or not isinstance(node.value, gast.Name):
            return node
        name = node.value.id
        hint = self.layouts.get(name)
        if hint is None and name not in self.made_here or hint == UNKNOWN_LAYOUT:
            raise self.source.error(
                node,
                f"ppto cannot tell the image layout of {name} here (it came through "
                "a helper, or differs between paths or round a loop), and generated "
                "code reads raw arrays, which have no .layout",
                "read the layout where the tensor is an argument, or pass it as one",
            )
        return gast.copy_location(gast.Constant(hint, None), node)


def _layout_hint(operand, layouts: dict):
    if isinstance(operand, ir.Verbatim) and isinstance(operand.expr, gast.Name):
        operand = operand.expr.id
    return layouts.get(operand) if isinstance(operand, str) else None


def _take_layout(layouts: dict, target: str, hint) -> None:
    """``target`` gets ``hint``; one that gets two different ones (on two paths, or
    round a loop) cannot be told."""
    if hint is None:
        return
    known = layouts.get(target, hint)
    layouts[target] = hint if known == hint else UNKNOWN_LAYOUT


def _resolve_layout_parameter(statement: ir.Apply, activity: Activity) -> None:
    """An image operator without an explicit layout takes its first input's hint (as
    it does when called on tensors), decided here because generated code sees raw
    arrays (and before its result's shape is worked out: the shape depends on it)."""
    parameter = statement.params.get("layout")
    if isinstance(parameter, gast.Constant) and parameter.value is None:
        layouts = activity.layouts
        hint = _layout_hint(statement.inputs[0], layouts) if statement.inputs else None
        if hint == UNKNOWN_LAYOUT:
            activity.unknown_layouts.append((statement, statement.op.name))
        parameter.value = hint if hint in ("nchw", "nhwc") else "nchw"
        if "layout" not in statement.given:
            statement.given = (*statement.given, "layout")


def _resolve_layout(statement: ir.Apply, activity: Activity) -> None:
    """An operator that keeps layouts passes on its layout parameter's (see
    ``_resolve_layout_parameter``), or its first hinted input's, for a 4-d result,
    as tensors do."""
    layouts = activity.layouts
    parameter = statement.params.get("layout")
    if isinstance(parameter, gast.Constant):
        hint = parameter.value
    else:
        hints = (_layout_hint(x, layouts) for x in statement.inputs)
        hint = next((h for h in hints if h is not None), None)
    rank = activity.ranks.get(statement.target)
    if getattr(statement.op, "keeps_layout", False) and rank in (4, None):
        _take_layout(layouts, statement.target, hint)


def _resolve_passive_layouts(statement: ir.Passive, activity: Activity) -> None:
    """The layout of an image operator called in code left as it is (marked by the
    normalizer: ``layout=None`` with the image it is for), decided as for one it
    differentiates: the image's hint, else NCHW; not told, refused."""
    for node in trees.walk(statement.node):
        image = getattr(node, "image_of", None)
        if image is None or node.value is not None:
            continue
        hint = activity.layouts.get(image.id) if isinstance(image, gast.Name) else None
        if hint == UNKNOWN_LAYOUT:
            activity.unknown_layouts.append((statement, node.image_operator))
        node.value = hint if hint in ("nchw", "nhwc") else "nchw"


def _pass_on_layouts(statement, activity: Activity) -> None:
    """The hints of values made by statements other than operators: a copy keeps its
    source's; arithmetic ppto leaves as it is (``h = x * 2.0`` of an ``x`` not
    differentiated) keeps that of what it reads, as tensors do; anything else made
    from a hinted image (a helper's result, a tuple's item, an opaque call) cannot be
    told. (A hint lost made a later image operator take NCHW: a silently wrong value
    and derivative for NHWC tensors.)"""
    layouts = activity.layouts
    if isinstance(statement, ir.Copy):
        _take_layout(layouts, statement.target, _layout_hint(statement.source, layouts))
        return
    if isinstance(statement, ir.Pack):  # (one built twice: neither is told)
        items = tuple(_layout_hint(item, layouts) for item in statement.items)
        known = activity.item_layouts.get(statement.target, items)
        activity.item_layouts[statement.target] = items if known == items else None
    reads = {name for name in ir.reads(statement) if name in layouts}
    if isinstance(statement, ir.Passive) and isinstance(statement.node, gast.Assign):
        reads |= {name for name in statement.reads if name in layouts}
    hints = {layouts[name] for name in reads}
    if not hints - {"nchw"}:
        return  # (what NCHW values make is NCHW, the default, anyway)
    arithmetic = (
        isinstance(statement, ir.Passive)
        and isinstance(statement.node, gast.Assign)
        and _arithmetic(statement.node.value)
        and len(hints) == 1
    )
    hint = next(iter(hints)) if arithmetic else UNKNOWN_LAYOUT
    for target in ir.writes(statement):
        _take_layout(layouts, target, hint)


def _arithmetic(node) -> bool:
    """Whether ``node`` is only names, numbers and arithmetic (elementwise: keeps
    layouts)."""
    if isinstance(node, (gast.Name, gast.Constant)):
        return True
    if isinstance(node, gast.BinOp) and not isinstance(node.op, gast.MatMult):
        return _arithmetic(node.left) and _arithmetic(node.right)
    if isinstance(node, gast.UnaryOp):
        return _arithmetic(node.operand)
    return False


def _check_layouts(activity: Activity, source) -> None:
    """An image operator without a layout, given a value whose layout cannot be
    told, raises ``TransformError`` at its line (NCHW could be silently wrong)."""
    if activity.unknown_layouts:
        statement, operator = activity.unknown_layouts[0]
        where = statement.origin if statement.origin is not None else statement
        raise source.error(
            where,
            f"ppto cannot tell the image layout of the input of ppto.{operator} "
            "here: it comes from an image with a layout hint through a helper "
            "function, a tuple or code ppto does not differentiate",
            f"pass layout='nhwc' (or 'nchw') to ppto.{operator}",
        )


def _is_range(node) -> bool:
    value = getattr(node, "value", None)
    return isinstance(value, gast.Call) and getattr(value.func, "id", "") == "range"


def _spread_taint(statement, activity: Activity) -> None:
    """A value assembled from, copied from or popped out of a tainted one (a list an
    opaque call built), or computed from one by code ppto leaves as it is (``y * y``
    of a tainted ``y`` that nothing varied reaches), is tainted too."""
    if isinstance(
        statement,
        (ir.Copy, ir.Pack, ir.Unpack, ir.ListPop, ir.ListGet, ir.ListCall, ir.Passive),
    ):
        sources = set(ir.reads(statement)) & set(activity.tainted)
        if sources:
            origin = _first_opaque(sources, activity)
            for name in ir.writes(statement):
                activity.tainted.setdefault(name, origin)
    elif isinstance(statement, ir.ListAppend):  # a list holding a tainted value
        sources = ir.operand_names(statement.value) & set(activity.tainted)
        if sources:
            origin = _first_opaque(sources, activity)
            activity.tainted.setdefault(statement.target, origin)


def _first_opaque(names, activity: Activity):
    """Of the opaque calls tainting ``names``, the first in the code: the one an
    error points at (of q = f(x); k = f(x); q * k, f's call for q, not the one whose
    name sorts first)."""
    found = [activity.tainted[name] for name in names]
    return min(found, key=lambda passive: _position(passive.node))


def _forward(body, activity: Activity) -> None:
    for statement in body:
        _spread_taint(statement, activity)
        if type(statement) is ir.Passive:
            _resolve_passive_layouts(statement, activity)
        if not isinstance(statement, (ir.Apply, *ir.LOOPS, ir.If)):
            _pass_on_layouts(statement, activity)
        counter = (
            isinstance(statement, ir.For) and statement.iterable in activity.ranges
        )
        number = makes_a_number(statement, activity)
        for name in ir.writes(statement):  # known only where worked out below
            if not isinstance(statement, ir.Apply):
                activity.made_otherwise.add(name)
            (activity.made_numbers if number else activity.made_arrays).add(name)
            worked_out = (ir.Apply, ir.Copy, ir.CallFunction)
            if not isinstance(statement, worked_out) and not counter:
                _merge(activity.dtypes, name, getattr(statement, "dtype", None))
        if counter:
            activity.ranks[statement.target] = 0  # an integer from a range
            activity.shapes[statement.target] = ()
            _merge(activity.dtypes, statement.target, np.dtype(np.intp))
        if isinstance(statement, ir.LOOPS):
            _fixpoint(_forward, statement.body, activity)
        elif isinstance(statement, ir.If):
            _forward(statement.body, activity)
            _forward(statement.orelse, activity)
        elif isinstance(statement, ir.Apply):
            op = statement.op
            slots = [
                value
                for name, value in zip(op.input_names, statement.inputs)
                if name not in op.nondiff
            ]
            if _any_varied(slots, activity):
                if op.differentiable:
                    activity.varied.add(statement.target)
                else:
                    activity.blocked.append(statement)
            _resolve_layout_parameter(statement, activity)
            shape = shape_of(statement, activity.shapes, activity.dtypes)
            _merge(activity.shapes, statement.target, shape)
            dtype = statement.result_dtype or dtype_of(
                statement, activity.dtypes, activity.ranks
            )
            if (  # (a number rebound: the sum; an array keeps its dtype)
                number
                and op.name == "cast_in_place"
                and not expression_rank(statement.params["target"], activity.ranks)
            ):
                dtype = activity.dtypes.get(_operand_name(statement.inputs[0]))
            _merge(activity.dtypes, statement.target, dtype)
            if (
                statement.target in activity.varied
                and dtype is not None
                and np.dtype(dtype).kind in "biu"
            ):  # whole numbers carry no derivative (x.astype(int), full_like(n, y))
                activity.varied.discard(statement.target)
                activity.whole.add(statement.target)
                if statement not in activity.blocked:
                    activity.blocked.append(statement)
            new = op.name in ELEMENTWISE or op.name in TERNARY
            (activity.made_new if new else activity.made_otherwise).add(
                statement.target
            )
            shape = activity.shapes.get(statement.target)
            rank = (
                len(shape) if shape is not None else rank_of(statement, activity.ranks)
            )
            activity.ranks[statement.target] = rank
            parts = part_ranks(statement, activity.ranks)
            if parts is not None:
                activity.part_ranks[statement.target] = parts
            _resolve_layout(statement, activity)
        elif isinstance(statement, ir.CallFunction):
            inputs = list(statement.inputs) + list(statement.keywords.values())
            if _any_varied(inputs, activity):
                activity.varied.update(statement.targets)
            _take_call_result(statement, activity)
        elif isinstance(statement, ir.ListAppend):
            if ir.operand_names(statement.value) & activity.varied:
                activity.varied.add(statement.target)
        elif isinstance(statement, (ir.ListPop, ir.ListGet)):
            if statement.source in activity.varied:
                activity.varied.add(statement.target)
        elif isinstance(statement, (ir.Pack, ir.Copy, ir.Unpack)):
            if ir.reads(statement) & activity.varied:
                activity.varied.update(ir.writes(statement))
            if isinstance(statement, ir.Copy):
                _merge(
                    activity.shapes,
                    statement.target,
                    operand_shape(statement.source, activity.shapes, activity.dtypes),
                )
                source = statement.source
                _merge(
                    activity.dtypes,
                    statement.target,
                    activity.dtypes.get(source) if isinstance(source, str) else None,
                )
            if isinstance(statement, ir.Copy) and isinstance(statement.source, str):
                rank = activity.ranks.get(statement.source)
                known = activity.ranks.get(statement.target, rank)
                activity.ranks[statement.target] = rank if known == rank else None
            parts = None  # (a Copy's source may be an expression: not a key)
            if isinstance(statement, ir.Unpack):
                parts = activity.part_ranks.get(statement.source)
            if parts is not None:
                for target, rank in zip(statement.targets, parts):
                    known = activity.ranks.get(target, rank)
                    activity.ranks[target] = rank if known == rank else None
        elif isinstance(statement, ir.ListCall):
            if _any_varied(_list_call_inputs(statement), activity):
                activity.varied.update(statement.targets)
        elif isinstance(statement, ir.Passive):
            node = statement.node
            if isinstance(node, gast.Assign) and len(statement.targets) == 1:
                _merge(
                    activity.shapes,
                    statement.targets[0],
                    expression_shape(node.value, activity.shapes, activity.dtypes),
                )
                activity.ranks[statement.targets[0]] = expression_rank(
                    node.value, activity.ranks
                )
            if _is_range(statement.node):
                activity.ranges.update(statement.targets)
            if statement.opaque and statement.reads & activity.varied:
                for name in statement.targets:
                    activity.tainted[name] = statement


def _take_call_result(statement: ir.CallFunction, activity: Activity) -> None:
    """The shape, dtype and rank of what a call of a user function returns, where
    the called function's analysis tells them (so that the code after the call, and
    later calls, are specialised as inline code is); merged as any assignment's, so
    that one that changes round a loop is not known."""
    found = None
    if activity.call_result is not None and len(statement.targets) == 1:
        found = activity.call_result(statement, activity)
    shape, dtype = found if found is not None else (None, None)
    for target in statement.targets:
        _merge(activity.shapes, target, shape)
        _merge(activity.dtypes, target, dtype)
    if shape is not None and activity.shapes[statement.targets[0]] is not None:
        activity.ranks[statement.targets[0]] = len(shape)


def _backward(body, activity: Activity) -> None:
    for statement in reversed(body):
        if isinstance(statement, ir.LOOPS):
            _fixpoint(_backward, statement.body, activity)
        elif isinstance(statement, ir.If):
            _backward(statement.body, activity)
            _backward(statement.orelse, activity)
        elif isinstance(statement, ir.Return):
            activity.useful |= ir.operand_names(statement.value)
        elif isinstance(statement, ir.ListCall):
            if set(statement.targets) & activity.useful:
                activity.useful |= ir.operand_names(_list_call_inputs(statement))
        elif isinstance(statement, ir.Passive):
            continue
        elif isinstance(statement, ir.ListAppend):
            if statement.target in activity.useful:
                activity.useful |= ir.operand_names(statement.value)
        elif isinstance(statement, ir.ListPop) and _given_list(statement, activity):
            # Whoever made this list (a gradient's forward half, for the tapes its
            # backward half pops, when that gradient is differentiated again)
            # reverses its appends by popping the list's adjoint, one entry per
            # append: the adjoint needs an entry for every pop made here, a zero
            # where the popped value goes nowhere (read for its shape only). A
            # zero adjoint of the whole list would be taken of the list emptied
            # by these pops: no entries at all.
            activity.useful.add(statement.source)
        elif set(ir.writes(statement)) & activity.useful:
            if isinstance(statement, ir.Apply):
                if statement.op.differentiable and statement.target not in (
                    activity.whole  # (nor one whose result is whole numbers)
                ):  # no adjoint crosses a comparison
                    activity.useful |= ir.operand_names(statement.inputs)
            else:
                activity.useful |= ir.reads(statement)


def _given_list(statement: ir.ListPop, activity: Activity) -> bool:
    """Whether a pop takes from a differentiated list the function was given (an
    argument, or one in a tuple it was given) rather than one it made."""
    return (
        statement.source in activity.varied
        and statement.source not in activity.own_lists
    )


def _list_call_inputs(statement) -> list:
    return [
        x for kind, x in zip(statement.kinds, statement.inputs) if kind not in ir.PASSED
    ]


def _check_taint(body, activity: Activity, source) -> None:
    for statement in body:
        if ir.blocks(statement):
            for block in ir.blocks(statement):
                _check_taint(block, activity, source)
            continue
        if isinstance(statement, ir.Return):  # ``return det(A)``: read as it is
            used = ir.operand_names(statement.value)
        elif (
            isinstance(statement, ir.Passive) and not isinstance(statement, ir.ListCall)
        ) or not (set(ir.writes(statement)) & activity.useful):
            continue
        elif isinstance(statement, ir.Apply):  # parameters are never differentiated
            op = statement.op
            used = ir.operand_names(
                [
                    x
                    for n, x in zip(op.input_names, statement.inputs)
                    if n not in op.nondiff
                ]
            )
        else:
            used = ir.reads(statement)
        tainted = used & set(activity.tainted)
        if tainted:
            passive = _first_opaque(tainted, activity)
            if passive.calls_local:
                raise source.error(
                    passive.node,
                    f"{passive.opaque} is a value made inside the function, and "
                    "ppto cannot see what calling it computes before the function "
                    "runs, so it cannot differentiate through it",
                    "make the object outside the function (a global, an attribute "
                    "such as self.layer) and call it there: ppto follows calls to "
                    "those objects' methods",
                )
            error = source.error(
                passive.node,
                f"{passive.opaque} has no ppto operator, so ppto cannot differentiate "
                "through it, and the result depends on its value",
                "compute it with ppto operators (ppto ops lists them), give your "
                "function a rule with @ppto.grad_rule, or wrap the value in "
                "ppto.stop_gradient(...) if it is meant to be a constant",
            )
            error.opaque = passive  # (generated code's replay: see pipeline)
            raise error


def _position(node) -> tuple:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def check_reachable(activity: Activity, wrt: list[str], source, alone=None) -> None:
    """A parameter that reaches the result only through non-differentiable operators
    has no gradient: say so instead of returning zeros. ``alone(name)`` is the
    activity of the body differentiated with respect to ``name`` only: an operator
    blocking another parameter's way (argsort of one, take_along_axis reading it)
    says nothing of one the result does not read at all (its gradient is zero)."""
    for name in wrt:
        if name in activity.useful or not _blocked(activity):
            continue
        blocked = _blocked(alone(name) if alone is not None else activity)
        if not blocked:
            continue
        op = blocked[0].op.name
        line, _ = source.position(blocked[0].origin)
        why = (
            f"whose result is {activity.dtypes[blocked[0].target]} (whole "
            "numbers carry no derivative)"
            if blocked[0].op.differentiable
            else "which is not differentiable"
        )
        raise GradError(
            f"the result depends on {name!r} only through ppto.{op} (line {line}), "
            f"{why}: its gradient would be zero almost everywhere; use a "
            "differentiable formulation or ppto.stop_gradient"
        )


def _blocked(activity: Activity) -> list:
    return [s for s in activity.blocked if s.target in activity.useful]


SAME_RANK = {
    "transpose",
    "matrix_transpose",
    "cast",
    "cast_in_place",
    "softmax",
    "log_softmax",
    "unbroadcast",
    "stop_gradient",
    "zeros_like",
    "ones_like",
    "full_like",
    "clip",
    "leaky_relu",
    "elu",
}


def literal(node):
    """The value of a literal expression, else ``NOT_LITERAL``. (A constant and the
    nodes that are never literals are decided here: ``gast.literal_eval`` converts
    the whole expression to ``ast`` first, a call with all its arguments, and was
    4% of a transformation's time.)"""
    kind = type(node)
    if kind is gast.Constant:
        return node.value
    if kind in _NEVER_LITERAL or (kind is gast.Call and not _empty_set(node)):
        return NOT_LITERAL
    # (nor is an expression with such a node anywhere inside, ``dy * x``, ``-t``:
    # converting it only to have literal_eval refuse it took most of the time)
    # (``set`` itself, a name, is left to literal_eval: it is the callee of set())
    for inner in trees.walk(node) if isinstance(node, gast.AST) else ():
        kind = type(inner)
        if kind is gast.Name and inner.id == "set":
            continue
        if kind in _NEVER_LITERAL or (kind is gast.Call and not _empty_set(inner)):
            return NOT_LITERAL
    try:
        return gast.literal_eval(node)
    except Exception:
        return NOT_LITERAL


# (ast.literal_eval's only call is ``set()``)
_NEVER_LITERAL = frozenset({gast.Name, gast.Attribute, gast.Subscript})


def _empty_set(call) -> bool:
    return (
        type(call.func) is gast.Name
        and call.func.id == "set"
        and not call.args
        and not call.keywords
    )


NOT_LITERAL = object()


def operand_rank(operand, ranks):
    """The rank of an operand if known: a variable, a scalar literal, or a verbatim
    expression that is just a name."""
    if isinstance(operand, ir.Verbatim):
        return expression_rank(operand.expr, ranks)
    if isinstance(operand, str):
        return ranks.get(operand)
    if isinstance(operand, ir.Const) and isinstance(operand.value, (int, float, bool)):
        return 0
    return None


def call_specialisation(call: ir.CallFunction, activity: Activity, lists: set):
    """What a derivative of ``call``'s function is specialised on besides the
    operands differentiated, alike in both modes: ``(ranks by position, ranks by
    keyword, where lists are passed, image layout hints by position or keyword,
    the known shapes and dtypes of its arguments, where tuples or lists of
    numbers are passed)`` (the hints its arguments have here: its image operators
    without a layout take them, as on tensors)."""
    ranks = activity.ranks
    by_position = [operand_rank(x, ranks) for x in call.inputs]
    by_name = {k: operand_rank(x, ranks) for k, x in call.keywords.items()}
    given = [*enumerate(call.inputs), *call.keywords.items()]
    hints = tuple(
        (where, hint)
        for where, operand in given
        if (hint := _layout_hint(operand, activity.layouts)) is not None
    )
    listed = ir.lists_passed(call, lists)
    described = _described(call, activity, listed)
    given = [*enumerate(call.inputs), *sorted(call.keywords.items())]
    numbered = tuple(
        where for where, operand in given if holds_numbers(operand, activity.numbers)
    )
    return by_position, by_name, listed, hints, described, numbered


def holds_numbers(operand, numbers: set) -> bool:
    """Whether ``operand`` is a tuple or list of numbers for sure: one of
    ``numbers`` (parameters given them), or written verbatim (it needs no
    derivative) as one (see ``number_sequence``)."""
    if isinstance(operand, ir.Verbatim):
        return number_sequence(operand.expr, numbers)
    return isinstance(operand, str) and operand in numbers


def number_sequence(expr, numbers: set) -> bool:
    """Whether ``expr`` makes a tuple or list of numbers: a name in ``numbers``
    (in the renamed code a parameter's own name is its value as passed: each
    assignment makes a new name), an array's ``.shape``, numbers written out
    (``(2, 3)``), a slice of one or two joined (``x.shape[1:] + (1,)``)."""
    if isinstance(expr, gast.Name):
        return expr.id in numbers
    if isinstance(expr, gast.Attribute):
        return expr.attr == "shape"
    if isinstance(expr, (gast.Tuple, gast.List)):
        return all(
            isinstance(item, gast.Constant) and type(item.value) in (int, float, bool)
            for item in expr.elts
        )
    if isinstance(expr, gast.Subscript) and isinstance(expr.slice, gast.Slice):
        return number_sequence(expr.value, numbers)
    if isinstance(expr, gast.BinOp) and isinstance(expr.op, gast.Add):
        return number_sequence(expr.left, numbers) and number_sequence(
            expr.right, numbers
        )
    return False


def _described(call: ir.CallFunction, activity: Activity, listed: tuple) -> tuple:
    """``(position or keyword, shape, dtype)`` of the call's arguments whose shape
    is known here (lists passed have none): its function's derivative is
    specialised on them, as the entry's is on its arguments'. A literal number's
    dtype is not told (a Python number's type is weak: it takes the array's)."""
    given = [*enumerate(call.inputs), *sorted(call.keywords.items())]
    described = []
    for where, operand in given:
        if where in listed:
            continue
        shape = operand_shape(operand, activity.shapes, activity.dtypes)
        if shape is None:
            continue
        dtype = activity.dtypes.get(operand) if isinstance(operand, str) else None
        described.append((where, tuple(shape), dtype))
    return tuple(described)


def index_rank(rank, index, ranks):
    """The rank after basic indexing with a literal index, else None."""
    parts = index.elts if isinstance(index, gast.Tuple) else [index]
    for part in parts:
        if isinstance(part, gast.Constant) and isinstance(part.value, int):
            rank -= 1
        elif _negative_int(part):  # (x[:, -1])
            rank -= 1
        elif isinstance(part, gast.Constant) and part.value is None:
            rank += 1
        elif isinstance(part, gast.Call) and getattr(part.func, "id", "") == "slice":
            continue
        elif isinstance(part, gast.Name) and ranks.get(part.id) == 0:
            rank -= 1
        else:
            return None
    return rank


def _negative_int(node) -> bool:
    return (
        isinstance(node, gast.UnaryOp)
        and isinstance(node.op, gast.USub)
        and isinstance(node.operand, gast.Constant)
        and type(node.operand.value) is int
    )


# the operators that make a Python number (``float(v)``, ``v.item()``), 0-d for
# sure: a rank not known would take the number for a value an alias may share
_PYTHON_NUMBERS_MADE = {"item", "to_float"}
# The operators NumPy's spellings of which make a number of 0-d operands, or of
# a whole array reduced (np.where, np.reshape, np.tensordot make 0-d arrays)
_NUMBERS_MADE = (
    ELEMENTWISE.keys()
    | REDUCTIONS
    | {"ceil", "floor", "round", "sign", "clip", "remainder", "floor_divide"}
    | {"logaddexp", "logaddexp2", "not_equal", "isnan", "isfinite"}
    | {"logical_and", "logical_or", "logical_xor", "logical_not"}
    | {"dot", "numpy_dot", "inner", "vdot", "einsum", "trace", "det", "norm"}
    | {"average", "percentile", "quantile", "nanpercentile", "nanquantile"}
    | _PYTHON_NUMBERS_MADE
)
# NumPy's number types: ``np.float32(0)`` is a number, as ``float(0)`` is
_NUMBER_TYPES = {
    "float16", "float32", "float64", "half", "single", "double", "longdouble",
    "int8", "int16", "int32", "int64", "intp", "int_",
    "uint8", "uint16", "uint32", "uint64", "uintp",
}  # fmt: skip
_BUILTIN_NUMBERS = ("float", "int", "bool")


def number_conversion(node):
    """``(kind, argument)`` where ``node`` converts one value to a number: kind
    the NumPy type's dtype (``np.float32(v)``, a number of a number, an array of
    an array) or None for Python's (``float(v)``: always a number, its dtype weak);
    else None."""
    if not (isinstance(node, gast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    function = node.func
    if isinstance(function, gast.Name) and function.id in _BUILTIN_NUMBERS:
        return None, node.args[0]
    if (
        isinstance(function, gast.Attribute)
        and getattr(function.value, "id", None) in ("np", "numpy")
        and function.attr in _NUMBER_TYPES
    ):
        return np.dtype(getattr(np, function.attr)), node.args[0]
    return None


# NumPy's calls that make an array of their one value, of its shape
# (``np.array(0.5)``: a 0-d array)
_ARRAY_OF = {"array", "asarray", "asanyarray"}


def array_of(node):
    """The value ``node`` makes an array of, of the same shape (``v`` of
    ``np.array(v)`` or ``np.asarray(v, dtype=...)``), else None."""
    if not (isinstance(node, gast.Call) and len(node.args) == 1):
        return None
    function = node.func
    if (
        isinstance(function, gast.Attribute)
        and getattr(function.value, "id", None) in ("np", "numpy")
        and function.attr in _ARRAY_OF
        and all(keyword.arg in ("dtype", "copy") for keyword in node.keywords)
    ):
        return node.args[0]
    return None


def makes_a_number(statement, activity: Activity) -> bool:
    """Whether what ``statement`` writes is a number where it is 0-d, as NumPy makes
    it (an operator on 0-d arrays, a reduction, a number written or converted:
    ``0.0``, ``float(v)``, ``np.float32(0)``), never a 0-d array (``np.zeros(())``,
    an argument, ``t`` after ``t += v`` where t was one): ``t += v`` writes into a
    0-d array, keeping its dtype, where it rebinds a number. False where not known."""
    if isinstance(statement, ir.Copy):
        source = statement.source
        if isinstance(source, ir.Const):
            return type(source.value) in (int, float, bool)
        return isinstance(source, str) and activity.number(source)
    if isinstance(statement, ir.Apply):
        name, params = statement.op.name, statement.params
        if name == "cast_in_place":  # (a number is rebound: the sum itself)
            return activity.number(getattr(params["target"], "id", None))
        if name == "getitem":
            return _every_axis_by_integer(statement, activity.ranks)
        keepdims = literal(params.get("keepdims", gast.Constant(False, None)))
        return name in _NUMBERS_MADE and keepdims is not True
    node = getattr(statement, "node", None)
    if type(statement) is not ir.Passive or not isinstance(node, gast.Assign):
        return False
    value = node.value
    if isinstance(value, gast.Constant):
        return type(value.value) in (int, float, bool)
    return number_conversion(value) is not None


def _every_axis_by_integer(statement, ranks: dict) -> bool:
    """Whether ``statement`` (a getitem) indexes an array of known rank by an
    integer on every axis: see ``indexes_every_axis``."""
    base = statement.inputs[0] if statement.inputs else None
    rank = ranks.get(base) if isinstance(base, str) else None
    return indexes_every_axis(rank, statement.params.get("index"), ranks)


def indexes_every_axis(rank, index, ranks: dict) -> bool:
    """Whether ``index`` takes an integer on every axis of an array of ``rank``
    axes (``x[0]`` of a vector, ``X[i, j]`` of a matrix): NumPy gives a number
    there, never a 0-d array (``x[...]`` and ``x[()]`` of a 0-d array stay
    arrays, as does any slice)."""
    if not rank or index is None:
        return False
    parts = index.elts if isinstance(index, gast.Tuple) else [index]
    integers = [
        part
        for part in parts
        if (isinstance(part, gast.Constant) and type(part.value) is int)
        or _negative_int(part)
        or (isinstance(part, gast.Name) and ranks.get(part.id) == 0)
    ]
    return len(integers) == len(parts) == rank


def _merge(known: dict, name: str, value) -> None:
    """Record a variable's shape (or dtype); one assigned different ones (in a loop)
    has none. (None is compared by identity: ``np.dtype('float64') == None`` is true,
    since NumPy reads None as the default dtype.)"""
    if name in known and not _same(known[name], value):
        known[name] = None
    else:
        known[name] = value


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a == b


def operand_shape(operand, shapes: dict, dtypes: dict | None = None):
    """The shape of an operand when known (``dtypes``: see ``expression_shape``)."""
    if isinstance(operand, ir.Verbatim):
        return expression_shape(operand.expr, shapes, dtypes)
    if isinstance(operand, str):
        return shapes.get(operand)
    if isinstance(operand, ir.Const) and isinstance(operand.value, (int, float)):
        return ()
    return None


def expression_shape(node, shapes: dict, dtypes: dict | None = None):
    """The shape of a simple verbatim expression (names, indexing by integers and
    slices, arithmetic, matrix products), or None. A 0-d value indexes as an integer
    only where ``dtypes`` says it is one (a 0-d boolean adds an axis instead)."""
    if isinstance(node, gast.Name):
        return shapes.get(node.id)
    if isinstance(node, gast.Constant):
        return () if isinstance(node.value, (int, float)) else None
    converted = number_conversion(node)
    if converted is not None:
        kind, argument = converted
        return expression_shape(argument, shapes, dtypes) if kind is not None else ()
    if array_of(node) is not None:
        return expression_shape(array_of(node), shapes, dtypes)
    if isinstance(node, gast.UnaryOp):
        return expression_shape(node.operand, shapes, dtypes)
    if isinstance(node, gast.BinOp):
        left = expression_shape(node.left, shapes, dtypes)
        right = expression_shape(node.right, shapes, dtypes)
        if left is None or right is None:
            return None
        if isinstance(node.op, gast.MatMult):
            return matmul_shape(left, right)
        try:
            return tuple(np.broadcast_shapes(left, right))
        except ValueError:
            return None
    if isinstance(node, gast.Subscript):
        base = expression_shape(node.value, shapes, dtypes)
        if base is None:
            return None
        from ppto.transform.normalize import slice_expr

        return _index_shape(base, slice_expr(node.slice), shapes, dtypes)
    return None


def _index_shape(base: tuple, index, shapes: dict, dtypes: dict | None = None):
    """The shape of ``x[index]`` for an ``x`` of shape ``base``, when the index is made
    of literals, slices, integer variables and integer arrays of known shapes
    (``x[np.arange(n), labels]``); else None."""
    parts = index.elts if isinstance(index, gast.Tuple) else [index]
    known = []
    for part in parts:
        stand_in = _integer_array_stand_in(part, shapes, dtypes)
        if stand_in is not None:  # (NumPy's rules then mix it with slices and Nones)
            known.append(stand_in)
            continue
        if isinstance(part, gast.Name) and shapes.get(part.id) == ():
            dtype = (dtypes or {}).get(part.id)
            if dtype is None or np.dtype(dtype).kind not in "iu":
                return None  # a boolean (or unknown) 0-d value: not an integer
            known.append(0)  # an integer (a loop index): drops the axis
            continue
        value = literal(part)
        if value is NOT_LITERAL and isinstance(part, gast.Call):
            arguments = [literal(a) for a in part.args]
            is_slice = getattr(part.func, "id", "") == "slice"
            if is_slice and NOT_LITERAL not in arguments:
                value = slice(*arguments)
        if value is NOT_LITERAL or not isinstance(value, (int, slice, type(None))):
            return None
        known.append(value)
    probe = np.lib.stride_tricks.as_strided(np.zeros(1), base, [0] * len(base))
    try:
        return probe[tuple(known)].shape
    except IndexError:
        return None


def _integer_array_stand_in(part, shapes: dict, dtypes: dict | None):
    """Zeros (one element, zero strides: no memory) of the shape of an integer array
    index of known shape and dtype, or of ``np.arange(n)`` with ``n`` written out or
    ``x.shape[k]`` of a known shape; None for anything else (a boolean mask's
    result has as many elements as it has True values: known only when it runs)."""
    shape = None
    if isinstance(part, gast.Name):
        shape, dtype = shapes.get(part.id), (dtypes or {}).get(part.id)
        if dtype is None or np.dtype(dtype).kind not in "iu" or not shape:
            return None
    elif (
        isinstance(part, gast.Call)
        and isinstance(part.func, gast.Attribute)
        and part.func.attr == "arange"
        and isinstance(part.func.value, gast.Name)
        and part.func.value.id in ("np", "numpy")
        and len(part.args) == 1
        and not part.keywords
    ):
        length = _written_length(part.args[0], shapes)
        shape = None if length is None else (max(length, 0),)
    if shape is None:
        return None
    return np.lib.stride_tricks.as_strided(
        np.zeros(1, np.intp), shape, [0] * len(shape)
    )


def _written_length(node, shapes: dict) -> int | None:
    """The whole number ``node`` writes out, or ``x.shape[k]`` of a known shape."""
    value = literal(node)
    if type(value) is int:
        return value
    if (
        isinstance(node, gast.Subscript)
        and isinstance(node.value, gast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, gast.Name)
    ):
        shape, axis = shapes.get(node.value.value.id), literal(node.slice)
        if shape is not None and type(axis) is int and -len(shape) <= axis < len(shape):
            return shape[axis]
    return None


def shape_of(statement: ir.Apply, shapes: dict, dtypes: dict | None = None):
    """The shape of an operator's result from its inputs' shapes and literal
    parameters, or None when it cannot be known before running."""
    op, params = statement.op, statement.params
    if not isinstance(op, Primitive):  # a user's operator: its shape is unknown
        return None
    if op.name == "cast_in_place":  # (an array target keeps its shape: see rank_of)
        target = expression_shape(params["target"], shapes, dtypes)
        return target or operand_shape(statement.inputs[0], shapes, dtypes)
    inputs = [
        operand_shape(x, shapes, dtypes)
        if not isinstance(x, list)
        else [operand_shape(part, shapes, dtypes) for part in x]
        for x in statement.inputs
    ]
    if not inputs or inputs[0] is None:
        return None
    first, name = inputs[0], op.name
    if isinstance(first, list) or name in SHAPE_RULES or name in SAME_AS_FIRST:
        return _ruled_shape(statement, inputs, shapes)
    try:
        if getattr(op.signature, "mode", "") == "broadcast":
            if None in inputs:
                return None
            return tuple(np.broadcast_shapes(*inputs))
        if name == "dot":
            return None if inputs[1] is None else matmul_shape(first, inputs[1])
        if name == "getitem":
            return _index_shape(first, params.get("index"), shapes, dtypes)
        if name in {"unbroadcast", "unreduce"}:
            like = params.get("like")
            return shapes.get(like.id) if isinstance(like, gast.Name) else None
        values = {key: literal(value) for key, value in params.items()}
        if any(value is NOT_LITERAL for value in values.values()):
            return None
        if name in REDUCTIONS:
            return reduced_shape(
                first, values.get("axis"), values.get("keepdims", False)
            )
        probe = np.lib.stride_tricks.as_strided(np.zeros(1), first, [0] * len(first))
        if name in {"transpose"}:
            return np.transpose(probe, values.get("axes")).shape
        if name == "matrix_transpose":
            return np.swapaxes(probe, -1, -2).shape
        if name in {"reshape"}:
            return np.reshape(probe, values["shape"]).shape
        if name == "expand_dims":
            return np.expand_dims(probe, values["axis"]).shape
        if name == "squeeze":
            return np.squeeze(probe, values.get("axis")).shape
        if name in {"broadcast_to"}:
            return tuple(np.broadcast_shapes(first, values["shape"]))
        if name in SAME_RANK - {"unbroadcast"}:
            return first
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    return None


def _ruled_shape(statement: ir.Apply, inputs: list, shapes: dict):
    """The shape from the operator's rule in ``ppto.ops.shapes``: its literal
    parameters (its defaults where not given), a ``like=`` array's shape, an input
    left out (np.diff's prepend) as ABSENT."""
    op = statement.op
    params = dict(op.defaults)
    like = None
    for key, node in statement.params.items():
        if key == "like":
            like = shapes.get(node.id) if isinstance(node, gast.Name) else None
            continue
        value = literal(node)
        if value is NOT_LITERAL:
            return None
        params[key] = value
    inputs = [
        ABSENT
        if isinstance(operand, ir.Const) and operand.value is None
        else inputs[number]
        for number, operand in enumerate(statement.inputs)
    ]
    return result_shape(op.name, inputs, params, like)


_KEEPS_DTYPE = {
    "getitem", "stop_gradient", "unbroadcast", "unreduce", "transpose",
    "matrix_transpose", "reshape", "expand_dims", "squeeze", "broadcast_to",
    "reduce_max", "reduce_min", "softmax", "log_softmax", "logsumexp", "relu",
    "sigmoid", "zeros_like", "ones_like", "full_like",
    # arrangements of the first input's elements (with ``x``'s dtype kept by
    # index_add, setitem and pad, whatever the values written)
    "copy", "flip", "roll", "sort", "tile", "repeat", "swapaxes", "moveaxis",
    "diagonal", "diag", "tril", "triu", "flatten", "max_pool2d", "take",
    "index_add", "setitem", "pad",
}  # fmt: skip

# products whose result has their operands' common dtype (as np.matmul's)
_PRODUCTS = {"dot", "numpy_dot", "conv2d", "tensordot", "einsum", "outer", "inner"}


def dtype_of(statement: ir.Apply, dtypes: dict, ranks: dict | None = None):
    """The dtype of an operator's result, where its inputs' are known and the
    operator is one whose result dtype NumPy's rules give (elementwise operators,
    sums, matrix products, and those that keep their input's), else None."""
    op = statement.op
    if not isinstance(op, Primitive) or any(
        isinstance(x, list) for x in statement.inputs
    ):
        return None
    name, first = op.name, statement.inputs[0] if statement.inputs else None
    asked = statement.params.get("dtype")
    if asked is not None and not (
        isinstance(asked, gast.Constant) and asked.value is None
    ):
        return None  # a dtype= the transformer could not read
    if name in _KEEPS_DTYPE and _operand_name(first) is not None:
        # (also an input written verbatim: ``k[1] = x[0]`` into an integer ``k``
        # not differentiated is integers still, which carry no derivative)
        return dtypes.get(_operand_name(first))
    if name == "cast_in_place":
        return _in_place_dtype(statement, dtypes, ranks or {})
    probes = []
    for operand in statement.inputs:
        if isinstance(operand, ir.Const) and type(operand.value) in (int, float):
            probes.append(operand.value)  # a Python number: NumPy's weak scalar
        elif (probe := _element(dtypes.get(_operand_name(operand)))) is not None:
            probes.append(probe)
        else:
            return None
    with np.errstate(all="ignore"):
        if name in ELEMENTWISE or name in TERNARY:
            return np.asarray(ufunc(name)(*probes)).dtype
        if name in ("reduce_sum", "reduce_mean", "reduce_prod"):
            reduce = {"reduce_sum": np.sum, "reduce_mean": np.mean}.get(name, np.prod)
            return np.asarray(reduce(probes[0])).dtype
        if name in _PRODUCTS and all(isinstance(p, np.ndarray) for p in probes):
            return np.result_type(*probes)
    return None


def _element(dtype):
    """One element of ``dtype``, for NumPy's rules to combine with others (an
    array: its dtype is strong, as a variable's), None where ``dtype`` is."""
    return None if dtype is None else np.zeros((1,), dtype)


# Python's arithmetic operators, as the NumPy functions whose result dtypes they have
_ARITHMETIC = {
    gast.Add: np.add, gast.Sub: np.subtract, gast.Mult: np.multiply,
    gast.Div: np.true_divide, gast.FloorDiv: np.floor_divide, gast.Mod: np.mod,
    gast.Pow: np.power,
}  # fmt: skip


def expression_dtype(node, dtypes: dict):
    """The dtype of an expression written out of names (indexed or not), numbers
    and arithmetic (``k[1:] * 1.5``), as NumPy's rules give it from the names'
    dtypes (a Python number weak), else None."""
    probe = _expression_probe(node, dtypes)
    return None if probe is None else np.asarray(probe).dtype


def _expression_probe(node, dtypes: dict):
    """A value with ``node``'s dtype (see ``dtype_of``'s probes): one element of
    its names' dtypes, or the number written; None where it is not known."""
    while isinstance(node, gast.Subscript):
        node = node.value
    if isinstance(node, gast.Name):
        return _element(dtypes.get(node.id))
    if isinstance(node, gast.Constant) and type(node.value) in (int, float, bool):
        return node.value
    if isinstance(node, gast.BinOp) and type(node.op) in _ARITHMETIC:
        left = _expression_probe(node.left, dtypes)
        right = _expression_probe(node.right, dtypes)
        if left is None or right is None:
            return None
        with np.errstate(all="ignore"):
            return _ARITHMETIC[type(node.op)](left, right)
    return None


def _in_place_dtype(statement: ir.Apply, dtypes: dict, ranks: dict):
    """``t += v``'s: t's where t is an array (NumPy writes into it), else the
    two's where they agree (0-d: a number, which ``+=`` rebinds, takes the sum's,
    a 0-d array keeps its own; see ``makes_a_number``)."""
    value, target = statement.inputs[0], statement.params["target"]
    value_dtype = dtypes.get(value) if isinstance(value, str) else None
    target_dtype = dtypes.get(getattr(target, "id", None))
    rank = ranks.get(getattr(target, "id", None))
    if rank is not None and rank > 0:
        return target_dtype
    return value_dtype if _same(value_dtype, target_dtype) else None


def _operand_name(operand) -> str | None:
    """The variable whose dtype an operand has: its name, or the name written
    verbatim (an operand that needs no derivative, ``y`` in ``x * y``
    differentiated for x), indexed or not (``c[1:]``: c's)."""
    if isinstance(operand, ir.Verbatim):
        expr = operand.expr
        while isinstance(expr, gast.Subscript):
            expr = expr.value
        return expr.id if isinstance(expr, gast.Name) else None
    return operand if isinstance(operand, str) else None


def _matmul_rank(a, b):
    if a is None or b is None:
        return None
    if a == 1 and b == 1:
        return 0
    return b - 1 if a == 1 else a - 1 if b == 1 else max(a, b)


def expression_rank(node, ranks: dict):
    """The rank of a simple verbatim expression (names, literals, indexing,
    arithmetic), or None."""
    if isinstance(node, gast.Name):
        return ranks.get(node.id)
    if isinstance(node, gast.Constant):
        return 0 if isinstance(node.value, (int, float)) else None
    converted = number_conversion(node)
    if converted is not None:  # (float(v) a number; np.float32(v) as v is)
        kind, argument = converted
        return expression_rank(argument, ranks) if kind is not None else 0
    if array_of(node) is not None:
        return expression_rank(array_of(node), ranks)
    if isinstance(node, gast.Subscript):
        base = expression_rank(node.value, ranks)
        if base is None:
            return None
        from ppto.transform.normalize import slice_expr

        return index_rank(base, slice_expr(node.slice), ranks)
    if isinstance(node, gast.UnaryOp):
        return expression_rank(node.operand, ranks)
    if isinstance(node, gast.BinOp):
        left, right = (
            expression_rank(node.left, ranks),
            expression_rank(node.right, ranks),
        )
        if isinstance(node.op, gast.MatMult):
            return _matmul_rank(left, right)
        return None if left is None or right is None else max(left, right)
    if isinstance(node, gast.Compare) and len(node.comparators) == 1:
        sides = [
            expression_rank(side, ranks) for side in (node.left, *node.comparators)
        ]
        return None if None in sides else max(sides)  # (elementwise: ``s > t``)
    return None


def rank_of(statement: ir.Apply, ranks: dict):
    """The number of axes of an operator's result, or None when unknown."""
    if not isinstance(statement.op, Primitive):
        return None
    op, params = statement.op, statement.params
    if op.name in _PYTHON_NUMBERS_MADE:  # (whatever its input's rank: a number)
        return 0
    if op.name == "cast_in_place":
        # t += v writes into an array t, whose shape it keeps (NumPy refuses to
        # broadcast it, and so does cast_in_place); a number is rebound
        target = expression_rank(params["target"], ranks)
        if target:
            return target
    inputs = [
        operand_rank(x, ranks) if not isinstance(x, list) else None
        for x in statement.inputs
    ]
    if not inputs or any(rank is None for rank in inputs[:1]):
        return None
    first = inputs[0]
    name = op.name
    if getattr(op.signature, "mode", "") == "broadcast":
        return None if None in inputs else max(inputs)
    if name in SAME_RANK:
        return first
    if name == "dot":
        return _matmul_rank(*inputs)
    if name in REDUCTIONS:
        axis = literal(params.get("axis"))
        keepdims = literal(params.get("keepdims"))
        if axis is NOT_LITERAL or keepdims is NOT_LITERAL:
            return None
        if keepdims:
            return first
        if axis is None:
            return 0
        return first - (len(axis) if isinstance(axis, tuple) else 1)
    if name == "getitem":
        return index_rank(first, params.get("index"), ranks)
    if name == "reshape":
        shape = literal(params.get("shape"))
        if shape is NOT_LITERAL:
            return None
        return len(shape) if isinstance(shape, (tuple, list)) else 1
    return _linear_algebra_rank(name, inputs, params)


def part_ranks(statement: ir.Apply, ranks: dict) -> tuple | None:
    """The ranks of the parts of the tuple a decomposition returns (``w, V =
    np.linalg.eigh(A)``: a stack of vectors and one of matrices), or None."""
    first = operand_rank(statement.inputs[0], ranks) if statement.inputs else None
    if first is None or first < 2 or not isinstance(statement.op, Primitive):
        return None
    name = statement.op.name
    if name == "eigh":
        return (first - 1, first)
    if name == "qr":
        return (first, first)
    if name == "slogdet":
        return (first - 2, first - 2)
    if name == "svd" and literal(statement.params.get("compute_uv", True)) is True:
        return (first, first - 1, first)
    if name == "lstsq" and len(statement.inputs) == 2:
        b = operand_rank(statement.inputs[1], ranks)
        return None if b is None else (b, 1, 0, 1)
    return None


# (the matrices' operators: same rank as their first input)
_SAME_RANK_MATRICES = {
    "inv",
    "cofactors",
    "cholesky",
    "roll",
    "flip",
    "pinv",
    "matrix_power",
    "divide_by_gaps",
    "divide_by_values",
}
# (along ``axis``: same rank, or the flattened input's 1 where axis is None)
_ALONG_AXIS = {"cumsum", "cumprod", "take_along_axis"}


def _linear_algebra_rank(name: str, inputs: list, params: dict):
    """The rank of the result of an operator on matrices or along an axis (which
    rank_of reads; None where not known). Known ranks let a gradient rule's tests of
    ``ndim`` be decided when it is inlined, so the code has no branch on them."""
    first = inputs[0]
    if name in _SAME_RANK_MATRICES:
        return first
    if name in {"tril", "triu"}:  # (a vector is each row of a square matrix)
        return max(first, 2)
    if name in _ALONG_AXIS:
        axis = literal(params.get("axis"))
        if axis is NOT_LITERAL:
            return None
        return 1 if axis is None else first
    if name == "solve" and len(inputs) == 2 and inputs[1] is not None:
        # NumPy 2's rule: a vector b is one vector for every matrix of a stack
        return first - 1 if inputs[1] == 1 else max(first, inputs[1])
    if name in {"det", "trace"}:
        return first - 2 if first >= 2 else None
    compute_uv = literal(params.get("compute_uv", True))
    if name in {"eigvalsh", "svdvals"} or (name == "svd" and compute_uv is False):
        return first - 1 if first >= 2 else None
    if name == "diagonal":
        return first - 1 if first >= 2 else None
    if name == "diag":
        return {1: 2, 2: 1}.get(first)
    return None
