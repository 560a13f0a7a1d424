"""Fixtures that run programs fused for CUDA on a machine without a GPU (used by
the CUDA kernel tests, through ``conftest.py``): ``compile_host`` compiles CUDA C with
nvcc (device code included, so it must be valid CUDA) into a library loaded here;
``kernels_from_trees`` puts NumPy in CuPy's place and evaluates each generated kernel
from its tree (its CUDA C is checked against the tree separately); and
``regions_on_the_host`` runs each CUDA region's own C, compiled as host code, one
element after another."""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from ppto.fusion import cuda
from ppto.fusion.cuda_regions import CudaRegion, layout
from ppto.fusion.kernels import evaluate_numpy


@pytest.fixture(scope="session")
def compile_host(tmp_path_factory):
    """``compile_host(source)``: the CUDA C ``source`` compiled by nvcc (device code
    for sm_80 included) into a library loaded here; one compilation per source."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc (the CUDA toolkit) to compile the generated kernels")
    directory = tmp_path_factory.mktemp("cuda")
    libraries: dict = {}

    def compile_source(source: str):
        if source not in libraries:
            number = len(libraries)
            path = directory / f"kernels{number}.cu"
            path.write_text("#include <cmath>\n" + source)
            library = directory / f"kernels{number}.so"
            command = [nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80",
                       "-Werror", "all-warnings",  # a host function called on device
                       "-o", str(library), str(path)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr[-4000:]
            libraries[source] = ctypes.CDLL(str(library))
        return libraries[source]

    return compile_source


@pytest.fixture
def kernels_from_trees(monkeypatch):
    """CuPy's place taken by NumPy and each generated kernel by its tree's NumPy
    value (checked above against the CUDA C), so that the rest of a program fused for
    CUDA (operands, in-place epilogues, means) runs here."""
    calls = []

    def elementwise(self, arrays):
        try:  # as the real method: None where the kernel does not apply
            kinds, _ = cuda.operand_kinds(arrays)
            self.operation(kinds)  # the C must be generated for these operands
        except cuda.Unsupported:
            return None

        def run(*operands):
            calls.append(self.name)
            value = evaluate_numpy(self.tree, operands[: self.arity])
            if len(operands) > self.arity:  # written over the given output
                operands[-1][...] = value
                return operands[-1]
            return np.asarray(value)

        return run

    def reduction(self, arrays):
        try:
            kinds, _ = cuda.operand_kinds(arrays)
            self.operation(kinds)
        except cuda.Unsupported:
            return None
        tree = self.elementwise.tree

        def run(*operands, axis, keepdims):
            calls.append(self.elementwise.name)
            values = np.broadcast_to(
                evaluate_numpy(tree, operands),
                np.broadcast_shapes(*(np.shape(a) for a in operands)),
            )
            return np.asarray(np.sum(values, axis=axis, keepdims=keepdims))

        return run

    monkeypatch.setattr(cuda, "cupy_module", lambda: np)
    monkeypatch.setattr(cuda.CudaElementwise, "kernel", elementwise)
    monkeypatch.setattr(cuda.CudaReduction, "kernel", reduction)
    return calls


REGION_HARNESS = """
extern "C" void host_{c}({inputs}, {outputs}, long size) {{
  for (long i = 0; i < size; ++i) {function}<{c}>({elements}, {results});
}}
__global__ void device_{c}({inputs}, {outputs}, long size) {{
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < size) {function}<{c}>({elements}, {results});
}}
"""
SUM_HARNESS = """
extern "C" void host_{c}_sum{n}({inputs}, {c}* total, long size) {{
  {c} sum = 0;
  for (long i = 0; i < size; ++i) sum += {function}_sum{n}<{c}>({elements});
  *total = sum;
}}
__global__ void device_{c}_sum{n}({inputs}, {c}* total, long size) {{
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < size) total[i] = {function}_sum{n}<{c}>({elements});
}}
"""


@pytest.fixture
def regions_on_the_host(kernels_from_trees, compile_host, monkeypatch):
    """Besides ``kernels_from_trees``: each CUDA region runs its own CUDA C, compiled
    by nvcc as host code, one element after another."""

    def launch(self, arguments, operands):
        source = self.source_for(operands)
        for c in ("float", "double"):
            names = {"c": c, "function": self.function}
            types = ["bool" if kind == "b" else c for kind in operands]
            names["inputs"] = ", ".join(f"const {t}* p{i}" for i, t in enumerate(types))
            names["elements"] = ", ".join(f"p{i}[i]" for i in range(len(types)))
            names["outputs"] = ", ".join(f"{c}* q{k}" for k in range(len(self.arrays)))
            names["results"] = ", ".join(f"q{k}[i]" for k in range(len(self.arrays)))
            if self.arrays:
                source += REGION_HARNESS.format(**names)
            for number in range(len(self.sums)):
                source += SUM_HARNESS.format(n=number, **names)
        library = compile_host(source)
        dtype, _ = layout(arguments)
        c = "float" if dtype == np.float32 else "double"
        shape = np.broadcast_shapes(*(np.shape(a) for a in arguments))
        inputs = [
            np.ascontiguousarray(
                np.broadcast_to(np.asarray(a, bool if kind == "b" else dtype), shape)
            )
            for a, kind in zip(arguments, operands)
        ]
        arrays = [np.empty(shape, dtype) for _ in self.arrays]
        size = ctypes.c_long(int(np.prod(shape)))
        if arrays:
            getattr(library, f"host_{c}")(*map(_pointer, inputs + arrays), size)
        totals = [np.zeros((), dtype) for _ in self.sums]
        for number, total in enumerate(totals):
            run = getattr(library, f"host_{c}_sum{number}")
            run(*map(_pointer, inputs), _pointer(total), size)
        kernels_from_trees.append(self.name)
        return arrays, totals

    monkeypatch.setattr(CudaRegion, "launch", launch)
    return kernels_from_trees


def _pointer(array):
    return ctypes.c_void_p(array.ctypes.data)
