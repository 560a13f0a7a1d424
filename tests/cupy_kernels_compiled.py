"""CuPy's ``ElementwiseKernel`` and ``ReductionKernel`` emulated by compiling the CUDA
source CuPy would make of them (fixture ``compiled_cupy``).

``emulated_cupy`` (``tests/cuda_emulation.py``) evaluates each generated kernel from
its tree; the kernel's CUDA C is checked separately, in a harness of the test's own.
Here instead every kernel object a program makes (``cupy.ElementwiseKernel(in_params,
out_params, operation, name, preamble=...)``) is assembled as CuPy 13 assembles it
(``cupy/_core/_kernel.pyx`` and ``_reduction.pyx``: a ``typedef`` of each type
placeholder, then the preamble, then an ``extern "C" __global__`` function whose loop
declares each operand as a reference to its element and runs the operation, or the
map and reduce expressions through CuPy's ``REDUCE``/``POST_MAP`` macros), compiled
by nvcc with device code for sm_80, and run: the same text as a host function, over
the operands broadcast as CuPy broadcasts them. A kernel whose parameters CuPy would
refuse (a parameter named ``i``, an invalid name, types it cannot decide) raises as
CuPy does; one whose source does not compile raises ``CompileException`` (the name
of CuPy's NVRTC error, which ppto turns into a warning and the unfused route).

What it cannot check: NVRTC's own quirks beyond nvcc's (both are the same front end),
CuPy's indexing of non-contiguous arrays (the operands are made contiguous here), the
CUB reductions CuPy may choose for one-input sums, and numerics on a real GPU.
"""

import ctypes
import functools
import re
import shutil
import weakref

import numpy as np
import pytest

from ppto.fusion import cuda
from tests.cuda_emulation import (
    EmulatedCupyArray,
    _unwrap,
    _wrap,
    emulated_cupy_module,
)

