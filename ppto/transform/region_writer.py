"""The code of one elementwise region (``ppto.transform.regions``): its steps as
instructions, each value computed once, written as the CPU's chunked NumPy pass or
handed to CUDA as a ``CudaRegion``.

A region over rows (``rows``: the shape of its full values) also has values of that
shape with the last axis 1 (row reductions, ``keepdims`` values) and arrays of the
last axis's shape (a layer's scale and shift, read whole): its pass goes over blocks
of whole rows, so a row's maximum or sum is complete within its block and the values
computed from it are used while the block is in cache (softmax, logsumexp, layer
norm and their gradients in one pass); sums over the rows (``colsum``) are added up
per block. Each value has a kind: ``SCALAR`` (0-d), ``ROW``, ``COLUMN`` or ``FULL``,
as bits: a value computed from others has the union of theirs, as broadcasting
gives."""

from __future__ import annotations

from ppto.fusion.cuda import Unsupported
from ppto.fusion.cuda_regions import CudaRegion
from ppto.fusion.kernels import COMPARISONS, Node, ufunc

SCALAR, ROW, COLUMN, FULL = 0, 1, 2, 3  # FULL = ROW | COLUMN
_REDUCERS = {"rowsum": "np.add", "rowmax": "np.maximum", "rowmean": "np.add"}


