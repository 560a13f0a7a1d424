"""Elementwise regions: a run of consecutive statements that are all elementwise
(arithmetic, ``tanh``, ``where``...) or full sums becomes one pass over the data in
cache-sized chunks.

A gradient such as that of ``sum(tanh(x * y + z) * exp(-x))`` is a dozen elementwise
statements over the same million elements. Run one by one, each streams its operands
from memory and writes a new array; run as a region, every statement is applied to one
chunk of the inputs while it is in cache, intermediates live in a few chunk-sized
buffers that are reused, and only the values read after the region, or by its next
run in a loop (its outputs), are written as full arrays. Sums are accumulated per
chunk.

The region becomes a generated NumPy function (``__fused_region_*``, its source shown
with the fused code) and the statements a call of it. It runs when every array it
reads has one shape and one floating dtype, at least ``LARGE`` elements, or, for a
region over rows (``region_writer``), the shapes of full rows, rows' values and the
last axis; otherwise (other broadcasts, mixed dtypes, small arrays) it calls the
original statements, kept as a function of their own.
"""

from __future__ import annotations

import gast
import numpy as np

from ppto.fusion.cuda import Unsupported
from ppto.fusion.kernels import (
    COMPARISONS,
    ELEMENTWISE,
    LARGE,
    TERNARY,
    Node,
    RegionKernel,
)
from ppto.fusion.registry import ALIASES
from ppto.ops.elementwise import stop_gradient
from ppto.ops.reductions import reduce_max, reduce_mean, reduce_sum, unreduce
from ppto.ops.shape import ones_like, unbroadcast
from ppto.transform import origins
from ppto.transform.analyze import NOT_LITERAL, literal
from ppto.transform.emit import Comment
from ppto.transform.region_writer import RegionWriter
from ppto.transform.trees import (
    bound_arguments,
    clone,
    function_definition,
    load_counts,
    loads,
    nested_blocks,
    single_target,
    stores,
)

MIN_OPERATIONS = 4  # fewer gain less than the region's bookkeeping costs

_BINARY = {gast.Add: "add", gast.Sub: "sub", gast.Mult: "mul", gast.Div: "div"}
_COMPARE = {
    gast.Gt: "greater",
    gast.Lt: "less",
    gast.GtE: "greater_equal",
    gast.LtE: "less_equal",
    gast.Eq: "equal",
}


class Step:
    """One statement of a region: ``target = tree`` (an expression of elementwise
    operators, row reductions and broadcasts between shapes, see ``_decode``), a full
    sum of a value, ``ones_like`` of a sum, a copy, or a sum over the rows of a
    value (``colsum``: ``reduce_sum(v, axis=0)`` of a 2-d value, ``unbroadcast`` of
    one to the shape of its last axis)."""

    def __init__(self, statement, target: str, kind: str, tree=None, source=None):
        self.statement = statement
        self.target = target
        self.kind = kind  # "tree", "sum", "ones", "copy", "colsum"
        self.tree = tree  # a kernels.Node whose leaves are variable names
        self.source = source  # the name a sum, ones_like or copy reads
        # the names it reads, in order (a broadcast's ``like`` too: the statement
        # reads it for its shape)
        self.names = [source] if source else list(dict.fromkeys(tree.leaves()))
        self.reads = set(self.names)
        self.shapes: dict = {}  # name -> shape, where known, of what it reads and makes
        self.reduced: list = []  # shapes of the values its row reductions reduce
        self.full = None  # a column sum's: the shape of the value it sums
        self.axes: tuple = ()  # a column sum's axes, as written


# row reductions over the last axis, keeping it (``keepdims=True``)
_REDUCTIONS = {reduce_sum: "rowsum", reduce_max: "rowmax", reduce_mean: "rowmean"}
_ROW_OPS = set(_REDUCTIONS.values())
_SHAPED = {*_REDUCTIONS, unbroadcast, unreduce, stop_gradient}


