"""The code of one elementwise region (``ppto.transform.regions``): its steps as
instructions, each value computed once, written as the CPU's chunked NumPy pass or
handed to CUDA as a ``CudaRegion``."""

from __future__ import annotations

from ppto.fusion.cuda_regions import CudaRegion
from ppto.fusion.kernels import COMPARISONS, Node, ufunc


class RegionWriter:
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
