"""Fixtures that run programs fused for CUDA on a machine without a GPU (used by
the CUDA kernel tests, through ``conftest.py``): ``compile_host`` compiles CUDA C with
nvcc (device code included, so it must be valid CUDA) into a library loaded here;
``kernels_from_trees`` puts NumPy in CuPy's place and evaluates each generated kernel
from its tree (its CUDA C is checked against the tree separately); and
``regions_on_the_host`` runs each CUDA region's own C, compiled as host code, one
element after another; ``emulated_cupy`` serves ``device='cuda'`` by ppto's CuPy
backend over a CuPy emulated on NumPy, so that operators and whole programs take
their CuPy code path here."""

import contextlib
import ctypes
import functools
import itertools
import re
import shutil
import subprocess
import warnings
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

import ppto
from ppto.fusion import cuda
from ppto.fusion.cuda_regions import CudaRegion, layout
from ppto.fusion.kernels import evaluate_numpy


@pytest.fixture(scope="session")
def compile_host(tmp_path_factory):
    """``compile_host(source)``: the CUDA C ``source`` compiled by nvcc (device code
    for sm_80 included) into a library loaded here; one compilation per source (see
    ``HostCompiler``)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc (the CUDA toolkit) to compile the generated kernels")
    return HostCompiler(nvcc, tmp_path_factory.mktemp("cuda"))


class HostCompiler:
    """``compiler(source)``: the library nvcc makes of ``source``, one compilation
    per source.

    nvcc takes about 0.75 s on any source, an empty one too (its processes and the
    CUDA headers each parses), and a few hundredths of a second more per small
    kernel: sources known ahead are compiled together, in one nvcc run
    (``compile_together``), and ``compiler(source)`` then hands out that source's
    functions from the library of all. ``collecting()`` finds a test's sources
    ahead: run with kernels that do nothing, it records each source asked for."""

    # every warning an error: a host function called on device is one
    FLAGS = ["-O2", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80",
             "-Werror", "all-warnings"]  # fmt: skip

    def __init__(self, nvcc: str, directory) -> None:
        self.nvcc, self.directory = nvcc, directory
        self.libraries: dict = {}  # source -> its library
        self.runs = 0  # nvcc runs (the file names' numbers)
        self.collected = None  # while collecting, the sources asked for

    def __call__(self, source: str):
        if source in self.libraries:
            return self.libraries[source]
        if self.collected is not None:
            self.collected.append(source)
            return _NotRun()
        library, errors = self._nvcc("#include <cmath>\n" + source)
        assert library is not None, errors
        self.libraries[source] = ctypes.CDLL(str(library))
        return self.libraries[source]

    @contextlib.contextmanager
    def collecting(self):
        """Within: ``compiler(source)`` compiles nothing (a source compiled already
        is handed out as before) but records ``source`` in the list given, and hands
        out a library whose functions do nothing (they leave the arrays they would
        write as they are)."""
        self.collected = []
        try:
            yield self.collected
        finally:
            self.collected = None

    def compile_together(self, sources) -> None:
        """Those of ``sources`` not compiled yet, compiled in one nvcc run: one
        translation unit, each source as it is in a namespace of its own, its
        ``extern "C"`` functions renamed by a macro to names of their own (one name
        in two sources would be one function) and its macros undefined after it.
        Only sources with the same ``#include`` lines, all before anything else,
        go together, those lines put first (the copies within the namespaces then
        include nothing): each source sees the declarations it sees alone. A
        source of other includes or ``extern "C"`` declarations than those read
        here, or a batch nvcc refuses, is left to be compiled alone when asked
        for, to fail with its own errors."""
        batches: dict = {}
        for source in dict.fromkeys(sources):
            full = "#include <cmath>\n" + source
            names = EXTERN_C_FUNCTION.findall(full)
            includes = _leading_includes(full)
            if source in self.libraries or len(names) != full.count('extern "C"'):
                continue
            if len(includes) != len(INCLUDE.findall(full)):
                continue
            batches.setdefault(includes, []).append((source, full, names))
        for includes, batch in batches.items():
            if len(batch) == 1:  # (nothing saved)
                continue
            parts = [*includes, ""]
            for number, (_, full, names) in enumerate(batch):
                renames = "".join(f"#define {n} {n}__{number}\n" for n in names)
                undefined = [*names, *DEFINE.findall(full)]
                undefines = "".join(f"#undef {n}\n" for n in undefined)
                parts.append(
                    f"namespace batch{number} {{\n{renames}{full}\n{undefines}}}"
                )
            library, _ = self._nvcc("\n".join(parts) + "\n")
            if library is None:  # each source compiles alone, with its own errors
                continue
            library = ctypes.CDLL(str(library))
            for number, (source, _, names) in enumerate(batch):
                renamed = {n: f"{n}__{number}" for n in names}
                self.libraries[source] = _OneSourceOf(library, renamed)

    def _nvcc(self, text: str) -> tuple:
        """``(the library, None)``, or ``(None, nvcc's errors)``."""
        path = self.directory / f"kernels{self.runs}.cu"
        library = path.with_suffix(".so")
        self.runs += 1
        path.write_text(text)
        command = [self.nvcc, *self.FLAGS, "-o", str(library), str(path)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None, done.stderr[-4000:]
        return library, None


EXTERN_C_FUNCTION = re.compile(r'extern\s+"C"\s+[^;{}()"]*?\b(\w+)\s*\(')
INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.MULTILINE)
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.MULTILINE)


