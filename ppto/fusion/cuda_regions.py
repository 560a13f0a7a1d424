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
from ppto.fusion.kernels import Fallback, shared_layout


class CudaRegion(Fallback):
    """One region as CUDA C (``source``, shown with the fused code) and the CuPy
    kernels that run it. ``instructions``: ``(number, op, operand refs)`` computing
    value ``number``; refs are ``("input", i)``, ``("value", k)``, ``("const", v)``,
    ``("one",)`` (``ones_like`` of a sum) and, for outputs, ``("sum", name)``."""

    def __init__(self, name: str, inputs: list, instructions: list, outputs: list,
                 sums: dict, risks: list, computed: set) -> None:  # fmt: skip
        self.name = name
        self.fallback_name = f"{name}_unfused"
        self.inputs = inputs  # the names the region reads, for the source's comment
        self.instructions = instructions
        self.outputs = outputs  # [(name, ref)] in the order the call returns them
        self.sums = list(sums.items())  # [(name, ref)]
        self.summed = list(sums)  # their names, in that order
        self.risks = risks  # per computed output and sum, the inputs it reads
        self.computed = computed  # outputs that must be new arrays
        self.arrays = list(dict.fromkeys(r for _, r in outputs if r[0] == "value"))
        self.function = kernel_name(name)
        self.sources: dict = {}  # operand kinds -> the CUDA C for them
        self.source = self.source_for(("f",) * len(inputs))  # to show: all floating
        self.kernels: dict = {}  # kinds -> (elementwise kernel or None, reductions)
        self.failed = False  # set if CuPy could not compile the region

    # --- the CUDA C -----------------------------------------------------------------

    def listing(self) -> str:
        """The CUDA C for floating operands, to read."""
        return self.source

    def source_for(self, operands: tuple) -> str:
        """The CUDA C for operands of ``operands`` kinds (``'f'``: a float array,
        ``'w'``: a Python number, both ``T`` in C; ``'b'``: a boolean array, a mask
        made before the region); raises ``Unsupported`` where C would type a value
        otherwise than NumPy."""
        if operands not in self.sources:
            self.sources[operands] = self.render(operands)
        return self.sources[operands]

    def render(self, operands: tuple) -> str:
        kinds = self.kinds(operands)
        for ref in self.arrays:
            if kinds[ref[1]] != "f":
                raise Unsupported("a boolean array written by a region")
        for _, ref in self.sums:  # NumPy counts booleans in int64
            kind = kinds.get(ref[1]) if ref[0] == "value" else None
            if kind == "b" or (ref[0] == "input" and operands[ref[1]] == "b"):
                raise Unsupported("a sum of booleans")
        lines = {
            number: f"  const {'bool' if kinds[number] == 'b' else 'T'} v{number} = "
            f"{spell(op, [self.spelled(ref) for ref in operands])};"
            for number, op, operands in self.instructions
        }

        def body(refs) -> list:  # the instructions these values need, in order
            needed = self.needed(refs)
            return [line for number, line in lines.items() if number in needed]

        inputs = cuda.parameters(operands, prefix="const ")
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

    def kinds(self, operands: tuple) -> dict:
        """Value number -> ``'f'`` (``T``) or ``'b'`` (bool), for inputs of
        ``operands`` kinds; constants are weak, as Python numbers are."""
        kinds: dict = {}
        for number, op, refs in self.instructions:
            found = [
                kinds[r[1]] if r[0] == "value"
                else "w" if r[0] == "const"
                else operands[r[1]] if r[0] == "input"
                else "f"
                for r in refs
            ]  # fmt: skip
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
        found = layout(arguments)
        if (
            self.failed
            or found is None
            or any(
                all(np.ndim(arguments[i]) == 0 for i in reads) for reads in self.risks
            )
        ):  # mixed shapes or dtypes, or a value of numbers only: the statements
            return self.fallback(*arguments)
        dtype, operands = found
        try:
            self.source_for(operands)
        except Unsupported:  # booleans C would type otherwise: the statements
            return self.fallback(*arguments)
        launched = cuda.compiled_call(self, self.launch, arguments, operands)
        if launched is None:  # CuPy could not compile it (warned): the statements
            return self.fallback(*arguments)
        arrays, totals = launched
        results = []
        for name, ref in self.outputs:
            if ref[0] == "value":
                results.append(arrays[self.arrays.index(ref)])
            elif ref[0] == "sum":
                results.append(totals[self.summed.index(ref[1])])
            elif ref[0] == "input" and name in self.computed:
                results.append(cuda.cupy_module().array(arguments[ref[1]], dtype=dtype))
            elif ref[0] == "input":
                results.append(arguments[ref[1]])
            else:  # ones_like of a sum
                results.append(cuda.cupy_module().ones((), dtype))
        return results[0] if len(results) == 1 else tuple(results)

    def launch(self, arguments, operands: tuple) -> tuple[list, list]:
        """The region's array outputs and sums for ``arguments`` of ``operands``
        kinds (CuPy kernels, compiled on first use)."""
        elementwise, reductions = self.build(operands)
        arrays = list(elementwise(*arguments)) if elementwise is not None else []
        return arrays, [reduction(*arguments) for reduction in reductions]

    def build(self, operands: tuple) -> tuple:
        """``(elementwise kernel or None, reduction kernels)`` for operands of
        ``operands`` kinds: CuPy's kernel objects, made here (without a GPU, too)
        and compiled by CuPy where they first run."""
        if operands not in self.kernels:
            cupy = cuda.cupy_module()
            source = self.source_for(operands)
            in_params = cuda.parameters(operands)
            names = ", ".join(f"a{i}" for i in range(len(self.inputs)))
            elementwise = None
            if self.arrays:
                results = ", ".join(f"o{k}" for k in range(len(self.arrays)))
                elementwise = cupy.ElementwiseKernel(
                    in_params,
                    ", ".join(f"T o{k}" for k in range(len(self.arrays))),
                    f"{self.function}<T>({names}, {results})",
                    f"{self.function}_kernel",  # not the device function's name
                    preamble=source,
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
                    preamble=source,
                )
                for number in range(len(self.sums))
            ]
            self.kernels[operands] = (elementwise, reductions)
        return self.kernels[operands]


def layout(arguments) -> tuple | None:
    """``(dtype, kinds)`` when the floating array arguments have one dtype (float32
    or float64) and one shape, which boolean arrays share (0-d arrays and Python
    numbers may join them); ``kinds``: ``'b'`` for each boolean, ``'w'`` for each
    Python number, ``'f'`` for the arrays. Else None."""
    masks = [_boolean(value) for value in arguments]
    found = shared_layout(
        [value for value, mask in zip(arguments, masks) if not mask], _typed_array
    )
    if found is None:
        return None
    shape, dtype = found
    for value, mask in zip(arguments, masks):
        if mask and np.ndim(value) and np.shape(value) != shape:
            return None
    kinds = tuple(
        "b" if mask else "w" if type(value) in (float, int) else "f"
        for value, mask in zip(arguments, masks)
    )  # a Python number is weak: with a mask alone NumPy makes it float64, not T
    return np.dtype(dtype), kinds


def _boolean(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return type(value) is bool or (dtype is not None and dtype.kind == "b")


def _typed_array(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and hasattr(value, "ndim") and dtype.itemsize in (4, 8)