def _decode(expression, namespace, extended: bool = False):
    """The tree of ``expression``, or None. ``extended``: row reductions
    (``rowsum``, ``rowmax``, ``rowmean``, the axis as the node's value),
    ``unbroadcast(e, like)``, ``unreduce(e, like, ...)`` (``expand``, keepdims as
    its value) and ``stop_gradient`` (its operand) are decoded too: what the first
    three mean depends on shapes (``_settle``). The CPU's passes take them, CUDA
    regions do not."""
    if isinstance(expression, gast.Name):
        return Node(leaf=expression.id)
    if (
        isinstance(expression, gast.Constant)
        and isinstance(expression.value, (int, float))
        and not isinstance(expression.value, bool)
    ):
        return Node(value=expression.value)
    context = (namespace, extended)
    if isinstance(expression, gast.BinOp) and type(expression.op) in _BINARY:
        operands = [expression.left, expression.right]
        return _node(_BINARY[type(expression.op)], operands, *context, operator=True)
    if isinstance(expression, gast.UnaryOp) and isinstance(expression.op, gast.USub):
        return _node("neg", [expression.operand], *context, operator=True)
    if (
        isinstance(expression, gast.Compare)
        and len(expression.ops) == 1
        and type(expression.ops[0]) in _COMPARE
    ):
        operands = [expression.left, expression.comparators[0]]
        return _node(_COMPARE[type(expression.ops[0])], operands, *context)
    if not isinstance(expression, gast.Call) or not isinstance(
        expression.func, gast.Name
    ):
        return None
    op = namespace.get(expression.func.id)
    if extended and expression.args and op in _SHAPED:
        return _shaped(expression, *context, op)
    name = getattr(op, "name", None)
    arity = len(getattr(op, "input_names", ()))
    if (
        (name in ELEMENTWISE or name in TERNARY or name in ALIASES)
        and arity == len(expression.args)
        and not expression.keywords
    ):
        return _node(name, expression.args, *context)
    return None


def _shaped(call, namespace, extended, op):
    """``_decode`` of a call of a row reduction, ``unbroadcast``, ``unreduce`` or
    ``stop_gradient``."""
    first = _decode(call.args[0], namespace, extended)
    if first is None:
        return None
    if op is stop_gradient:
        return first if len(call.args) == 1 and not call.keywords else None
    if op in _REDUCTIONS:
        options = _options(call, op, 1)
        if options is None:
            return None
        if type(options["axis"]) is not int or options["keepdims"] is not True:
            return None
        return Node(_REDUCTIONS[op], [first], value=options["axis"])
    like = call.args[1] if len(call.args) > 1 else None
    if not isinstance(like, gast.Name):
        return None
    options = _options(call, op, 2)
    if options is None:
        return None
    if op is unbroadcast:
        return Node("unbroadcast", [first, Node(leaf=like.id)])
    # without keepdims a reduced value is reshaped first: only a 0-d one is
    # broadcast as it is (checked once the shapes are known)
    keeps = options["keepdims"] is True
    return Node("expand", [first, Node(leaf=like.id)], value=keeps)


def _node(name, arguments, namespace, extended, operator: bool = False):
    """``operator``: written with Python's operator (``s * 2.0``), not as a call:
    of Python numbers alone, the result is a Python number (see ``Node``)."""
    children = [_decode(argument, namespace, extended) for argument in arguments]
    if any(child is None for child in children):
        return None
    if name in ALIASES:
        return ALIASES[name](children)
    return Node(name, children, operator=operator)