def _leading_includes(source: str) -> tuple:
    """The ``#include`` lines before the first other line (but blank ones)."""
    lines = itertools.takewhile(
        lambda line: INCLUDE.fullmatch(line) or not line.strip(),
        source.splitlines(),
    )
    return tuple(line for line in lines if line.strip())


class _OneSourceOf:
    """The functions of one source compiled with others (``compile_together``),
    by the names the source gives them."""

    def __init__(self, library, renamed: dict) -> None:
        self._library, self._renamed = library, renamed

    def __getattr__(self, name: str):
        if name not in self._renamed:
            raise AttributeError(f'the source defines no extern "C" {name}')
        return getattr(self._library, self._renamed[name])


class _NotRun:
    """A library handed out while collecting sources: its functions do nothing."""

    def __getattr__(self, name: str):
        return lambda *arguments: None


def compile_ahead(compile_host: HostCompiler, runs) -> None:
    """The sources of tests compiled in one nvcc run before those tests: ``runs``,
    ``(install, call)`` pairs, ``install(compile_host, monkeypatch)`` installing a
    test's emulation (``install_compiled_cupy``, ...), ``call()`` making that test's
    calls of its kernels. Each call runs once, its kernels doing nothing
    (``HostCompiler.collecting``), to give the sources the test will ask for; the
    test then runs as before, asking ``compile_host`` for each of its sources, and
    finds it compiled (where its kernels' values decide what it compiles next, any
    other source compiles then). A call that raises is left: its test meets the
    error itself. For a module fixture, before the tests' own fixtures
    (conftest.py's settings for the tests taken on here)."""
    policy = ppto.set_transfer_policy("allow")
    try:
        with (
            compile_host.collecting() as sources,
            warnings.catch_warnings(),  # (of the values the kernels never wrote)
            np.errstate(all="ignore"),
        ):
            warnings.simplefilter("ignore")
            for install, call in runs:
                with pytest.MonkeyPatch.context() as monkeypatch:
                    monkeypatch.setenv("PPTO_FUSION", "on")
                    install(compile_host, monkeypatch)
                    with contextlib.suppress(Exception):
                        call()
    finally:
        ppto.set_transfer_policy(policy)
    compile_host.compile_together(sources)


@pytest.fixture
def kernels_from_trees(monkeypatch):
    """CuPy's place taken by NumPy and each generated kernel by its tree's NumPy
    value (checked above against the CUDA C), so that the rest of a program fused for
    CUDA (operands, in-place epilogues, means) runs here."""
    return install_kernels_from_trees(monkeypatch)