class RegionWriter:
    """Turns one region's steps into instructions (each value computed once) and
    those into the CPU's chunked pass (``write``: each operation a ufunc call writing
    into a chunk buffer, reused once the value is dead, or for a value read after the
    region into its slice of an output array) or a ``CudaRegion`` (``cuda``)."""

    def __init__(self, steps: list, outputs: list, rows: tuple | None = None) -> None:
        self.steps = steps
        self.outputs = outputs  # names read after the region, in order
        self.rows = rows  # the full values' shape of a region over rows, else None
        self.inputs: list[str] = []
        self.input_kinds: list[int] = []
        self.instructions: list = []  # (value number, op, operand refs)
        self.kinds: dict = {}  # value number -> its kind
        self.known: dict = {}  # (op, operands, operator) -> ref: each computed once
        self.shapes: dict = {}  # the shapes known at the step being analysed
        # values written with Python's operators (``s * 2.0``), not ufunc calls
        self.operators: set = set()

    # --- what the region computes -----------------------------------------------------

    def operand(self, tree, current: dict):
        """The ref of a tree's value: ("input", i), ("value", k), ("const", v),
        ("one",) for ``ones_like`` of a sum, ("sum", name), or ("expand", kind,
        ref, like ref): a value of a smaller kind broadcast to ``like``'s (read in
        place, broadcasting, by the operations that use it)."""
        if tree.leaf is not None:
            if tree.leaf in current:
                return current[tree.leaf]
            if tree.leaf not in self.inputs:
                self.inputs.append(tree.leaf)
                self.input_kinds.append(self.kind_of_shape(self.shapes.get(tree.leaf)))
            return ("input", self.inputs.index(tree.leaf))
        if tree.op is None:
            return ("const", tree.value)
        op = tree.op
        operands = tuple(self.operand(child, current) for child in tree.children)
        if op in ("mul", "div") and operands[-1] == ("one",):
            if operands[0][0] in ("input", "value", "expand"):
                return operands[0]  # x * 1 and x / 1 are x, every dtype being one
        if op == "mul" and operands[0] == ("one",) and operands[1][0] != "const":
            return operands[1]
        if op in _REDUCERS:
            return self.instruction(op, operands, ROW)
        if op == "expand":  # read as it is where it has the kind of ``like``
            value, like = operands
            kind = self.kind(like)
            return (
                value
                if self.kind(value) | kind == self.kind(value)
                else ("expand", kind, value, like)
            )
        kind = SCALAR
        for ref in operands:
            kind |= self.kind(ref)
        return self.instruction(op, operands, kind, tree.operator)

    def instruction(self, op: str, operands: tuple, kind: int, operator=False):
        key = (op, operands, operator)
        if key not in self.known:
            number = len(self.instructions) + 1
            self.instructions.append((number, op, operands))
            self.kinds[number] = kind
            if operator:
                self.operators.add(number)
            self.known[key] = ("value", number)
        return self.known[key]

    def kind_of_shape(self, shape) -> int:
        """An input's kind, from its shape where known (else taken for full: the
        pass checks its arguments' shapes when it runs)."""
        if shape == ():
            return SCALAR
        if self.rows and shape == self.rows[:-1] + (1,) and shape != self.rows:
            return ROW
        if self.rows and shape == self.rows[-1:]:
            return COLUMN
        return FULL

    def kind(self, ref) -> int:
        if ref[0] == "input":
            return self.input_kinds[ref[1]]
        if ref[0] == "value":
            return self.kinds[ref[1]]
        if ref[0] == "expand":
            return ref[1]
        return SCALAR

    def analyse(self) -> tuple[dict, dict]:
        """``(sums, outputs)``: what each sum accumulates and each output holds."""
        current: dict = {}
        sums: dict = {}
        self.computed: set = set()  # names the statements make new arrays for
        self.colsums: dict = {}  # column sum -> what it accumulates
        for step in self.steps:
            self.shapes = step.shapes
            for name in step.names:  # what the statements read, as they read it
                if name not in current:  # (a broadcast's like: for its shape)
                    self.operand(Node(leaf=name), current)
            if step.kind == "tree":
                current[step.target] = self.operand(step.tree, current)
                self.computed.add(step.target)
            elif step.kind == "colsum":
                self.colsums[step.target] = self.operand(step.tree, current)
                current[step.target] = ("colsum", step.target)
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
        kept = [*sums.values(), *self.colsums.values(), *outputs.values()]
        self.fold_negations(kept)
        return sums, outputs

    def fold_negations(self, kept: list) -> None:
        """``a + (-b)`` -> ``a - b`` and ``a - (-b)`` -> ``a + b`` where ``-b`` is
        read nowhere else (exact: subtracting is adding the negation), one pass less
        (the gradient of ``exp(-x)`` makes ``dx = -dt`` then ``dx + ...``)."""
        uses: dict = {}
        for ref in kept + [r for _, _, operands in self.instructions for r in operands]:
            for part in _parts(ref):
                uses[part] = uses.get(part, 0) + 1
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
            ref = _base(outputs[output])
            if ref[0] == "value" and ref[1] not in into:
                into[ref[1]] = f"out{number}"
        last_use = {}
        for position, (_, _, operands) in enumerate(self.instructions):
            for ref in operands:
                for part in _parts(ref):
                    if part[0] == "value":
                        last_use[part[1]] = position
        for ref in [*sums.values(), *self.colsums.values()]:
            ref = _base(ref)
            if ref[0] == "value":
                last_use[ref[1]] = len(self.instructions)  # read after every chunk
        numbers = self.number_values(into, sums, outputs)
        loop, buffers = self.chunk_body(into, last_use, numbers)
        for target, ref in sums.items():
            total = f"float(np.add.reduce({self.whole(ref)}, axis=None))"
            loop.append(f"            partial_{target}[number] = {total}")
        for target, ref in self.colsums.items():
            total = f"np.add.reduce({self.whole(ref)}, axis=0)"
            loop.append(f"            partial_{target}[number] = {total}")
        # the pass names its inputs a0, a1, ...: a user's name (``number``, ``sum``)
        # would collide with the pass's own locals and the builtins it calls
        names = [f"a{number}" for number in range(len(self.inputs))]
        arguments = ", ".join(names)
        lines = [
            f"def {name}({arguments}):",
            f'    """{", ".join(self.inputs)} ({arguments}) -> '
            f"{', '.join(self.outputs)}, in one pass of "
            f'{"blocks of rows" if self.rows else "chunks"}."""',
            *self.layout_lines(arguments),
        ]
        spelled = [p for ref in self.read_refs(sums, outputs) for p in _parts(ref)]
        if ("one",) in spelled:
            lines.append("    one = np.ones((), dtype)")
        # (0-d inputs, as the layout checks, and columns are read whole by each chunk)
        sliced = [
            n for n, kind in enumerate(self.input_kinds) if kind not in (COLUMN, SCALAR)
        ]
        for number in sliced:
            flat = "np.reshape({0}, (size, -1))" if self.rows else "np.ravel({0})"
            lines.append(
                f"    flat{number} = {flat.format(names[number])} "
                f"if np.ndim({names[number]}) else None"
            )
        for number in set(range(len(names))) - set(sliced):  # read whole
            lines.append(f"    in{number} = {names[number]}")
        lines += self.risk_lines(outputs, sums) + self.type_lines()
        lines += [f"    v{number} = {text}" for number, text in numbers.items()]
        outs = sorted(set(into.values()))
        kind_of_out = {out: self.kinds[number] for number, out in into.items()}
        lines += [
            f"    {out} = np.empty({self.extent(kind_of_out[out], 'size')}, dtype)"
            for out in outs
        ]
        lines.append("    chunks = -(-size // chunk)")
        lines += [  # one partial sum per chunk, added in chunk order below
            f"    partial_{target} = [0.0] * chunks"
            for target in [*sums, *self.colsums]
        ]
        lines += ["", "    def part(claim):  # the chunks this thread claims"]
        lines += [
            f"        buffer{i} = np.empty({self.extent(kind, 'chunk')}, dtype)"
            for i, kind in enumerate(buffers)
        ]
        # each chunk's views are made once, not at every use: with two threads, the
        # Python between two ufunc calls is when the other thread waits for the GIL
        views = [
            f"piece{i} = buffer{i}" + ("" if kind == COLUMN else "[:count]")
            for i, kind in enumerate(buffers)
        ]
        views += [f"{out}_piece = {out}[start:stop]" for out in outs]
        lines += [
            "        for number in iter(claim, None):",
            "            start = number * chunk",
            "            stop = min(start + chunk, size)",
            "            count = stop - start",
        ]
        for number in sliced:
            lines.append(
                f"            in{number} = flat{number}[start:stop] "
                f"if flat{number} is not None else {names[number]}"
            )
        lines += [f"            {view}" for view in views]
        lines += loop
        lines += ["", "    run_chunks(part, chunks)"]
        lines += [f"    total_{target} = sum(partial_{target})" for target in sums]
        lines += [
            f"    total_{target} = np.add.reduce(np.array(partial_{target}), axis=0)"
            for target in self.colsums
        ]
        results = [self.result(outputs[o], into, o) for o in self.outputs]
        returned = results[0] if len(results) == 1 else f"({', '.join(results)})"
        return "\n".join(lines + [f"    return {returned}", ""])

    def layout_lines(self, arguments: str) -> list:
        """The pass's first lines: the arguments' shapes and dtype checked (else the
        statements run) and the units its chunks count (elements, or rows)."""
        kinds = "".join("srcf"[kind] for kind in self.input_kinds)
        if not self.rows:
            test = f', "{kinds}"' if "s" in kinds else ""
            return [
                f"    found = layout(({arguments},){test})",
                "    if found is None:",
                "        return None",
                "    shape, dtype = found",
                "    size = int(np.prod(shape))",
                "    chunk = CHUNK_BYTES // dtype.itemsize",
            ]
        lines = [
            f'    found = rows_layout(({arguments},), "{kinds}")',
            "    if found is None:",
            "        return None",
            "    shape, dtype = found",
            "    width = shape[-1]",
            "    rows_shape = shape[:-1] + (1,)",
            "    size = int(np.prod(rows_shape))  # a chunk is a block of rows",
            "    chunk = max(1, CHUNK_BYTES // (dtype.itemsize * width))",
        ]
        if any(op == "rowmean" for _, op, _ in self.instructions):
            lines += [
                "    if dtype.itemsize < 4:  # np.mean adds float16 in float32",
                "        return None",
                "    width_items = np.intp(width)  # divided as np.mean",
            ]
        return lines

    def risk_lines(self, outputs: dict, sums: dict) -> list:
        """The checks that return None (the statements run) where the inputs a value
        is computed from are numbers at run time (``scalar_risks``, ``full_risks``);
        a check implied by one of fewer inputs is left out."""
        risks = [
            (reads, "a value of numbers only: not an array")
            for reads in self.scalar_risks(outputs, sums)
        ] + [
            (reads, "full rows from numbers and rows: not full")
            for reads in self.full_risks(outputs, sums)
        ]
        lines = []
        for position, (reads, why) in enumerate(risks):
            if any(r <= reads for r, _ in risks[:position]) or any(
                r < reads for r, _ in risks[position:]
            ):
                continue  # implied by the test of fewer inputs
            test = " and ".join(  # (a 0-d input is always one: no test)
                f"flat{i} is None"
                for i in sorted(reads)
                if self.input_kinds[i] != SCALAR
            )
            test = test or "True"
            lines += [f"    if {test}:  # {why}", "        return None"]
        return lines

    def type_lines(self) -> list:
        """The checks that return None (the statements run) where an operation would
        not have the arrays' dtype in NumPy because the inputs that could make an
        operand an array of it are Python numbers at run time (``type_risks``)."""
        lines = []
        for reads in self.type_risks():
            test = " and ".join(f"type(a{i}) in (float, int)" for i in sorted(reads))
            lines += [
                f"    if {test or 'True'}:  # a value NumPy types otherwise",
                "        return None",
            ]
        return lines

    def type_risks(self) -> list[set]:
        """Per operation whose NumPy result has the arrays' dtype only if one of its
        operands (a value ``where`` chooses) does, the inputs any of which, an
        array, makes one so; the pass computes every value in the arrays' dtype.
        Those are ``where`` (``np.where(y, s, 0.0)`` of a Python number ``s`` is
        float64), an operation on a comparison (``mask * 1.5`` is float64) and a
        ufunc call (``tanh(s)`` is a strong float64); Python's operators on
        numbers alone give a number, weak as the pass's value."""
        arrays: dict = {}  # value -> the inputs that make it an array of dtype

        def of(ref):  # None: always one
            if ref[0] == "input":
                return {ref[1]}
            if ref[0] == "value":
                return arrays[ref[1]]
            if ref[0] == "expand":
                return of(ref[2])
            return None if ref[0] == "one" else set()

        risks = []
        masks = {number for number, op, _ in self.instructions if op in COMPARISONS}
        for number, op, operands in self.instructions:
            if number in masks:
                arrays[number] = set()  # a boolean
                continue
            read = operands[1:] if op == "where" else operands
            found = [of(ref) for ref in read]
            arrays[number] = None if None in found else set().union(*found)
            typed = op in _REDUCERS or (  # (a row reduction reads a full array)
                number in self.operators
                and not any(r[0] == "value" and r[1] in masks for r in operands)
            )
            if not typed and arrays[number] is not None:
                if arrays[number] not in risks:
                    risks.append(arrays[number])
        return risks

    def read_refs(self, sums: dict, outputs: dict) -> list:
        """The refs the pass reads: the instructions' operands, sums and outputs."""
        operands = [r for _, _, refs in self.instructions for r in refs]
        return operands + list(sums.values()) + list(outputs.values())

    def extent(self, kind: int, count: str) -> str:
        """The shape, spelled, of ``count`` units (elements, or rows) of a value of
        ``kind``."""
        if not self.rows:
            return count
        if kind == COLUMN:
            return "width"  # the same for every block
        return f"({count}, width)" if kind == FULL else f"({count}, 1)"

    def cuda(self, name: str) -> CudaRegion:
        """The region as CUDA kernels (raises ``Unsupported`` where C would type a
        value otherwise than NumPy)."""
        if self.rows:
            raise Unsupported("a region over rows")
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
        once per element. A broadcast value reads its ``like`` too (an array). A set
        with an input of the last axis's shape is none: that input is an array."""
        reads: dict = {}

        def read(ref) -> set:
            found = set()
            for part in _parts(ref):
                if part[0] == "input":
                    found.add(part[1])
                elif part[0] == "value":
                    found |= reads[part[1]]
            return found

        for number, _, operands in self.instructions:
            reads[number] = set().union(*map(read, operands))
        risks = []
        computed = [ref for ref in outputs.values() if ref[0] in ("value", "expand")]
        for ref in [*computed, *sums.values(), *self.colsums.values()]:
            if ref[0] not in ("input", "value", "expand"):
                continue
            found = read(ref)
            if found not in risks and all(self.input_kinds[i] != COLUMN for i in found):
                risks.append(found)
        return risks

    def full_risks(self, outputs: dict, sums: dict) -> list[set]:
        """In a pass over rows, for each value it computes as full rows (or reduces),
        the inputs taken for full rows that make it so. An input whose shape was not
        known (a Python number) is taken for one: if all of a value's are numbers at
        run time, the statements make a row's value or a 0-d one (``peak * s``),
        which the pass would compute as full rows. (Row and column inputs are
        arrays of their shapes, ``rows_layout`` checks.)"""
        if not self.rows:
            return []
        sources: dict = {}

        def of(ref) -> set:
            if self.kind(ref) != FULL:
                return set()
            if ref[0] == "input":
                return {ref[1]} if self.input_kinds[ref[1]] == FULL else set()
            if ref[0] == "expand":  # broadcast to the shape of its ``like``
                return of(ref[3]) if ref[1] == FULL else set()
            return sources.get(ref[1], set()) if ref[0] == "value" else set()

        certain: dict = {}  # value -> its kind were those inputs numbers

        def sure(ref) -> int:
            if ref[0] == "input":
                return SCALAR if self.input_kinds[ref[1]] == FULL else self.kind(ref)
            if ref[0] == "expand":
                return sure(ref[3])
            return certain.get(ref[1], SCALAR) if ref[0] == "value" else SCALAR

        risks, found = [], []
        for number, op, operands in self.instructions:
            sources[number] = set().union(*map(of, operands))
            certain[number] = ROW if op in _REDUCERS else SCALAR
            for ref in operands:
                certain[number] |= sure(ref) if op not in _REDUCERS else SCALAR
            full = self.kinds[number] == FULL or op in _REDUCERS  # (of full rows)
            if full and (op in _REDUCERS or certain[number] != FULL):
                found.append(sources[number])
        every = [*outputs.values(), *sums.values(), *self.colsums.values()]
        for reads in found + [of(r) for r in every if r[0] == "expand"]:
            if reads and reads not in risks:
                risks.append(reads)
        return risks

    def chunk_body(
        self, into: dict, last_use: dict, numbers: dict
    ) -> tuple[list, list]:
        """The chunk loop's lines, and the kind of each chunk buffer it uses;
        ``numbers``: the values computed before the loop (``number_values``)."""
        lines, buffers = [], []
        free: dict = {}  # kind -> the buffers free for a value of that kind
        self.places: dict = {n: f"v{n}" for n in numbers}  # how the code reads each
        booleans: set = set()  # masks: comparisons, and where between two of them
        for position, (number, op, operands) in enumerate(self.instructions):
            if op in COMPARISONS or (
                op == "where"
                and all(r[0] == "value" and r[1] in booleans for r in operands[1:])
            ):
                booleans.add(number)
            if number in numbers:
                continue
            # without out= (np.where, comparisons) a broadcast value is made whole:
            # the result must have the value's kind, as with out=
            spell = self.spell if op not in COMPARISONS | {"where"} else self.whole
            spelled = ", ".join(spell(ref) for ref in operands)
            for ref in dict.fromkeys(p for r in operands for p in _parts(r)):
                if ref[0] == "value" and last_use.get(ref[1]) == position:
                    place = self.places[ref[1]]  # dead after this: its buffer may
                    if place.startswith("piece"):  # hold this value
                        free.setdefault(self.buffer_kind(ref[1]), []).append(place)
            kind = self.buffer_kind(number)
            if number in into:
                destination = f"{into[number]}_piece"
            elif number in booleans:
                destination = None  # a mask: no buffer of the pass's dtype
            else:
                if not free.get(kind):
                    free.setdefault(kind, []).append(f"piece{len(buffers)}")
                    buffers.append(kind)
                destination = free[kind].pop()
            if op in _REDUCERS:  # (of a broadcast value: made whole, as for sums)
                whole = self.whole(operands[0])
                lines.append(
                    f"            {_REDUCERS[op]}.reduce({whole}, axis=1, "
                    f"keepdims=True, out={destination})"
                )
                if op == "rowmean":
                    lines.append(
                        f"            np.true_divide({destination}, width_items, "
                        f"out={destination}, casting='unsafe')"
                    )
                self.places[number] = destination
                continue
            call = f"np.{ufunc(op).__name__}({spelled})"
            if destination is None:
                lines.append(f"            v{number} = {call}")
                self.places[number] = f"v{number}"
            elif op == "where":  # (np.where has no out=; masked gradients' fast)
                lines.append(f"            where_into({spelled}, out={destination})")
                self.places[number] = destination
            else:
                lines.append(f"            {call[:-1]}, out={destination})")
                self.places[number] = destination
        return lines, buffers

    def number_values(self, into: dict, sums: dict, outputs: dict) -> dict:
        """Value number -> its Python expression, for the operations written with
        Python's operators (``n * n`` in ``x * (n * n)``) on numbers alone: inputs
        of no axes, constants, ``one`` and other such values. They are computed once
        before the chunks, with Python's operators, as the statements compute them:
        as ufunc calls into a chunk buffer they took the arrays' dtype (Python ints
        past 2**63 wrapped round or raised, float32 products overflowed to inf: the
        value 0.0 for 7.3e25, found by a probe of fused code). Values the pass
        writes out or sums stay in it (it makes them whole arrays)."""
        kept = {
            part[1]
            for ref in [*sums.values(), *self.colsums.values(), *outputs.values()]
            for part in _parts(ref)
            if part[0] == "value"
        }
        symbols = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
        found: dict = {}
        for number, op, operands in self.instructions:
            if (
                number not in self.operators
                or self.kinds[number] != SCALAR
                or number in into
                or number in kept
                or (op not in symbols and op != "neg")
            ):
                continue
            parts = [self.number_operand(ref, found) for ref in operands]
            if None in parts:
                continue
            found[number] = (
                f"(-{parts[0]})"
                if op == "neg"
                else f"({parts[0]} {symbols[op]} {parts[1]})"
            )
        return found

    def number_operand(self, ref, found: dict) -> str | None:
        """``ref`` spelled for ``number_values``, or None where it is no number."""
        if ref[0] == "const":
            return repr(ref[1])
        if ref[0] == "one":
            return "one"
        if ref[0] == "input" and self.input_kinds[ref[1]] == SCALAR:
            return f"in{ref[1]}"
        if ref[0] == "value" and ref[1] in found:
            return f"v{ref[1]}"
        return None

    def buffer_kind(self, number: int) -> int:
        """The kind of buffer a value is computed into: a 0-d value in a region over
        rows is broadcast into a row's (a flat region's buffers are all alike)."""
        if not self.rows:
            return FULL
        kind = self.kinds[number]
        return kind if kind in (FULL, COLUMN) else ROW

    def shape_of(self, kind: int) -> str:
        """The shape, spelled, of a whole value of ``kind``."""
        if not self.rows or kind == FULL:
            return "shape"
        return "(width,)" if kind == COLUMN else "rows_shape"

    def spell(self, ref) -> str:
        if ref[0] == "const":
            return repr(ref[1])
        if ref[0] == "input":
            return f"in{ref[1]}"
        if ref[0] == "one":
            return "one"
        if ref[0] == "expand":
            return self.spell(ref[2])  # broadcast by the operation reading it
        return self.places[ref[1]]

    def whole(self, ref) -> str:
        """``ref`` spelled as the chunk's values of its kind: a broadcast value made
        whole (a sum of it counts every element)."""
        if ref[0] != "expand":
            return self.spell(ref)
        return f"np.broadcast_to({self.spell(ref[2])}, {self.extent(ref[1], 'count')})"

    def result(self, ref, into: dict, name: str) -> str:
        if ref[0] == "expand":  # as unreduce's: a read-only broadcast view
            whole = self.result(ref[2], into, name)
            return f"np.broadcast_to({whole}, {self.shape_of(ref[1])})"
        if ref[0] == "value":
            shape = self.shape_of(self.buffer_kind(ref[1]))
            return f"{into[ref[1]]}.reshape({shape})"
        if ref[0] == "input" and name in self.computed:
            # ``dw = one * x`` was a new array: handing back x itself would let the
            # caller's in-place update of the gradient change x
            return f"np.array(a{ref[1]}, dtype)"
        if ref[0] == "input":
            return f"a{ref[1]}"
        if ref[0] == "sum":
            return f"dtype.type(total_{ref[1]})"
        if ref[0] == "colsum":
            return f"total_{ref[1]}"
        return "one"


def _parts(ref):
    """``ref`` and, for a broadcast value, the refs it is made of."""
    yield ref
    if ref[0] == "expand":
        yield from _parts(ref[2])
        yield from _parts(ref[3])


def _base(ref):
    """The ref a broadcast value broadcasts (``ref`` itself otherwise)."""
    return _base(ref[2]) if ref[0] == "expand" else ref