# CArray and CIndexer reduced to what a contiguous operand needs, host and device
HEADER = """\
#include <cmath>
#include <cstddef>
template <typename T> struct CArray {
  T* data;
  __host__ __device__ T& operator[](ptrdiff_t i) const { return data[i]; }
};
struct CIndexer {
  ptrdiff_t size_, index_;
  __host__ __device__ ptrdiff_t size() const { return size_; }
  __host__ __device__ void set(ptrdiff_t i) { index_ = i; }
  __host__ __device__ ptrdiff_t get() const { return index_; }
};
#define CUPY_FOR(i, n) \\
  for (ptrdiff_t i = blockIdx.x * (ptrdiff_t)blockDim.x + threadIdx.x; i < (n); \\
       i += (ptrdiff_t)blockDim.x * gridDim.x)
#define HOST_FOR(i, n) for (ptrdiff_t i = 0; i < (n); ++i)
"""
C_TYPES = {
    np.dtype(np.float64): ("double", ctypes.c_double),
    np.dtype(np.float32): ("float", ctypes.c_float),
    np.dtype(np.bool_): ("bool", ctypes.c_bool),
    np.dtype(np.int64): ("long long", ctypes.c_longlong),
    np.dtype(np.int32): ("int", ctypes.c_int),
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CompileException(Exception):
    """Named as CuPy's error where NVRTC refuses a kernel's source."""


class Parameter:
    """One of a kernel's parameters, parsed as CuPy's ``ParameterInfo``."""

    def __init__(self, text: str, const: bool) -> None:
        words = text.split()
        if len(words) < 2:
            raise Exception(f"Syntax error: {text}")
        *modifiers, self.type, self.name = words
        if modifiers:  # (raw and _non_const: not made by ppto, not emulated)
            raise NotImplementedError(f"parameter modifiers {modifiers}")
        self.placeholder = len(self.type) == 1
        self.dtype = None if self.placeholder else np.dtype(self.type)
        self.const = const


def _parameters(text: str, const: bool) -> list:
    return [Parameter(p, const) for p in text.split(",")] if text.strip() else []


class _Kernel:
    """What CuPy's two kernel classes share: parsing, typing and compiling."""

    def __init__(self, compile_source, ran, in_params, out_params, name, preamble):
        if not NAME.fullmatch(name):
            raise ValueError(f'Invalid kernel name: "{name}"')
        self.inputs = _parameters(in_params, True)
        self.outputs = _parameters(out_params, False)
        if "i" in [p.name for p in self.inputs + self.outputs]:
            raise ValueError("Can not use 'i' as a parameter name")
        self.name, self.preamble = name, preamble
        self.compile_source = compile_source
        self.ran = ran  # the names of the kernels run, in order

    def types(self, arrays: list, outs: list) -> dict:
        """Each type placeholder's dtype, decided by the arrays as CuPy's
        ``_decide_params_type`` does (a scalar takes the placeholder's type)."""
        found: dict = {}
        for parameter, value in [*zip(self.outputs, outs), *zip(self.inputs, arrays)]:
            if not isinstance(value, np.ndarray) or not parameter.placeholder:
                if isinstance(value, np.ndarray) and value.dtype != parameter.dtype:
                    raise TypeError(f"Type is mismatched. {parameter.name}")
                continue
            known = found.setdefault(parameter.type, value.dtype)
            if known != value.dtype:
                raise TypeError(f"Type is mismatched. {parameter.name}")
        return found

    def dtype_of(self, parameter, found: dict) -> np.dtype:
        if parameter.placeholder:
            if parameter.type not in found:
                raise TypeError(f"the type of {parameter.name} is undecided")
            return found[parameter.type]
        return parameter.dtype

    def typedefs(self, found: dict) -> str:
        return "".join(
            f"typedef {C_TYPES[dtype][0]} {name};\n"
            for name, dtype in sorted(found.items())
        )

    def declarations(self, pairs, found: dict, index: str, host: bool) -> tuple:
        """``(the function's parameters, the loop's element references)`` for
        ``(parameter, value)`` pairs (a value: an array or a scalar)."""
        params, loads = [], []
        for parameter, value in pairs:
            c_type = C_TYPES[self.dtype_of(parameter, found)][0]
            const = "const " if parameter.const else ""
            if not isinstance(value, np.ndarray):  # a scalar: passed by value
                params.append(f"{c_type} {parameter.name}")
                continue
            if host:
                params.append(f"{c_type}* _p_{parameter.name}")
            else:
                params.append(f"{const}CArray<{c_type}> _raw_{parameter.name}")
            element = parameter.type if parameter.placeholder else c_type
            loads.append(
                f"{const}{element} &{parameter.name} = "
                f"_raw_{parameter.name}[{index}.get()];"
            )
        return params, loads

    def host_wrappers(self, pairs, found: dict) -> str:
        """The host function's CArrays over its pointers."""
        return "\n".join(
            f"  CArray<{C_TYPES[self.dtype_of(p, found)][0]}> _raw_{p.name}"
            f"{{_p_{p.name}}};"
            for p, value in pairs
            if isinstance(value, np.ndarray)
        )

    def compiled(self, source: str):
        try:
            return self.compile_source(HEADER + source)
        except AssertionError as refused:  # (compile_host asserts nvcc's success)
            raise CompileException(str(refused)) from None

    def arguments(self, pairs, found: dict) -> list:
        """ctypes arguments: a pointer per array, a typed value per scalar."""
        return [
            ctypes.c_void_p(value.ctypes.data)
            if isinstance(value, np.ndarray)
            else C_TYPES[self.dtype_of(parameter, found)][1](value)
            for parameter, value in pairs
        ]


def _operands(arguments) -> list:
    """The arguments on the host: arrays as NumPy arrays, scalars as they are."""
    return [
        np.asarray(_unwrap(a)) if isinstance(a, (EmulatedCupyArray, np.ndarray)) else a
        for a in arguments
    ]


class CompiledElementwiseKernel(_Kernel):
    """``cupy.ElementwiseKernel`` run by its compiled source (see the module
    docstring)."""

    def __init__(self, compile_source, ran, in_params, out_params, operation,
                 name="kernel", reduce_dims=True, preamble="", no_return=False,
                 return_tuple=False, **kwargs):  # fmt: skip
        super().__init__(compile_source, ran, in_params, out_params, name, preamble)
        self.operation, self.return_tuple = operation, return_tuple

    def __call__(self, *arguments, size=None, block_size=None):
        given = _operands(arguments)
        inputs, outs = given[: len(self.inputs)], given[len(self.inputs) :]
        arrays = [a for a in inputs if isinstance(a, np.ndarray)]
        if not arrays:
            raise ValueError("Loop size is undecided.")
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        found = self.types(inputs, outs)
        inputs = [  # broadcast, contiguous (CuPy indexes the broadcast views)
            np.ascontiguousarray(np.broadcast_to(a, shape))
            if isinstance(a, np.ndarray)
            else a
            for a in inputs
        ]
        results = [
            np.empty(shape, self.dtype_of(p, found)) for p in self.outputs[len(outs) :]
        ]
        for out in outs:
            if out.shape != shape:
                raise ValueError("Out shape is mismatched")
        written = [np.empty(shape, out.dtype) for out in outs] + results
        pairs = list(zip([*self.inputs, *self.outputs], [*inputs, *written]))
        library = self.compiled(self.source(pairs, found))
        self.ran.append(self.name)
        run = getattr(library, f"host_{self.name}")
        run(*self.arguments(pairs, found), ctypes.c_ssize_t(int(np.prod(shape))))
        for out, value in zip(outs, written):
            out[...] = value  # (into the given arrays, as CuPy writes)
        given_outs = list(arguments[len(self.inputs) :])
        returned = [*given_outs, *(_wrap(r) for r in results)]
        if len(returned) == 1 and not self.return_tuple:
            return returned[0]
        return tuple(returned)

    def source(self, pairs, found: dict) -> str:
        device_params, loads = self.declarations(pairs, found, "_ind", host=False)
        host_params, _ = self.declarations(pairs, found, "_ind", host=True)
        body = "\n    ".join([*loads, f"{self.operation};"])
        return (
            f"{self.typedefs(found)}{self.preamble}\n"
            f'extern "C" __global__ void {self.name}('
            f"{', '.join(device_params)}, CIndexer _ind) {{\n"
            f"  #pragma unroll 1\n  CUPY_FOR(i, _ind.size()) {{\n    _ind.set(i);\n"
            f"    {body}\n  }}\n}}\n"
            f'extern "C" void host_{self.name}({", ".join(host_params)}, '
            f"ptrdiff_t _size) {{\n{self.host_wrappers(pairs, found)}\n"
            f"  CIndexer _ind{{_size, 0}};\n"
            f"  HOST_FOR(i, _ind.size()) {{\n    _ind.set(i);\n    {body}\n  }}\n}}\n"
        )


class CompiledReductionKernel(_Kernel):
    """``cupy.ReductionKernel`` run by its compiled source: each output element
    reduces its inputs in order (see the module docstring)."""

    def __init__(self, compile_source, ran, in_params, out_params, map_expr,
                 reduce_expr, post_map_expr, identity, name="reduce_kernel",
                 reduce_type=None, reduce_dims=True, preamble="",
                 options=()):  # fmt: skip
        super().__init__(compile_source, ran, in_params, out_params, name, preamble)
        if len(self.outputs) != 1:
            raise NotImplementedError("reductions of several outputs")
        self.map_expr, self.reduce_expr = map_expr, reduce_expr
        self.post_map_expr, self.identity = post_map_expr, identity
        self.reduce_type = reduce_type

    def __call__(self, *arguments, out=None, axis=None, keepdims=False, stream=None):
        inputs = _operands(arguments)
        arrays = [a for a in inputs if isinstance(a, np.ndarray)]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        found = self.types(inputs, [])
        axes = tuple(range(len(shape))) if axis is None else axis
        axes = tuple(a % len(shape) for a in (axes if type(axes) is tuple else (axes,)))
        kept = [a for a in range(len(shape)) if a not in axes]
        order = kept + list(axes)  # the reduced axes last: one output's run
        out_size = int(np.prod([shape[a] for a in kept]))
        in_size = int(np.prod(shape))
        inputs = [
            np.ascontiguousarray(np.broadcast_to(a, shape).transpose(order))
            if isinstance(a, np.ndarray)
            else a
            for a in inputs
        ]
        result = np.empty(out_size, self.dtype_of(self.outputs[0], found))
        pairs = list(zip([*self.inputs, *self.outputs], [*inputs, result]))
        library = self.compiled(self.source(pairs, found))
        self.ran.append(self.name)
        run = getattr(library, f"host_{self.name}")
        sizes = (ctypes.c_ssize_t(in_size), ctypes.c_ssize_t(out_size))
        run(*self.arguments(pairs, found), *sizes)
        reduced = [1 if a in axes else n for a, n in enumerate(shape)]
        result = result.reshape(reduced if keepdims else [shape[a] for a in kept])
        return _wrap(result)

    def source(self, pairs, found: dict) -> str:
        inputs = pairs[: len(self.inputs)]
        in_params, in_loads = self.declarations(inputs, found, "_in_ind", False)
        host_params, _ = self.declarations(pairs, found, "_in_ind", host=True)
        out_type = C_TYPES[self.dtype_of(self.outputs[0], found)][0]
        out_name = self.outputs[0].name
        element = self.outputs[0].type if self.outputs[0].placeholder else out_type
        out_load = f"{element} &{out_name} = _raw_{out_name}[_out_ind.get()];"
        reduce_type = self.reduce_type or out_type
        loop = "\n".join(
            [
                "    _type_reduce _s = _type_reduce(" + str(self.identity) + ");",
                "    const ptrdiff_t _run = _in_ind.size() / _out_ind.size();",
                "    for (ptrdiff_t _j = 0; _j < _run; ++_j) {",
                "      _in_ind.set(_i * _run + _j);",
                *(f"      {load}" for load in in_loads),
                f"      _type_reduce _a = static_cast<_type_reduce>({self.map_expr});",
                "      _s = REDUCE(_s, _a);",
                "    }",
                "    _out_ind.set(_i);",
                f"    {out_load}",
                "    POST_MAP(_s);",
            ]
        )
        head = (
            f"{self.typedefs(found)}{self.preamble}\n"
            f"#define REDUCE(a, b) ({self.reduce_expr})\n"
            f"#define POST_MAP(a) ({self.post_map_expr})\n"
            f"typedef {reduce_type} _type_reduce;\n"
        )
        return (
            f"{head}"
            f'extern "C" __global__ void {self.name}({", ".join(in_params)}, '
            f"CArray<{out_type}> _raw_{out_name}, CIndexer _in_ind, "
            f"CIndexer _out_ind) {{\n"
            f"  CUPY_FOR(_i, _out_ind.size()) {{\n{loop}\n  }}\n}}\n"
            f'extern "C" void host_{self.name}({", ".join(host_params)}, '
            f"ptrdiff_t _in_size, ptrdiff_t _out_size) {{\n"
            f"{self.host_wrappers(pairs, found)}\n"
            f"  CIndexer _in_ind{{_in_size, 0}}, _out_ind{{_out_size, 0}};\n"
            f"  HOST_FOR(_i, _out_ind.size()) {{\n{loop}\n  }}\n}}\n"
        )


@pytest.fixture
def compiled_cupy(compile_host, monkeypatch):
    """``device='cuda'`` served by ppto's CuPy backend over ``emulated_cupy_module``
    whose ``ElementwiseKernel`` and ``ReductionKernel`` compile and run the source
    CuPy would (see the module docstring): none of ppto's kernels is replaced, so
    every generated kernel runs as CuPy would build it. Returns the names of the
    kernels run, in order."""
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc (the CUDA toolkit) to compile the generated kernels")
    return install_compiled_cupy(compile_host, monkeypatch)


def install_compiled_cupy(compile_source, monkeypatch) -> list:
    """``compiled_cupy``'s CuPy, compiling by ``compile_source``, installed by
    ``monkeypatch``; returns the list of the names of the kernels run."""
    from ppto import api
    from ppto.fusion.registry import RULES
    from ppto.runtime.backends import _BACKENDS

    ran: list = []
    module = emulated_cupy_module()
    module.__dict__["ElementwiseKernel"] = functools.partial(
        CompiledElementwiseKernel, compile_source, ran
    )
    module.__dict__["ReductionKernel"] = functools.partial(
        CompiledReductionKernel, compile_source, ran
    )
    monkeypatch.setattr(_BACKENDS["cuda"], "_cupy", module)
    # (as emulated_cupy: code lowered for 'cuda:0' kept apart from a real GPU's)
    monkeypatch.setattr(api, "_SHARED", weakref.WeakKeyDictionary())
    monkeypatch.setattr(cuda, "cupy_module", lambda: module)
    for rule in RULES:  # rules' kernels made anew: they keep the kernel objects made
        # (set first, so that one made here is removed again afterwards too: no
        # later test gets these kernel objects)
        monkeypatch.setitem(rule.__dict__, "cuda_kernel", None)
        monkeypatch.delitem(rule.__dict__, "cuda_kernel")
    return ran