def install_kernels_from_trees(monkeypatch) -> list:
    """``kernels_from_trees`` installed by ``monkeypatch``; returns the list of the
    names of the kernels run."""
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
def regions_on_the_host(compile_host, monkeypatch):
    """Besides ``kernels_from_trees``: each CUDA region runs its own CUDA C, compiled
    by nvcc as host code, one element after another."""
    return install_regions_on_the_host(compile_host, monkeypatch)


def install_regions_on_the_host(compile_host, monkeypatch) -> list:
    """``regions_on_the_host`` installed by ``monkeypatch``, compiling by
    ``compile_host``; returns the list of the names of the kernels run."""
    kernels_from_trees = install_kernels_from_trees(monkeypatch)

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


# --- CuPy itself, emulated over NumPy ------------------------------------------------

# What NumPy 2 has and CuPy 13.6 lacks (read from an installed cupy-cuda12x 13.6.0:
# the public callables of numpy that cupy does not define): a generic operator or the
# generated code calling one of these would fail on the first GPU run.
CUPY_LACKS = set(
    """acos acosh apply_over_axes asin asinh asmatrix astype atan atan2 atanh
    bitwise_count bitwise_invert bitwise_left_shift bitwise_right_shift block bmat bool
    busday_count busday_offset busdaycalendar bytes_ character clongdouble complex256
    concat cumulative_prod cumulative_sum datetime64 datetime_as_string datetime_data
    einsum_path errstate flexible float128 frompyfunc fromregex geomspace get_include
    getbufsize geterr geterrcall histogram_bin_edges info insert is_busday isdtype isnat
    long longdouble matrix matrix_transpose matvec memmap nanpercentile nanquantile
    ndenumerate nditer nested_iters object_ permute_dims polyder polydiv polyint pow
    put_along_axis recarray record setbufsize seterr seterrcall show_runtime spacing
    str_ test timedelta64 trapezoid ulong unique_all unique_counts unique_inverse
    unique_values unstack vecdot vecmat void""".split()
)
CUPY_LINALG_LACKS = set(
    """cond cross diagonal eig eigvals matmul matrix_norm matrix_transpose multi_dot
    outer svdvals tensordot test trace vecdot vector_norm""".split()
)


class EmulatedCupyArray(np.lib.mixins.NDArrayOperatorsMixin):
    """A stand-in for ``cupy.ndarray`` holding a NumPy array, with the behaviours of
    CuPy's arrays that host code can trip over: it is no ``np.ndarray``; NumPy
    refuses to convert it implicitly (``np.asarray`` raises TypeError, as CuPy's
    ``__array__`` does); of writes to a repeated integer index the first lands
    (CuPy leaves it undefined, NumPy keeps the last); an integer index out of
    bounds wraps around (NumPy raises IndexError); NumPy functions called on
    it run CuPy's function of that name, or raise TypeError where CuPy has none;
    reductions and scalar indexing give 0-d arrays, not NumPy scalars; ``.get()``
    copies it to the host."""

    __module__ = "cupy"  # (as ppto recognizes CuPy's arrays)
    __slots__ = ("_host",)
    __hash__ = None

    def __init__(self, host: np.ndarray) -> None:
        self._host = host

    device = property(lambda self: _EmulatedDevice(0))
    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    ndim = property(lambda self: self._host.ndim)
    size = property(lambda self: self._host.size)
    T = property(lambda self: EmulatedCupyArray(self._host.T))

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. Please use "
            "`.get()` to construct a NumPy array explicitly."
        )

    def get(self, stream=None, order="C", out=None, blocking=True):
        return np.array(self._host, copy=True)

    def __getattr__(self, name):  # methods and other attributes: NumPy's, wrapped
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._host, name)
        if callable(value):
            return lambda *args, **kwargs: _wrap(
                value(*_unwrap(args), **_unwrap(kwargs))
            )
        return _wrap(value)

    def __getitem__(self, key):
        return _wrap(self._host[_wrapped_around(_unwrap(key), self.shape)])

    def __setitem__(self, key, value):
        key, value = _wrapped_around(_unwrap(key), self.shape), _unwrap(value)
        if _has_integer_array(key):
            # CuPy leaves which of the writes to a repeated index lands undefined
            # (NumPy: the last); here the first does, one of CuPy's outcomes
            positions = np.arange(self._host.size).reshape(self._host.shape)[key]
            values = np.broadcast_to(value, positions.shape)
            np.put(self._host, positions.ravel()[::-1], values.ravel()[::-1])
        else:
            self._host[key] = value

    def __len__(self):
        return len(self._host)

    def __iter__(self):
        return (_wrap(row) for row in self._host)

    def __float__(self):
        return float(self._host)

    def __int__(self):
        return int(self._host)

    def __bool__(self):
        return bool(self._host)

    def __repr__(self):
        return f"emulated_cupy.{self._host!r}"

    def __copy__(self):
        return EmulatedCupyArray(self._host.copy())

    def __deepcopy__(self, memo):
        return EmulatedCupyArray(self._host.copy())

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc.__name__ in CUPY_LACKS:
            return NotImplemented
        out = kwargs.get("out")
        result = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        if out is not None:  # written in place: the given arrays
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        # as CuPy's: numpy.<name> runs cupy.<name>, and raises where there is none
        if func.__name__ in CUPY_LACKS or func.__module__.startswith("numpy.lib"):
            return NotImplemented
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))