def _step(statement, namespace, extended: bool = True):
    """The statement as a region step, or None. A ``ones`` step (``ones_like(s)``)
    belongs to a region only where ``s`` is one of its sums. ``extended``: see
    ``_decode``; column sums only then."""
    if isinstance(statement, Comment):
        return None
    target = single_target(statement)
    if target is None:
        return None
    value = statement.value
    if isinstance(value, gast.Call) and isinstance(value.func, gast.Name):
        op = namespace.get(value.func.id)
        argument = value.args[0] if len(value.args) == 1 else None
        if isinstance(argument, gast.Name) and not value.keywords:
            if op is reduce_sum:
                return Step(statement, target, "sum", source=argument.id)
            if op is ones_like:
                return Step(statement, target, "ones", source=argument.id)
        options = _options(value, op, 1) if op is reduce_sum else None
        if extended and options is not None and value.args:
            axis = options["axis"]
            if type(axis) is int:
                axis = (axis,)
            if options["keepdims"] is False and _integers(axis):
                tree = _decode(value.args[0], namespace, extended)
                if tree is None:
                    return None
                step = Step(statement, target, "colsum", tree)
                step.axes = axis
                return step
    if isinstance(value, gast.Name):
        return Step(statement, target, "copy", source=value.id)
    tree = _decode(value, namespace, extended)
    if tree is not None and tree.leaf is not None:  # stop_gradient(name)
        return Step(statement, target, "copy", source=tree.leaf)
    if tree is None or tree.op is None or tree.op in COMPARISONS:
        return None  # a number; a region's values are floating point: no comparisons
    return Step(statement, target, "tree", tree=tree)


def _options(call, op, operands: int) -> dict | None:
    """The options of ``call`` of ``op`` (the parameters after its first
    ``operands``) by name, defaults included; None unless each argument written for
    one is a literal (a name's value is not known when the region is written, and
    the statements kept for its fallback would read a name it does not pass them)
    and every argument is one of ``op``'s parameters."""
    parameters = list(op.input_names) + list(op.param_names)
    options = dict(op.defaults)
    for parameter, argument in bound_arguments(call, parameters):
        if parameter in parameters[:operands]:
            continue
        value = NOT_LITERAL if parameter is None else literal(argument)
        if value is NOT_LITERAL:
            return None
        options[parameter] = value
    return options


def _integers(value) -> bool:
    """Whether ``value`` is a tuple of integers (axes)."""
    return type(value) is tuple and all(type(item) is int for item in value)


