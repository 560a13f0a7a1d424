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
from ppto.fusion.cuda_regions import CudaRegion
from ppto.fusion.kernels import (
    COMPARISONS,
    ELEMENTWISE,
    LARGE,
    TERNARY,
    Node,
    RegionKernel,
    ufunc,
)
from ppto.fusion.registry import ALIASES
from ppto.ops.reductions import reduce_sum
from ppto.ops.shape import ones_like
from ppto.transform.emit import Comment
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


class _Writer:
    """Turns one region's steps into instructions (each value computed once) and
    those into the CPU's chunked pass (``write``: each operation a ufunc call writing
    into a chunk buffer, reused once the value is dead, or for a value read after the
    region into its slice of an output array) or a ``CudaRegion`` (``cuda``)."""

    def __init__(self, steps: list, outputs: list) -> None:
        self.steps = steps
        self.outputs = outputs  # names read after the region, in order
        self.inputs: list[str] = []
        self.instructions: list = []  # (value number, op, operand refs)
        self.known: dict = {}  # (op, operand refs) -> ref: each value computed once

    # --- what the region computes -----------------------------------------------------

    def operand(self, tree, current: dict):
        """The ref of a tree's value: ("input", i), ("value", k), ("const", v),
        ("one",) for ``ones_like`` of a sum, ("sum", name)."""
        if tree.leaf is not None:
            if tree.leaf in current:
                return current[tree.leaf]
            if tree.leaf not in self.inputs:
                self.inputs.append(tree.leaf)
            return ("input", self.inputs.index(tree.leaf))
        if tree.op is None:
            return ("const", tree.value)
        op = tree.op
        operands = tuple(self.operand(child, current) for child in tree.children)
        if op in ("mul", "div") and operands[-1] == ("one",):
            if operands[0][0] in ("input", "value"):
                return operands[0]  # x * 1 and x / 1 are x, every dtype being one
        if op == "mul" and operands[0] == ("one",) and operands[1][0] != "const":
            return operands[1]
        key = (op, operands)
        if key not in self.known:
            number = len(self.instructions) + 1
            self.instructions.append((number, op, operands))
            self.known[key] = ("value", number)
        return self.known[key]

    def analyse(self) -> tuple[dict, dict]:
        """``(sums, outputs)``: what each sum accumulates and each output holds."""
        current: dict = {}
        sums: dict = {}
        self.computed: set = set()  # names the statements make new arrays for
        for step in self.steps:
            if step.kind == "tree":
                current[step.target] = self.operand(step.tree, current)
                self.computed.add(step.target)
            elif step.kind == "copy":
                current[step.target] = self.operand(Node(leaf=step.source), current)
                if step.source in self.computed:
                    self.computed.add(step.target)
                else:
                    self.computed.discard(step.target)
            elif step.kind == "ones":
                current[step.target] = ("one",)
            else:
                sums[step.target] = self.operand(Node(leaf=step.source), current)
                current[step.target] = ("sum", step.target)
        return sums, {name: current[name] for name in self.outputs}

    def simplified(self) -> tuple[dict, dict]:
        """``analyse``'s sums and outputs, negations folded into their uses."""
        sums, outputs = self.analyse()
        self.fold_negations(list(sums.values()) + list(outputs.values()))
        return sums, outputs

    def fold_negations(self, kept: list) -> None:
        """``a + (-b)`` -> ``a - b`` and ``a - (-b)`` -> ``a + b`` where ``-b`` is
        read nowhere else (exact: subtracting is adding the negation), one pass less
        (the gradient of ``exp(-x)`` makes ``dx = -dt`` then ``dx + ...``)."""
        uses: dict = {}
        for ref in kept:
            uses[ref] = uses.get(ref, 0) + 1
        for _, _, operands in self.instructions:
            for ref in operands:
                uses[ref] = uses.get(ref, 0) + 1
        negations = {
            ("value", number): operands[0]
            for number, op, operands in self.instructions
            if op == "neg" and operands[0][0] in ("input", "value")
        }
        dropped = set()
        for position, (number, op, operands) in enumerate(self.instructions):
            if op not in ("add", "sub"):
                continue
            left, right = operands
            if op == "add" and left in negations and right not in negations:
                left, right = right, left  # -b + a: a - b as well
            if right in negations and uses[right] == 1:
                flipped = "sub" if op == "add" else "add"
                self.instructions[position] = (
                    number,
                    flipped,
                    (left, negations[right]),
                )
                dropped.add(right[1])
        self.instructions = [i for i in self.instructions if i[0] not in dropped]

    # --- the generated function -------------------------------------------------------

    def write(self, name: str) -> str:
        sums, outputs = self.simplified()
        into = {}  # value number -> the output array it is written into
        for number, output in enumerate(self.outputs):
            ref = outputs[output]
            if ref[0] == "value" and ref[1] not in into:
                into[ref[1]] = f"out{number}"
        last_use = {}
        for position, (_, _, operands) in enumerate(self.instructions):
            for ref in operands:
                if ref[0] == "value":
                    last_use[ref[1]] = position
        for ref in sums.values():
            if ref[0] == "value":
                last_use[ref[1]] = len(self.instructions)  # read after every chunk
        loop, buffers = self.chunk_body(into, last_use)
        for target, ref in sums.items():
            total = f"float(np.add.reduce({self.spell(ref)}))"
            loop.append(f"            partial_{target}[number] = {total}")
        # the pass names its inputs a0, a1, ...: a user's name (``number``, ``sum``)
        # would collide with the pass's own locals and the builtins it calls
        names = [f"a{number}" for number in range(len(self.inputs))]
        arguments = ", ".join(names)
        lines = [
            f"def {name}({arguments}):",
            f'    """{", ".join(self.inputs)} ({arguments}) -> '
            f'{", ".join(self.outputs)}, in one pass of chunks."""',
            f"    found = layout(({arguments},))",
            "    if found is None:",
            "        return None",
            "    shape, dtype = found",
            "    size = int(np.prod(shape))",
            "    chunk = CHUNK_BYTES // dtype.itemsize",
        ]
        refs = [r for _, _, operands in self.instructions for r in operands]
        if ("one",) in refs + list(outputs.values()):
            lines.append("    one = np.ones((), dtype)")
        for number, input_ in enumerate(names):
            lines.append(
                f"    flat{number} = np.ravel({input_}) if np.ndim({input_}) else None"
            )
        for reads in self.scalar_risks(outputs, sums):
            test = " and ".join(f"flat{i} is None" for i in sorted(reads)) or "True"
            lines += [
                f"    if {test}:  # a value of numbers only: not an array",
                "        return None",
            ]
        lines += [
            f"    {array} = np.empty(size, dtype)"
            for array in sorted(set(into.values()))
        ]
        lines.append("    chunks = -(-size // chunk)")
        lines += [  # one partial sum per chunk, added in chunk order below
            f"    partial_{target} = [0.0] * chunks" for target in sums
        ]
        lines += ["", "    def part(claim):  # the chunks this thread claims"]
        lines += [f"        buffer{i} = np.empty(chunk, dtype)" for i in range(buffers)]
        # each chunk's views are made once, not at every use: with two threads, the
        # Python between two ufunc calls is when the other thread waits for the GIL
        views = [f"piece{i} = buffer{i}[:count]" for i in range(buffers)]
        outs = sorted(set(into.values()))
        views += [f"{out}_piece = {out}[start:stop]" for out in outs]
        lines += [
            "        for number in iter(claim, None):",
            "            start = number * chunk",
            "            stop = min(start + chunk, size)",
            "            count = stop - start",
        ]
        for number, input_ in enumerate(names):
            lines.append(
                f"            in{number} = flat{number}[start:stop] "
                f"if flat{number} is not None else {input_}"
            )
        lines += [f"            {view}" for view in views]
        lines += loop
        lines += ["", "    run_chunks(part, chunks)"]
        lines += [f"    total_{target} = sum(partial_{target})" for target in sums]
        results = [self.result(outputs[o], into, o) for o in self.outputs]
        returned = results[0] if len(results) == 1 else f"({', '.join(results)})"
        return "\n".join(lines + [f"    return {returned}", ""])

    def cuda(self, name: str) -> CudaRegion:
        """The region as CUDA kernels (raises ``Unsupported`` where C would type a
        value otherwise than NumPy)."""
        sums, outputs = self.simplified()
        return CudaRegion(
            name,
            list(self.inputs),
            list(self.instructions),
            [(output, outputs[output]) for output in self.outputs],
            sums,
            self.scalar_risks(outputs, sums),
            self.computed,
        )

    def scalar_risks(self, outputs: dict, sums: dict) -> list[set]:
        """For each computed output and each sum, the inputs it reads: if all of them
        are numbers at run time (a loop's counter, a 0-d array), an output is a
        number, which the pass would write as an array, and a sum would add the number
        once per element."""
        reads: dict = {}
        for number, _, operands in self.instructions:
            found = set()
            for ref in operands:
                if ref[0] == "input":
                    found.add(ref[1])
                elif ref[0] == "value":
                    found |= reads[ref[1]]
            reads[number] = found
        risks = []
        computed = [ref for ref in outputs.values() if ref[0] == "value"]
        for ref in computed + list(sums.values()):
            if ref[0] == "input":
                read = {ref[1]}
            elif ref[0] == "value":
                read = reads[ref[1]]
            else:
                continue
            if read not in risks:
                risks.append(read)
        return risks

    def chunk_body(self, into: dict, last_use: dict) -> tuple[list, int]:
        lines, free, buffers = [], [], 0
        self.places: dict = {}  # value number -> how the chunk code reads it
        for position, (number, op, operands) in enumerate(self.instructions):
            call = f"np.{ufunc(op).__name__}("
            call += ", ".join(self.spell(ref) for ref in operands)
            for ref in dict.fromkeys(operands):  # dead after this: its buffer may
                if ref[0] == "value" and last_use.get(ref[1]) == position:  # hold it
                    place = self.places[ref[1]]
                    if place.startswith("piece"):
                        free.append(place)
            if number in into:
                destination = f"{into[number]}_piece"
            elif op in COMPARISONS or op == "where":
                destination = None  # no out=: a boolean, or np.where
            else:
                if not free:
                    free.append(f"piece{buffers}")
                    buffers += 1
                destination = free.pop()
            if destination is None:
                lines.append(f"            v{number} = {call})")
                self.places[number] = f"v{number}"
            elif op == "where":  # (np.where has no out=)
                lines.append(f"            {destination}[...] = {call})")
                self.places[number] = destination
            else:
                lines.append(f"            {call}, out={destination})")
                self.places[number] = destination
        return lines, buffers

    def spell(self, ref) -> str:
        if ref[0] == "const":
            return repr(ref[1])
        if ref[0] == "input":
            return f"in{ref[1]}"
        if ref[0] == "one":
            return "one"
        return self.places[ref[1]]

    def result(self, ref, into: dict, name: str) -> str:
        if ref[0] == "value":
            return f"{into[ref[1]]}.reshape(shape)"
        if ref[0] == "input" and name in self.computed:
            # ``dw = one * x`` was a new array: handing back x itself would let the
            # caller's in-place update of the gradient change x
            return f"np.array(a{ref[1]}, dtype)"
        if ref[0] == "input":
            return f"a{ref[1]}"
        if ref[0] == "sum":
            return f"dtype.type(total_{ref[1]})"
        return "one"


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
        writer = _Writer(steps, outputs)
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
