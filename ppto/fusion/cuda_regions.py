"""Elementwise regions on CUDA: a whole run of elementwise statements and full sums
(``ppto.transform.regions``) as one generated kernel.

On the CPU a region walks the data in cache-sized chunks. On a GPU every element is
its own thread, so the region becomes a device function that computes, from one
element of each input, every value the region writes, held in registers: one
``cupy.ElementwiseKernel`` writes all the region's array outputs in one launch, and
each sum is one ``cupy.ReductionKernel`` mapping the same computation. A gradient
such as that of ``sum(tanh(x * y + z) * exp(-x))`` runs as two launches instead of a
dozen, with no intermediate array.

The region runs where every array has one floating dtype (float32 or float64) and one
shape (0-d arrays and Python numbers may join); otherwise its original statements run
(fused kernel by kernel).
"""

from __future__ import annotations

import numpy as np

from ppto.fusion import cuda
from ppto.fusion.cuda import (
    PREAMBLE,
    Unsupported,
    combined_kind,
    constant,
    kernel_name,
    spell,
)
from ppto.fusion.kernels import shared_layout


class CudaRegion:
    """One region as CUDA C (``source``, shown with the fused code) and the CuPy
    kernels that run it. ``instructions``: ``(number, op, operand refs)`` computing
    value ``number``; refs are ``("input", i)``, ``("value", k)``, ``("const", v)``,
    ``("one",)`` (``ones_like`` of a sum) and, for outputs, ``("sum", name)``."""

    def __init__(self, name: str, inputs: list, instructions: list, outputs: list,
                 sums: dict, risks: list, computed: set) -> None:  # fmt: skip
        self.name = name
        self.fallback_name = f"{name}_unfused"
        self.fallback = None  # set once the program is compiled
        self.inputs = inputs  # the names the region reads, for the source's comment
        self.instructions = instructions
        self.outputs = outputs  # [(name, ref)] in the order the call returns them
        self.sums = list(sums.items())  # [(name, ref)]
        self.risks = risks  # per computed output and sum, the inputs it reads
        self.computed = computed  # outputs that must be new arrays
        self.arrays = list(dict.fromkeys(r for _, r in outputs if r[0] == "value"))
        self.function = kernel_name(name)
        self.source = self.render()
        self.kernels = None  # (elementwise kernel or None, reduction kernels)
        self.failed = False  # set if CuPy could not compile the region

    # --- the CUDA C -----------------------------------------------------------------

    def render(self) -> str:
        """The region's device functions (raises ``Unsupported`` for values C would
        type otherwise than NumPy)."""
        kinds = self.kinds()
        for ref in self.arrays:
            if kinds[ref[1]] != "f":
                raise Unsupported("a boolean array written by a region")
        lines = {
            number: f"  const {'bool' if kinds[number] == 'b' else 'T'} v{number} = "
            f"{spell(op, [self.spelled(ref) for ref in operands])};"
            for number, op, operands in self.instructions
        }

        def body(refs) -> list:  # the instructions these values need, in order
            needed = self.needed(refs)
            return [line for number, line in lines.items() if number in needed]

        inputs = ", ".join(f"const T a{i}" for i in range(len(self.inputs)))
        results = ", ".join(f"T& o{k}" for k in range(len(self.arrays)))
        text = [
            f"// {self.name}: {', '.join(self.inputs)} (a0, a1, ...) -> "
            f"{', '.join(name for name, _ in self.outputs)}"
        ]
        if self.arrays:  # (a region may hand on sums only)
            text += [
                "template <typename T> __host__ __device__ void "
                f"{self.function}({inputs}, {results}) {{",
                *body(self.arrays),
                *(f"  o{k} = {self.spelled(r)};" for k, r in enumerate(self.arrays)),
                "}",
            ]
        for number, (name, ref) in enumerate(self.sums):
            text += [
                f"// the value summed into {name}",
                f"template <typename T> __host__ __device__ T "
                f"{self.function}_sum{number}({inputs}) {{",
                *body([ref]),
                f"  return {self.spelled(ref)};",
                "}",
            ]
        if any("ppto_m" in line for line in lines.values()):  # maximum, minimum
            text.insert(1, PREAMBLE)
        return "\n".join(text) + "\n"

    def needed(self, refs) -> set:
        """The numbers of the values ``refs`` are computed from."""
        operands = {number: ops for number, _, ops in self.instructions}
        found, stack = set(), [r[1] for r in refs if r[0] == "value"]
        while stack:
            number = stack.pop()
            if number not in found:
                found.add(number)
                stack += [r[1] for r in operands[number] if r[0] == "value"]
        return found

    def kinds(self) -> dict:
        """Value number -> ``'f'`` (``T``) or ``'b'`` (bool); inputs are ``T``
        (Python numbers among them take the arrays' type), constants are weak."""
        kinds: dict = {}
        for number, op, operands in self.instructions:
            found = [
                kinds[r[1]] if r[0] == "value" else "w" if r[0] == "const" else "f"
                for r in operands
            ]
            kinds[number] = combined_kind(op, found)
        return kinds

    def spelled(self, ref) -> str:
        if ref[0] == "input":
            return f"a{ref[1]}"
        if ref[0] == "value":
            return f"v{ref[1]}"
        if ref[0] == "const":
            return constant(ref[1])
        if ref[0] == "one":
            return "((T)1)"
        raise Unsupported(f"a region reading {ref}")

    # --- running it -----------------------------------------------------------------

    def __call__(self, *arguments):
        dtype = layout(arguments)
        if (
            self.failed
            or dtype is None
            or any(
                all(np.ndim(arguments[i]) == 0 for i in reads) for reads in self.risks
            )
        ):  # mixed shapes or dtypes, or a value of numbers only: the statements
            return self.fallback(*arguments)
        launched = cuda.compiled_call(self, self.launch, arguments)
        if launched is None:  # CuPy could not compile it (warned): the statements
            return self.fallback(*arguments)
        arrays, totals = launched
        results = []
        for name, ref in self.outputs:
            if ref[0] == "value":
                results.append(arrays[self.arrays.index(ref)])
            elif ref[0] == "sum":
                results.append(totals[[n for n, _ in self.sums].index(ref[1])])
            elif ref[0] == "input" and name in self.computed:
                results.append(cuda.cupy_module().array(arguments[ref[1]], dtype=dtype))
            elif ref[0] == "input":
                results.append(arguments[ref[1]])
            else:  # ones_like of a sum
                results.append(cuda.cupy_module().ones((), dtype))
        return results[0] if len(results) == 1 else tuple(results)

    def launch(self, arguments) -> tuple[list, list]:
        """The region's array outputs and sums for ``arguments`` (CuPy kernels,
        compiled on first use)."""
        if self.kernels is None:
            cupy = cuda.cupy_module()
            in_params = ", ".join(f"T a{i}" for i in range(len(self.inputs)))
            names = ", ".join(f"a{i}" for i in range(len(self.inputs)))
            elementwise = None
            if self.arrays:
                results = ", ".join(f"o{k}" for k in range(len(self.arrays)))
                elementwise = cupy.ElementwiseKernel(
                    in_params,
                    ", ".join(f"T o{k}" for k in range(len(self.arrays))),
                    f"{self.function}<T>({names}, {results})",
                    f"{self.function}_kernel",  # not the device function's name
                    preamble=self.source,
                    return_tuple=True,
                )
            reductions = [
                cupy.ReductionKernel(
                    in_params,
                    "T y",
                    f"{self.function}_sum{number}<T>({names})",
                    "a + b",
                    "y = a",
                    "0",
                    f"{self.function}_sum{number}_kernel",
                    preamble=self.source,
                )
                for number in range(len(self.sums))
            ]
            self.kernels = (elementwise, reductions)
        elementwise, reductions = self.kernels
        arrays = list(elementwise(*arguments)) if elementwise is not None else []
        return arrays, [reduction(*arguments) for reduction in reductions]


def layout(arguments):
    """The one floating dtype (float32 or float64) of the array arguments when they
    also share one shape (0-d arrays and Python numbers aside), else None."""
    found = shared_layout(arguments, _typed_array)
    return None if found is None else np.dtype(found[1])


def _typed_array(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and hasattr(value, "ndim") and dtype.itemsize in (4, 8)