def find_regions(
    body: list, namespace: dict, shapes: dict, large: int = LARGE, extended=True
) -> list[tuple[int, int, list, list, tuple | None]]:
    """``(start, stop, steps, hoisted, rows)`` of each region in ``body`` (a block);
    a region stops where a value of another known shape would join it (the pass
    could not run), unless the region goes over rows: ``rows`` is then the shape of
    its full values, beside which it has values with the last axis 1 (from row
    reductions and ``keepdims``) and arrays of the last axis's shape (``b`` in
    ``x * g + b``: read whole by every block of rows), else None. Regions of a known
    size below ``large`` elements are left out; ``extended``: see ``_step``.
    ``hoisted``: steps between start and stop that compute a 0-d value from 0-d
    values and numbers (a scale from a 0-d parameter); they run before the region
    instead of in it, where they would make it fall back to its statements (a value
    of numbers only), whenever no region step before them touches what they read or
    write."""
    found = []
    # each statement decoded once (a failed start is retried from the next one)
    candidates = [_step(statement, namespace, extended) for statement in body]
    reads = [loads(statement) for statement in body]
    _follow_shapes(body, candidates, shapes)
    position = 0
    while position < len(body):
        steps: list[Step] = []
        hoisted: list[Step] = []
        sums: set = set()  # full sums: 0-d
        totals: set = set()  # sums and column sums: complete after the region only
        ones: set = set()  # ones_like of a sum and its copies: 0-d values
        extent = None  # the region's array shape, once a value's is known
        rowed = False  # whether it has row values or column arrays beside full ones
        stop = position
        while stop < len(body):
            if isinstance(body[stop], Comment):  # kept, before the region's call
                stop += 1
                continue
            step = candidates[stop]
            if step is not None and _hoistable(step, hoisted, steps):
                hoisted.append(step)
                stop += 1
                continue
            if step is not None and step.kind == "ones" and step.source not in sums:
                step = None
            if step is not None and step.kind == "sum" and step.source in ones:
                step = None  # the sum of a 0-d value is that value, not a pass's
            if step is None or (reads[stop] & totals and step.kind != "ones"):
                break  # a sum is complete only after the region
            known = {
                shape
                for name, shape in step.shapes.items()
                if shape and name not in totals
            }
            joined = _join(extent, rowed, known)
            if joined is None:
                break
            extent, rowed = joined
            if step.reduced or step.kind == "colsum":
                summed = step.reduced + ([step.full] if step.kind == "colsum" else [])
                if any(shape != extent for shape in summed):
                    break
                rowed = True
            if rowed and extent[-1:] in (
                step.shapes.get(step.target) if step.kind != "colsum" else None,
                step.shapes.get(step.source) if step.kind == "sum" else None,
            ):
                # a value of the last axis's shape is computed once, not per block
                # of rows; every block reads one whole: its sum is not theirs
                break
            if step.kind in ("sum", "colsum"):
                totals.add(step.target)
            if step.kind == "sum":
                sums.add(step.target)
            if step.kind == "ones" or (step.kind == "copy" and step.source in ones):
                ones.add(step.target)
            steps.append(step)
            stop += 1
        while steps and (
            steps[-1].kind in ("copy", "ones")
            or (steps[-1].tree and steps[-1].tree.op == "expand")
        ):
            steps.pop()  # nothing gained by ending on a copy, ones or a broadcast
            stop = _index(body, steps[-1].statement) + 1 if steps else position
        hoisted = [h for h in hoisted if _index(body, h.statement) < stop]
        operations = sum(
            (s.tree.count() if s.tree else 0) + (s.kind in ("sum", "colsum"))
            for s in steps
        )
        small = extent is not None and int(np.prod(extent)) < large  # never passes
        if (
            operations >= MIN_OPERATIONS
            # (a row reduction inside a tree is a pass of its own unfused)
            and sum((s.kind == "tree") + bool(s.reduced) for s in steps) >= 2
            and not small
        ):
            found.append((position, stop, steps, hoisted, extent if rowed else None))
            position = stop
        else:
            position += 1
    return found


def _follow_shapes(body: list, candidates: list, shapes: dict) -> None:
    """Give each step (``candidates``) the shapes, where known, of the values it reads
    and makes at that point of the block: ``shapes`` (the analysis of the function)
    and what the block's steps give (a copy or ``ones_like`` has its source's shape,
    a sum is 0-d, a tree the shape ``_settle`` finds), which covers the gradient's
    values. A candidate whose meaning the shapes rule out becomes None. A shape
    followed wrongly (in a loop, a value read before the statement that changes its
    shape) costs a region its pass, never a result: a region checks its arrays'
    shapes when it runs."""
    known = {name: shape for name, shape in shapes.items() if shape is not None}
    for position, (statement, step) in enumerate(zip(body, candidates)):
        shape = None
        if step is not None:
            step.shapes = {name: known[name] for name in step.reads if name in known}
            try:
                shape = _settle(step, known)
            except _Unsettled:
                step = candidates[position] = None
        if step is None:
            for name in stores(statement) - shapes.keys():
                known.pop(name, None)  # assigned by something not followed
            continue
        if shapes.get(step.target) is not None:
            # the analysis knows it (its None is "not known": the shape followed
            # stays, else a value of a row's or the last axis's shape, from a
            # number hinted 0-d, joined a region over rows as a full one)
            shape = shapes[step.target]
        if shape is None:
            known.pop(step.target, None)
        else:
            known[step.target] = step.shapes[step.target] = shape


class _Unsettled(Exception):
    """A step whose meaning the shapes known do not settle."""


