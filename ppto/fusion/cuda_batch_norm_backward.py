"""Training-mode batch norm's backward pass (``ppto.fusion.batch_norm_backward``) as
CuPy kernels: four per-channel sums, then the input's gradient in one pass.

The rule's pattern broadcasts per-channel values back to the image (``unreduce``),
which no kernel is derived from (``ppto.fusion.cuda_staged`` stages reductions
only), so its kernels are written from the closed form the CPU kernel computes
(see that module's docstring): the sums of ``g``, ``g * scaled``, ``g * centred``
and ``centred`` over the pixels, each one ``cupy.ReductionKernel`` (``g`` masked by
the ReLU's condition in its map step where there is one), then one
``cupy.ElementwiseKernel`` writing

    dx = g * (gamma / deviation) + centred * slope + shift  (+ earlier)

where ``slope`` and ``shift`` are the per-channel values of the sums, computed
again by each thread (a few divisions: the pass is bound by memory, not
arithmetic) rather than by launches of their own. Six launches (the four sums,
``dx``, and the scale's gradient per channel) and no image-sized temporary; fused
without this rule, the gradient of an NHWC batch norm and ReLU on CUDA was 18
operator calls after fusion, 3 with it (``show_grad(..., fused=True,
device="cuda")``'s count). Other types and shapes run the pattern's operators on
CuPy.
"""

from __future__ import annotations

from ppto.fusion import cuda
from ppto.fusion.batch_norm_backward import Layout, _fits
from ppto.fusion.cuda import CudaElementwise, CudaReduction
from ppto.fusion.kernels import Node


def _op(name: str, *children) -> Node:
    return Node(name, children)


class CudaBatchNormBackward:
    """The kernels of one batch-norm backward rule, called with its arguments;
    returns ``(dbeta, dgamma, dx)`` as the rule does."""

    def __init__(self, name: str, layout: Layout, parameters, values) -> None:
        self.name = name
        self.layout = layout
        self.parameters = tuple(parameters)
        self.values = values  # the pattern's operators, for other types and shapes
        masked, added = "condition" in parameters, "earlier" in parameters
        tied = "tie" in parameters
        # the dx kernel's operands, in this order (the sums' kernels read a prefix)
        self.operands = ["g", *["condition"] * masked, *["tie"] * tied]
        self.operands += ["centred", "scaled"]
        self.operands += ["gamma", "deviation", "count", "g_sum", "g_scaled_sum"]
        self.operands += ["centred_sum", *["earlier"] * added]
        leaf = {name: Node(leaf=n) for n, name in enumerate(self.operands)}
        g = leaf["g"]
        if tied:  # (np.maximum's: a tie's half the gradient)
            half = _op("mul", Node(value=0.5), g)
            otherwise = _op("where", leaf["tie"], half, Node(value=0.0))
            g = _op("where", leaf["condition"], g, otherwise)
        elif masked:  # (where(condition, g, 0.0), as ppto.relu's gradient)
            g = _op("where", leaf["condition"], g, Node(value=0.0))
        axes, keep = layout.axes, layout.keepdims
        sums = {  # the per-channel sums, each of the images its map step reads
            "g_sum": g,
            "g_scaled_sum": _op("mul", g, leaf["scaled"]),
            "g_centred_sum": _op("mul", g, leaf["centred"]),
            "centred_sum": leaf["centred"],
        }
        self.sums = {
            sum_name: _sum(f"{name}_{sum_name}", tree, self.operands, axes, keep)
            for sum_name, tree in sums.items()
        }
        deviation, count = leaf["deviation"], leaf["count"]
        scale = _op("div", leaf["gamma"], deviation)
        slope = _op("neg", leaf["g_scaled_sum"])
        for divisor in (deviation, _op("mul", Node(value=2.0), deviation), count):
            slope = _op("div", slope, divisor)
        slope = _op("mul", slope, Node(value=2.0))
        shift = _op(
            "add",
            _op("mul", scale, leaf["g_sum"]),
            _op("mul", slope, leaf["centred_sum"]),
        )
        shift = _op("div", _op("neg", shift), count)
        dx = _op("add", _op("mul", g, scale), _op("mul", leaf["centred"], slope))
        dx = _op("add", dx, shift)
        if added:
            dx = _op("add", dx, leaf["earlier"])
        self.gradient = CudaElementwise(f"{name}_dx", dx, len(self.operands))
        # the scale's gradient, per channel: sum(g * centred) / deviation
        ratio = _op("div", Node(leaf=0), Node(leaf=1))
        self.scale_gradient = CudaElementwise(f"{name}_dgamma", ratio, 2)

    def __call__(self, *arguments):
        given = dict(zip(self.parameters, arguments))
        checked = [given.get(p) for p in ("g", "scaled", "deviation", "centred")]
        checked += [given.get(p) for p in ("gamma", "count", "like", "earlier")]
        checked += [given.get("shape"), given.get("condition")]
        array = cuda.cupy_module().ndarray
        if not _fits(self.layout, *checked, given.get("tie"), array=array):
            values = self.values(**given)  # (ppto operators: Tensors on the device)
            return tuple(getattr(value, "data", value) for value in values)
        operands = [given.get(name) for name in self.operands]
        totals = {}
        for sum_name, (kernel, reads) in self.sums.items():
            totals[sum_name] = kernel(*[operands[n] for n in reads])
        for number, name in enumerate(self.operands):
            operands[number] = totals.get(name, operands[number])
        dgamma = self.scale_gradient(totals["g_centred_sum"], given["deviation"])
        return totals["g_sum"], dgamma, self.gradient(*operands)

    def parts(self) -> list[CudaElementwise]:
        """The elementwise CUDA C of each sum's map step, of the input's gradient and
        of the scale's."""
        sums = [kernel.elementwise for kernel, _ in self.sums.values()]
        return [*sums, self.gradient, self.scale_gradient]

    def listing(self) -> str:
        """The kernels, to read."""
        where = f"axes {self.layout.axes}"
        lines = [f"// {self.name}: 4 sums over {where}, then dx and dgamma"]
        for sum_name, (kernel, reads) in self.sums.items():
            names = ", ".join(self.operands[n] for n in reads)
            lines.append(f"// {sum_name}, of {names}:")
            lines.append(kernel.listing().rstrip("\n"))
        names = ", ".join(self.operands)
        lines.append(f"// dx, of {names}:")
        lines.append(self.gradient.listing().split("\n", 1)[1].rstrip("\n"))
        lines.append("// dgamma, of g_centred_sum, deviation:")
        lines.append(self.scale_gradient.listing().split("\n", 1)[1].rstrip("\n"))
        return "\n".join(lines) + "\n"


def _sum(name: str, tree: Node, operands: list, axes, keepdims: bool) -> tuple:
    """``(kernel, the operands it reads)``: the sum of ``tree`` along ``axes`` as a
    ``CudaReduction`` over the operands the tree reads, renumbered."""
    reads = sorted(set(tree.leaves()))
    renumbered = cuda.renumbered(tree, {old: new for new, old in enumerate(reads)})
    kernel = CudaReduction(name, renumbered, len(reads), False, axes, keepdims)
    return kernel, reads
