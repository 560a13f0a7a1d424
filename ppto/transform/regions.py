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
reads has one shape and one floating dtype, at least ``LARGE`` elements; otherwise
(broadcast operands, mixed dtypes, small arrays) it calls the original statements,
kept as a function of their own.
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
from ppto.ops.reductions import reduce_sum
from ppto.ops.shape import ones_like
from ppto.transform.emit import Comment
from ppto.transform.region_writer import RegionWriter
from ppto.transform.trees import (
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
    """One statement of a region: ``target = tree`` (an elementwise expression), a
    full sum of a value, ``ones_like`` of a sum, or a copy."""

    def __init__(self, statement, target: str, kind: str, tree=None, source=None):
        self.statement = statement
        self.target = target
        self.kind = kind  # "tree", "sum", "ones", "copy"
        self.tree = tree  # a kernels.Node whose leaves are variable names
        self.source = source  # the name a sum, ones_like or copy reads
        self.reads = {source} if source else set(tree.leaves())  # the names it reads
        self.shapes: dict = {}  # name -> shape, where known, of what it reads and makes


def _decode(expression, namespace):
    """The elementwise tree of ``expression``, or None."""
    if isinstance(expression, gast.Name):
        return Node(leaf=expression.id)
    if (
        isinstance(expression, gast.Constant)
        and isinstance(expression.value, (int, float))
        and not isinstance(expression.value, bool)
    ):
        return Node(value=expression.value)
    if isinstance(expression, gast.BinOp) and type(expression.op) in _BINARY:
        return _node(
            _BINARY[type(expression.op)], [expression.left, expression.right], namespace
        )
    if isinstance(expression, gast.UnaryOp) and isinstance(expression.op, gast.USub):
        return _node("neg", [expression.operand], namespace)
    if (
        isinstance(expression, gast.Compare)
        and len(expression.ops) == 1
        and type(expression.ops[0]) in _COMPARE
    ):
        return _node(
            _COMPARE[type(expression.ops[0])],
            [expression.left, expression.comparators[0]],
            namespace,
        )
    if (
        isinstance(expression, gast.Call)
        and isinstance(expression.func, gast.Name)
        and not expression.keywords
    ):
        op = namespace.get(expression.func.id)
        name = getattr(op, "name", None)
        arity = len(getattr(op, "input_names", ()))
        if (name in ELEMENTWISE or name in TERNARY or name in ALIASES) and arity == len(
            expression.args
        ):
            return _node(name, expression.args, namespace)
    return None


def _node(name, arguments, namespace):
    children = [_decode(argument, namespace) for argument in arguments]
    if any(child is None for child in children):
        return None
    return ALIASES[name](children) if name in ALIASES else Node(name, children)


def _step(statement, namespace):
    """The statement as a region step, or None. A ``ones`` step (``ones_like(s)``)
    belongs to a region only where ``s`` is one of its sums."""
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
    if isinstance(value, gast.Name):
        return Step(statement, target, "copy", source=value.id)
    tree = _decode(value, namespace)
    if tree is None or tree.op is None or tree.op in COMPARISONS:
        return None  # a region's values are floating point: no bare comparisons
    return Step(statement, target, "tree", tree=tree)


def find_regions(
    body: list, namespace: dict, shapes: dict, large: int = LARGE
) -> list[tuple[int, int, list, list]]:
    """``(start, stop, steps, hoisted)`` of each region in ``body`` (a block); a
    region stops where a value of another known shape would join it (the pass could
    not run). Regions of a known size below ``large`` elements are left out.
    ``hoisted``: steps between start and stop that compute a 0-d value from 0-d
    values and numbers (a scale from a 0-d parameter); they run before the region
    instead of in it, where they would make it fall back to its statements (a value
    of numbers only), whenever no region step before them touches what they read or
    write."""
    found = []
    # each statement decoded once (a failed start is retried from the next one)
    candidates = [_step(statement, namespace) for statement in body]
    reads = [loads(statement) for statement in body]
    _follow_shapes(body, candidates, shapes)
    position = 0
    while position < len(body):
        steps: list[Step] = []
        hoisted: list[Step] = []
        sums: set = set()
        ones: set = set()  # ones_like of a sum and its copies: 0-d values
        extent = None  # the region's array shape, once a value's is known
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
            if step is None or (reads[stop] & sums and step.kind != "ones"):
                break  # a sum is complete only after the region
            known = {
                shape
                for name, shape in step.shapes.items()
                if shape and name not in sums
            }
            if len(known | ({extent} if extent else set())) > 1:
                break
            extent = extent or next(iter(known), None)
            if step.kind == "sum":
                sums.add(step.target)
            if step.kind == "ones" or (step.kind == "copy" and step.source in ones):
                ones.add(step.target)
            steps.append(step)
            stop += 1
        while steps and steps[-1].kind in ("copy", "ones"):
            steps.pop()  # nothing gained by ending on a copy
            stop = _index(body, steps[-1].statement) + 1 if steps else position
        hoisted = [h for h in hoisted if _index(body, h.statement) < stop]
        operations = sum(
            (s.tree.count() if s.tree else 0) + (s.kind == "sum") for s in steps
        )
        small = extent is not None and int(np.prod(extent)) < large  # never passes
        if (
            operations >= MIN_OPERATIONS
            and sum(s.kind == "tree" for s in steps) >= 2
            and not small
        ):
            found.append((position, stop, steps, hoisted))
            position = stop
        else:
            position += 1
    return found


def _follow_shapes(body: list, candidates: list, shapes: dict) -> None:
    """Give each step (``candidates``) the shapes, where known, of the values it reads
    and makes at that point of the block: ``shapes`` (the analysis of the function)
    and what the block's elementwise statements give (a copy or ``ones_like`` has its
    source's shape, a sum is 0-d, a tree the broadcast of its leaves'), which covers
    the gradient's values. A shape followed wrongly (in a loop, a value read before
    the statement that changes its shape) costs a region its pass, never a result: a
    region checks its arrays' shapes when it runs."""
    known = {name: shape for name, shape in shapes.items() if shape is not None}
    for statement, step in zip(body, candidates):
        if step is None:
            for name in stores(statement) - shapes.keys():
                known.pop(name, None)  # assigned by something not followed
            continue
        if step.target in shapes:
            shape = shapes[step.target]  # the analysis knows it
        elif step.kind == "sum":
            shape = ()
        elif step.kind in ("copy", "ones"):
            shape = known.get(step.source)
        else:
            leaves = [known.get(name) for name in step.reads]
            shape = None if None in leaves else _broadcast(leaves)
        step.shapes = {name: known[name] for name in step.reads if name in known}
        if shape is None:
            known.pop(step.target, None)
        else:
            known[step.target] = step.shapes[step.target] = shape


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
    ``shapes``: the values' shapes where known."""
    large = LARGE if kind == "cpu" else 0  # a GPU saves launches at any size
    if not _has_regions(definition.body, namespace, shapes, large):
        return definition, []  # unchanged: no copy needed
    definition = clone(definition)
    reads = load_counts(definition.body)
    fallbacks: list = []

    def block(body: list) -> list:
        for statement in body:
            for field, inner in nested_blocks(statement):
                setattr(statement, field, block(inner))
        out, done = [], 0
        for start, stop, steps, hoisted in find_regions(body, namespace, shapes, large):
            out.extend(body[done:start])
            before = [h.statement for h in hoisted]  # 0-d values: not the region's
            out.extend(before)
            rest = [s for s in body[start:stop] if all(s is not h for h in before)]
            out.extend(replace(rest, steps))
            done = stop
        return out + body[done:]

    def replace(statements: list, steps: list):
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
        writer = RegionWriter(steps, outputs)
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
        return comments + [gast.Assign([target], call, None)]

    definition.body = block(definition.body)
    return definition, fallbacks


def _has_regions(body: list, namespace: dict, shapes: dict, large: int) -> bool:
    """Whether ``body`` or a block inside it has a region."""
    for statement in body:
        for _, inner in nested_blocks(statement):
            if _has_regions(inner, namespace, shapes, large):
                return True
    return bool(find_regions(body, namespace, shapes, large))


def _read_before_assigned(steps: list) -> set:
    """Names the region reads before (or without) assigning them."""
    assigned, found = set(), set()
    for step in steps:
        found |= step.reads - assigned
        assigned.add(step.target)
    return found