def _settle(step: Step, known: dict) -> tuple | None:
    """The shape of the value ``step`` makes (None where unknown), its tree settled
    (``_shape``); ``unbroadcast`` of a value to the shape of its last axis makes the
    step a column sum. Raises ``_Unsettled`` where the step cannot join a region."""
    if step.kind == "sum":
        return ()
    if step.kind in ("copy", "ones"):
        return known.get(step.source)
    tree = step.tree
    if step.kind == "tree" and tree.op == "unbroadcast":
        like = known.get(tree.children[1].leaf)
        operand = _shape(tree.children[0], known, step)
        if like and operand and len(operand) >= 2 and like == operand[-1:]:
            step.kind, step.tree, step.full = "colsum", tree.children[0], operand
            return like  # summed over every axis but the last
    shape = _shape(step.tree, known, step)
    if step.kind != "colsum":
        return shape
    if shape is None or len(shape) < 2:
        raise _Unsettled
    leading = tuple(range(len(shape) - 1))
    if tuple(sorted(a % len(shape) for a in step.axes)) != leading:
        raise _Unsettled  # a sum over every axis but the last only
    step.full = shape
    return shape[-1:]


def _shape(node, known: dict, step: Step) -> tuple | None:
    """The shape of a tree's value (None where unknown), settling its nodes whose
    meaning depends on shapes: a row reduction needs its operand's shape, at least
    2-d, the axis its last (the shape is recorded in ``step.reduced``); an
    ``unbroadcast`` is its operand where that has ``like``'s shape and a row sum
    where it has ``like``'s with the last axis 1; an expand broadcasts a 0-d value,
    or one of ``like``'s shape with the last axis 1 (kept by keepdims). Raises
    ``_Unsettled`` for any other."""
    if node.leaf is not None:
        return known.get(node.leaf)
    if node.op is None:
        return ()
    if node.op in ("unbroadcast", "expand"):
        operand = _shape(node.children[0], known, step)
        like = known.get(node.children[1].leaf)
        if operand is None or like is None:
            raise _Unsettled
        if node.op == "expand":
            if operand == () or (node.value and operand in (like, _row(like))):
                return like
            raise _Unsettled
        if operand == like:  # the operand itself
            child = node.children[0]
            node.op, node.children, node.leaf = child.op, child.children, child.leaf
            node.value, node.operator = child.value, child.operator
            return like
        if len(like) >= 2 and like == _row(operand):
            node.op, node.children, node.value = "rowsum", node.children[:1], -1
            step.reduced.append(operand)
            return like
        raise _Unsettled
    shapes = [_shape(child, known, step) for child in node.children]
    if node.op in _ROW_OPS:
        operand = shapes[0]
        if operand is None or len(operand) < 2:
            raise _Unsettled
        if node.value not in (-1, len(operand) - 1):
            raise _Unsettled  # a reduction over another axis: not a row's
        step.reduced.append(operand)
        return _row(operand)
    return None if None in shapes else _broadcast(shapes)


def _row(shape: tuple) -> tuple:
    """The shape of a reduction of each row of a value of ``shape``."""
    return shape[:-1] + (1,)


def _join(extent, rowed: bool, shapes: set) -> tuple | None:
    """A region's ``(extent, rowed)`` once values of ``shapes`` join it, or None if
    one cannot: each value must have the extent or, the extent being at least 2-d,
    the extent with the last axis 1 (a row's value) or the last axis's shape (read
    whole by every block of rows). A region whose values so far have one shape
    becomes a region over rows of a larger one."""
    for shape in sorted(shapes, key=len, reverse=True):
        if extent is None or shape == extent:
            extent = shape
        elif len(extent) >= 2 and shape in (_row(extent), extent[-1:]):
            rowed = True
        elif not rowed and len(shape) >= 2 and extent == _row(shape):
            extent, rowed = shape, True
        else:
            return None
    return extent, rowed


def _broadcast(shapes: list) -> tuple | None:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def _hoistable(step: Step, hoisted: list, before: list) -> bool:
    """Whether ``step`` computes a value known to be 0-d from 0-d values (a sum of a
    0-d value, ``ones_like`` of such a sum included) and may run before the region
    steps ``before`` it: none of them reads or assigns its target or assigns what it
    reads."""
    if step.shapes.get(step.target, None) != ():
        return False
    if step.kind == "sum" and step.shapes.get(step.source, None) != ():
        return False  # the sum of an array: the region's work
    if step.kind == "ones" and step.source not in {h.target for h in hoisted}:
        return False
    return all(
        other.target != step.target
        and step.target not in other.reads
        and other.target not in step.reads
        for other in before
    )