def _wrapped_around(key, shape):
    """``key`` with the indices of its integer arrays taken modulo their axis's
    length: CuPy wraps an index out of bounds around where NumPy raises."""
    parts = key if isinstance(key, tuple) else (key,)

    def axes(part):
        if part is None:
            return 0
        mask = isinstance(part, np.ndarray) and part.dtype == bool
        return part.ndim if mask else 1

    named = sum(axes(part) for part in parts if part is not Ellipsis)
    wrapped, axis = [], 0
    for part in parts:
        if part is Ellipsis:
            wrapped.append(part)
            axis += len(shape) - named
            continue
        if isinstance(part, (np.ndarray, list)) and axis < len(shape):
            array = np.asarray(part)
            if array.dtype.kind in "iu" and shape[axis]:
                part = array % shape[axis]
        wrapped.append(part)
        axis += axes(part)
    return tuple(wrapped) if isinstance(key, tuple) else wrapped[0]


def _has_integer_array(key) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return any(
        isinstance(part, list) or (isinstance(part, np.ndarray) and part.dtype != bool)
        for part in parts
    )


def _unwrap(value):
    if isinstance(value, EmulatedCupyArray):
        return value._host
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _wrap(value):
    if isinstance(value, (np.ndarray, np.generic)) and not isinstance(value, type):
        return EmulatedCupyArray(np.asarray(value) if value.ndim == 0 else value)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class _EmulatedDevice:
    """``cupy.cuda.Device``: a context that makes device ``id`` current."""

    def __init__(self, id=0):
        self.id = int(id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


class _EmulatedFunction:
    """A NumPy function or ufunc (with its methods) taking and giving emulated
    arrays, as CuPy's does."""

    def __init__(self, function):
        self.function = function
        self.__name__ = getattr(function, "__name__", "function")

    def __call__(self, *args, **kwargs):
        args = _unwrap(args)
        if getattr(self, "_path", "").endswith(".at"):  # ufunc.at(a, indices, b)
            args = (args[0], _wrapped_around(args[1], args[0].shape), *args[2:])
        return _wrap(self.function(*args, **_unwrap(kwargs)))

    def __getattr__(self, name):  # ufunc.at, .reduce, ...
        method = _EmulatedFunction(getattr(self.function, name))
        method._path = f"{self.__name__}.{name}"
        return method


class _EmulatedNamespace:
    """A module of CuPy's (``cupy``, ``cupy.linalg``, ...) over NumPy's, without the
    names CuPy lacks."""

    def __init__(self, numpy_module, lacks, **own):
        self._numpy = numpy_module
        self._lacks = lacks
        self.__dict__.update(own)

    def __getattr__(self, name):
        if name in self._lacks or name.startswith("_"):
            raise AttributeError(f"module 'cupy' has no attribute {name!r}")
        value = getattr(self._numpy, name)
        if value is np.take:  # CuPy's take wraps an index out of bounds around
            value = functools.partial(np.take, mode="wrap")
        if isinstance(value, type) or not callable(value):
            return value  # dtypes (cupy.float32 is numpy.float32), constants
        return _EmulatedFunction(value)


def emulated_cupy_module():
    """A ``cupy`` module over NumPy (see ``EmulatedCupyArray``)."""

    def asarray(a, dtype=None, order=None, *, blocking=False):
        return EmulatedCupyArray(np.array(_unwrap(a), dtype=dtype, order=order))

    def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
        return np.array(_unwrap(a), order=order)

    cuda = SimpleNamespace(
        Device=_EmulatedDevice,
        runtime=SimpleNamespace(getDeviceCount=lambda: 1),
    )
    return _EmulatedNamespace(
        np,
        CUPY_LACKS,
        ndarray=EmulatedCupyArray,
        asarray=asarray,
        array=asarray,
        asnumpy=asnumpy,
        cuda=cuda,
        linalg=_EmulatedNamespace(np.linalg, CUPY_LINALG_LACKS),
        lib=SimpleNamespace(
            stride_tricks=_EmulatedNamespace(np.lib.stride_tricks, set())
        ),
    )


@pytest.fixture
def emulated_cupy(compile_host, monkeypatch):
    """``device='cuda'`` served by ppto's CuPy backend over ``emulated_cupy_module``
    (one device), each fused kernel evaluated from its tree and each region run by
    its own C as in ``regions_on_the_host``: every operator and generated program
    for CUDA runs its CuPy code path here, meeting CuPy's arrays' behaviours (see
    ``EmulatedCupyArray``). What it cannot check: CuPy's own numerics, and its
    functions' keyword arguments beyond NumPy's."""
    return install_emulated_cupy(compile_host, monkeypatch)


def install_emulated_cupy(compile_host, monkeypatch) -> list:
    """``emulated_cupy`` installed by ``monkeypatch``, compiling by
    ``compile_host``; returns the list of the names of the kernels run."""
    from ppto import api
    from ppto.runtime.backends import _BACKENDS

    regions_on_the_host = install_regions_on_the_host(compile_host, monkeypatch)
    module = emulated_cupy_module()
    monkeypatch.setattr(_BACKENDS["cuda"], "_cupy", module)
    # code lowered for 'cuda:0' binds the backend's xp and is shared by every grad
    # of a function (api._SHARED): kept apart, so that on a machine with a GPU the
    # real CuPy's tests and these never run each other's code
    monkeypatch.setattr(api, "_SHARED", weakref.WeakKeyDictionary())
    monkeypatch.setattr(cuda, "cupy_module", lambda: module)
    for owner in (cuda.CudaElementwise, cuda.CudaReduction):
        monkeypatch.setattr(owner, "kernel", _on_emulated_arrays(owner.kernel))
    launch = CudaRegion.launch

    def launch_on_emulated_arrays(self, arguments, operands):
        return _wrap(launch(self, _unwrap(arguments), operands))

    monkeypatch.setattr(CudaRegion, "launch", launch_on_emulated_arrays)
    return regions_on_the_host


def _on_emulated_arrays(kernel_of):
    """``kernel_of`` (the tree-evaluating stand-in above) for emulated arrays."""

    def kernel(self, arrays):
        run = kernel_of(self, arrays)
        if run is None:
            return None
        return lambda *operands, **options: _wrap(run(*_unwrap(operands), **options))

    return kernel
