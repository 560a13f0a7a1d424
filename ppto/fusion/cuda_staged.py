"""Fused CuPy kernels for patterns that reduce along an axis: softmax, log-softmax,
logsumexp, layer norm, their backward shapes and cross-entropy from logits; or along
several (batch norm's statistics over an NHWC image's pixels, global pooling).

Such a pattern is cut at its reductions. Each distinct reduction is one *stage*, run
in the order the pattern needs them: a sum or mean is one ``cupy.ReductionKernel``
whose map step computes the elementwise expression it reduces (``exp(x - peak)`` is
never stored), a maximum of an operand is ``cupy.max``; every stage keeps the reduced
axis (length 1), so that later stages and the rest read it by broadcasting. What is
left over the reductions is one ``cupy.ElementwiseKernel``. Softmax so runs as three
launches and no temporary array, where its operators one by one are five launches
and three temporaries. A multi-output rule (batch norm's values in gradient code)
shares its stages and has one such kernel per value.

As with the other CUDA kernels (``ppto.fusion.cuda``), this is derived from the rule's
pattern, so a user's rule of this shape gets one too; operands of types C would
promote differently run the same stages one CuPy call per operator.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppto.fusion import cuda
from ppto.fusion.cuda import (
    CudaElementwise,
    CudaReduction,
    evaluate_with,
    renumbered,
    walk,
)
from ppto.fusion.kernels import Node, Unsupported
from ppto.fusion.registry import elementwise_tree
from ppto.symbolic import Operator

REDUCTIONS = {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max"}


@dataclass(frozen=True)
class Source:
    """What a leaf of a stage's or the result's tree reads: argument ``argument`` of
    the rule, or the result of stage ``stage`` (kept dims), with the reduced axis
    dropped where the pattern did not keep it."""

    argument: int | None = None
    stage: int | None = None
    squeezed: bool = False


class Stage:
    """One reduction: ``op`` (``sum``, ``mean`` or ``max``) along ``axis`` (None:
    every axis) of ``tree`` over ``sources``, kept dims."""

    def __init__(self, name: str, op: str, tree: Node, axis) -> None:
        self.op, self.axis = op, axis
        self.reads = sorted(set(tree.leaves()))  # sources, numbered as the pattern's
        self.tree = renumbered(tree, {old: new for new, old in enumerate(self.reads)})
        self.kernel = None
        if op != "max":
            self.kernel = CudaReduction(
                name, self.tree, len(self.reads), op == "mean", axis, keepdims=True
            )
        elif self.tree.leaf is None:  # (a tree's maximum needs a kernel of its own)
            raise Unsupported("a maximum of an expression")

    def __call__(self, values: list):
        operands = [values[number] for number in self.reads]
        if self.kernel is not None:
            return self.kernel(*operands)
        return cuda.cupy_module().max(operands[0], axis=self.axis, keepdims=True)

    def evaluate(self, xp, values: list):
        """The stage by one ``xp`` call per operator (the unfused route)."""
        operands = [values[number] for number in self.reads]
        reduced = evaluate_with(xp, self.tree, operands)
        return getattr(xp, self.op)(reduced, axis=self.axis, keepdims=True)

    def listing(self) -> str:
        if self.kernel is None:
            return f"// cupy.max(a0, axis={self.axis}, keepdims=True)\n"
        return self.kernel.listing()


class CudaStaged:
    """A rule's pattern as stages (see the module docstring); called with the rule's
    arguments."""

    def __init__(self, name: str, template, parameters) -> None:
        self.name = name
        self.sources = [Source(argument=n) for n in range(len(parameters))]
        self.stages: list[Stage] = []
        self.keys: dict = {}  # (op, tree text, axis) -> stage number
        self.parameters = list(parameters)
        # a multi-output rule's values (a tuple of templates) share the stages; each
        # is one kernel of the arguments and stages, computing what it needs again
        # rather than reading another value (elementwise work is cheap, memory not)
        self.several = isinstance(template, tuple)
        templates = template if self.several else (template,)
        self.values = []  # (the sources each value's kernel reads, the kernel)
        for number, value in enumerate(templates):
            tree = self.lower(_expanded(value))
            reads = sorted(set(tree.leaves()))
            renumber = {old: new for new, old in enumerate(reads)}
            label = f"{name}_value{number + 1}" if self.several else name
            kernel = CudaElementwise(label, renumbered(tree, renumber), len(reads))
            self.values.append((reads, kernel))
        self.reads, self.result = self.values[-1]  # (the last value's)
        self.fed = [  # stage -> the sources its result becomes
            [(n, s) for n, s in enumerate(self.sources) if s.stage == number]
            for number in range(len(self.stages))
        ]

    def lower(self, template) -> Node:
        """The elementwise tree of ``template`` over sources, each reduction in it
        made a stage (reductions inside reductions first)."""
        substitute = {}
        for node in _outermost_reductions(template):
            substitute[id(node)] = Node(leaf=self.stage_source(node))
        tree = elementwise_tree(template, self.parameters, substitute)
        if tree is None:
            raise Unsupported(f"an operator of {template!r}")
        return tree

    def stage_source(self, reduction: Operator) -> int:
        axis = reduction.params.get("axis")
        if axis is not None and not isinstance(axis, (int, tuple)):
            raise Unsupported(f"a reduction along axes {axis!r}")
        op = REDUCTIONS[reduction.op.name]
        tree = self.lower(reduction.inputs[0])
        key = (op, tree.numpy([f"s{n}" for n in range(len(self.sources))]), axis)
        if key not in self.keys:
            name = f"{self.name}_{len(self.stages) + 1}"
            self.stages.append(Stage(name, op, tree, axis))
            self.keys[key] = len(self.stages) - 1
        stage = self.keys[key]
        source = Source(stage=stage, squeezed=not reduction.params.get("keepdims"))
        if source not in self.sources:
            self.sources.append(source)
        return self.sources.index(source)

    def __call__(self, *arguments):
        return self.run(arguments, None)

    def evaluate(self, xp, *arguments):
        """The pattern by one ``xp`` call per operator, stage by stage."""
        return self.run(arguments, xp)

    def run(self, arguments, xp):
        values = list(arguments) + [None] * (len(self.sources) - len(arguments))
        results = []
        for stage, fed in zip(self.stages, self.fed):
            results.append(stage(values) if xp is None else stage.evaluate(xp, values))
            for number, source in fed:
                values[number] = self._view(results[-1], stage.axis, source)
        results = []
        for reads, kernel in self.values:
            operands = [values[number] for number in reads]
            if xp is None:
                results.append(kernel(*operands))
            else:
                results.append(evaluate_with(xp, kernel.tree, operands))
        return tuple(results) if self.several else results[0]

    @staticmethod
    def _view(result, axis, source: Source):
        if not source.squeezed:
            return result
        return result.reshape(()) if axis is None else result.squeeze(axis)

    def parts(self) -> list[CudaElementwise]:
        """The elementwise CUDA C of each sum's map step and of the result (of each
        value, for several)."""
        sums = [stage.kernel.elementwise for stage in self.stages if stage.kernel]
        return [*sums, *(kernel for _, kernel in self.values)]

    def listing(self) -> str:
        """Each stage's kernel and the result's, to read."""
        count = len(self.stages)
        reductions = f"{count} reduction{'s' if count > 1 else ''}"
        result = f"{len(self.values)} values" if self.several else "the result"
        lines = [f"// {self.name}: {reductions}, then {result}"]
        for number, stage in enumerate(self.stages):
            reads = ", ".join(self._describe(n) for n in stage.reads)
            lines.append(f"// stage {number + 1} of {reads}:")
            lines.append(stage.listing().rstrip("\n"))
        for number, (read, kernel) in enumerate(self.values):
            reads = ", ".join(self._describe(n) for n in read)
            which = f"value {number + 1}" if self.several else "the result"
            lines.append(f"// {which}, of {reads}:")
            lines.append(kernel.listing().split("\n", 1)[1].rstrip("\n"))
        return "\n".join(lines) + "\n"

    def _describe(self, number: int) -> str:
        source = self.sources[number]
        if source.argument is not None:
            return self.parameters[source.argument]
        dropped = " (axis dropped)" if source.squeezed else ""
        return f"stage {source.stage + 1}{dropped}"


def _outermost_reductions(template):
    """The reductions in ``template`` not inside another one."""
    if isinstance(template, Operator):
        if _is_reduction(template):
            yield template
            return
        for argument in template.inputs:
            yield from _outermost_reductions(argument)


def _expanded(template):
    """``template`` with softmax and log-softmax written out in the operators they
    are made of, as their fusion patterns write them (the cross-entropy pattern
    reads log-softmax)."""
    from ppto.fusion.patterns import softmax_patterns

    if not isinstance(template, Operator):
        return template
    arguments = [_expanded(argument) for argument in template.inputs]
    name = template.op.name
    if name in ("softmax", "log_softmax"):
        axis = template.params.get("axis", -1)
        return softmax_patterns(axis)[name](arguments[0])
    return Operator(template.op, tuple(arguments), template.params)


def staged(rule) -> CudaStaged | None:
    """The staged kernel of a rule whose pattern reduces along an axis (all of a
    multi-output rule's values), or None."""
    if not any(_is_reduction(node) for node in walk(rule.template)):
        return None
    try:
        template = rule.outputs or rule.template
        return CudaStaged(rule.kernel_name, template, rule.parameters)
    except Unsupported:
        return None


def _is_reduction(node) -> bool:
    return isinstance(node, Operator) and node.op.name in REDUCTIONS