def _index(body: list, statement) -> int:
    return next(i for i, candidate in enumerate(body) if candidate is statement)


def fuse_regions(
    definition: gast.FunctionDef,
    namespace: dict,
    kernels: dict,
    shapes: dict,
    kind: str = "cpu",
):
    """``definition`` with its regions replaced by calls of region kernels (added to
    ``kernels``) for backend ``kind`` (``cpu``: chunked NumPy passes; ``cuda``: CUDA
    kernels, for any size), and the functions holding the original statements.
    ``shapes``: the values' shapes where known or likely (a gradient's, its value's).
    The function returned is a new tree, with or without regions: the caller's
    fusion rewrites it in place. (Looking for regions first, to copy only a function
    that has some, looked for them twice where it had.)"""
    large = LARGE if kind == "cpu" else 0  # a GPU saves launches at any size
    extended = kind == "cpu"  # CUDA regions take no row reductions nor broadcasts
    definition = clone(definition)
    reads = load_counts(definition.body)
    fallbacks: list = []

    def block(body: list) -> list:
        for statement in body:
            for field, inner in nested_blocks(statement):
                setattr(statement, field, block(inner))
        out, done = [], 0
        regions = find_regions(body, namespace, shapes, large, extended)
        for start, stop, steps, hoisted, rows in regions:
            out.extend(body[done:start])
            before = [h.statement for h in hoisted]  # 0-d values: not the region's
            out.extend(before)
            rest = [s for s in body[start:stop] if all(s is not h for h in before)]
            out.extend(replace(rest, steps, rows))
            done = stop
        return out + body[done:]

    def replace(statements: list, steps: list, rows: tuple | None):
        inside = load_counts(statements)
        carried = _read_before_assigned(steps)  # in a loop, the next pass reads them
        outputs = []
        for target in [s.target for s in steps]:
            elsewhere = reads.get(target, 0) > inside.get(target, 0)
            if (elsewhere or target in carried) and target not in outputs:
                outputs.append(target)
        if not outputs:
            return statements
        comments = [s for s in statements if isinstance(s, Comment)]
        statements = [s for s in statements if not isinstance(s, Comment)]
        name = f"__fused_region_{len([k for k in kernels if '_region_' in k]) + 1}"
        writer = RegionWriter(steps, outputs, rows)
        fallback = f"{name}_unfused"
        if kind == "cpu":
            kernels[name] = RegionKernel(name, writer.write(name), fallback)
        else:
            try:
                kernels[name] = writer.cuda(name)
            except Unsupported:
                return comments + statements  # fused statement by statement
        arguments = [gast.Name(n, gast.Load(), None, None) for n in writer.inputs]
        results = [gast.Name(n, gast.Load(), None, None) for n in outputs]
        returned = results[0] if len(results) == 1 else gast.Tuple(results, gast.Load())
        body = clone(statements) + [gast.Return(returned)]
        fallbacks.append(function_definition(fallback, writer.inputs, body))
        targets = [gast.Name(n, gast.Store(), None, None) for n in outputs]
        target = targets[0] if len(targets) == 1 else gast.Tuple(targets, gast.Store())
        call = gast.Call(gast.Name(name, gast.Load(), None, None), arguments, [])
        fused = gast.Assign([target], call, None)
        origins.mark_joined(fused, statements)  # (the lines it computes)
        return comments + [fused]

    definition.body = block(definition.body)
    return definition, fallbacks


def _read_before_assigned(steps: list) -> set:
    """Names the region reads before (or without) assigning them."""
    assigned, found = set(), set()
    for step in steps:
        found |= step.reads - assigned
        assigned.add(step.target)
    return found
