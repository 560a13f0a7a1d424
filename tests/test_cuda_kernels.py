"""Fused CuPy kernels (``ppto/fusion/cuda.py``).

Where there is no GPU, the generated CUDA C is still checked for real: nvcc compiles
every kernel's operation for the device in float and double (so it is valid CUDA, with
every function it calls defined there) and compiles the same text a second time as
host code, which runs here on random inputs against NumPy's evaluation of the kernel's
tree. The fused program for a CUDA device is run here too, each kernel evaluated from
its tree, to check what calls what with which operands against finite differences.
With CuPy and a GPU (the ``gpu`` marker) the kernels themselves run.
"""

import ctypes
import functools
import io
import linecache
import re
import shutil

import numpy as np
import pytest

import ppto
from ppto.api import Transformed
from ppto.fusion import cuda
from ppto.fusion.cuda_batch_norm_backward import CudaBatchNormBackward
from ppto.fusion.cuda_label_cross_entropy import CudaLabelCrossEntropy
from ppto.fusion.cuda_regions import CudaRegion, layout
from ppto.fusion.cuda_staged import CudaStaged
from ppto.fusion.kernels import Node, evaluate_numpy
from ppto.runtime.backends import backend_for
from ppto.runtime.device import CPU
from ppto.transform.emit import render_function
from ppto.transform.fuse import fuse_program, implementation_for
from ppto.transform.lower import lower
from tests.conftest import cuda_available
from tests.cuda_emulation import (
    compile_ahead,
    install_emulated_cupy,
    install_regions_on_the_host,
)
from tests.test_golden import central_differences

RULES = ppto.fusion_rules()
CUDA_RULES = [rule for rule in RULES if implementation_for(rule, "cuda") is not None]
# patterns that reduce along an axis: stages of reductions, then the result
STAGED = {"layer_norm", "cross_entropy_from_logits"} | {
    f"{kind}_{axis}"
    for kind in ("softmax", "log_softmax", "logsumexp")
    + ("softmax_backward", "log_softmax_backward")
    for axis in ("last_axis", "axis1")
}
# ppto/fusion/cnn_patterns.py's, over an NHWC image's pixels or its spatial axes
CNN_STAGED = {
    "channel_sum_of_products", "channel_mean_of_squares", "batch_norm_nhwc",
    "batch_norm_relu_nhwc", "batch_norm_maximum_nhwc", "batch_norm_add_relu_nhwc",
    "batch_norm_add_maximum_nhwc", "batch_norm_normalized_nhwc",
    "batch_norm_normalized_relu_nhwc", "batch_norm_normalized_maximum_nhwc",
    "batch_norm_normalized_add_relu_nhwc", "batch_norm_normalized_add_maximum_nhwc",
    "global_pool_of_relu_sum",
    "global_pool_of_relu_op_sum", "batch_norm_variance_backward",
    # ppto/fusion/batch_norm_outputs.py's: stages shared by a kernel per value
    "batch_norm_outputs_nhwc", "batch_norm_relu_outputs_nhwc",
    "batch_norm_maximum_outputs_nhwc", "batch_norm_add_relu_outputs_nhwc",
    "batch_norm_add_maximum_outputs_nhwc", "batch_norm_normalized_outputs_nhwc",
    "batch_norm_normalized_relu_outputs_nhwc",
    "batch_norm_normalized_maximum_outputs_nhwc",
    "batch_norm_normalized_add_relu_outputs_nhwc",
    "batch_norm_normalized_add_maximum_outputs_nhwc",
}  # fmt: skip
STAGED |= CNN_STAGED


def chain(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


def mlp(W1, b1, W2, x):
    h = np.maximum(x @ W1 + b1, 0.0)
    return np.mean((np.tanh(h) @ W2) ** 2)


def gated(x, y):
    mask = x > 0
    return np.sum(np.where(mask, np.sin(x) * y, np.cos(y)) + np.maximum(x, y) ** 2)


def gated_inline(x, y):  # the comparison inside a region
    return np.sum(np.where(x * y > 0, np.sin(x) * y, np.cos(y)) - np.minimum(x, y))


def scaled(x, w):  # w a 0-d array: values and a sum of it alone are not arrays
    v = np.exp(w * w) + w
    return np.sum(np.tanh(x * v + v) * np.exp(-x)) + np.sum(w * w * w)


def softmax_loss(z, y):  # softmax's backward pattern along an axis but the last
    along_last = np.sum(ppto.log_softmax(z, axis=-1) * y)
    return along_last + np.sum(ppto.softmax(z, axis=1) * y)


def angles_and_bases(x, y):  # C's atan2, hypot, fmod, cbrt, exp2, log2 and log10
    radius = np.hypot(x, y) + 0.5
    angle = np.arctan2(y, x) * np.log2(radius) + np.log10(radius) * np.cbrt(x + 3.0)
    return np.sum(angle + np.exp2(-y * y) + np.reciprocal(radius) + np.fmod(x, radius))


WORKLOADS = [
    (chain, [(300,), (300,), (300,)]),
    (mlp, [(4, 3), (3,), (3, 2), (5, 4)]),
    (gated, [(7, 5), (7, 5)]),
    (gated_inline, [(7, 5), (7, 5)]),
    (scaled, [(40,), ()]),
    (softmax_loss, [(3, 4, 5), (3, 4, 5)]),
    (angles_and_bases, [(300,), (300,)]),
]


def fused_for_cuda(function, shapes, dtype="float64"):
    """``(program, fused functions, kernels)`` of ``function``'s gradient fused for a
    CUDA device."""
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    transformed = ppto.grad(function, wrt=tuple(range(len(args))))
    program, _ = transformed.program(transformed.describe(args, args))
    namespace = dict(program.refs.namespace)
    functions, kernels = fuse_program(
        program.functions, namespace, program.value_shapes, "cuda"
    )
    return program, functions, kernels


# batch norm's gradient and cross-entropy's over integer labels have kernels of their
# own (ppto/fusion/cuda_batch_norm_backward.py, cuda_label_cross_entropy.py: their
# patterns' broadcasts back to the image and scatters have no derived form); tested
# in tests/test_cuda_gradient_kernels.py
OWN = {
    f"batch_norm_backward{centred}{masked}{added}_{layout}"
    for centred in ("", "_centred")
    for masked in ("", "_masked", "_masked_tied")
    for added in ("", "_added")
    for layout in ("nhwc", "nchw")
} | {
    f"label_cross_entropy{reduced}{operator}_backward"
    for reduced in ("", "_reduced")
    for operator in ("", "_log_softmax")
}
# two products: a CUDA epilogue follows one (there an elementwise kernel adds the
# products and the bias and takes tanh: __fused_chain_add_tanh)
CPU_ONLY = {"matmul_pair_bias", "matmul_pair_bias_tanh"}


def test_rules_have_cuda_kernels_derived_from_their_patterns():
    # every other built-in rule has a CUDA kernel
    assert CUDA_RULES == [rule for rule in RULES if rule.name not in CPU_ONLY]
    kinds = {rule.name: type(implementation_for(rule, "cuda")) for rule in CUDA_RULES}
    assert {name for name, kind in kinds.items() if kind is CudaStaged} == STAGED
    own = (CudaBatchNormBackward, CudaLabelCrossEntropy)
    assert {name for name, kind in kinds.items() if kind in own} == OWN
    assert set(kinds.values()) == {
        cuda.CudaElementwise,
        cuda.CudaReduction,
        cuda.CudaMatmulEpilogue,
        CudaStaged,
        CudaBatchNormBackward,
        CudaLabelCrossEntropy,
    }
    epilogue = implementation_for(_rule("matmul_add"), "cuda")  # C + dot(A, B)
    assert (epilogue.operands, epilogue.rest) == ([0, 1], [2])
    assert epilogue.epilogue.operation(("f", "f"))[2] == "out = (a1 + a0)"


def test_fusing_for_cuda_uses_only_cuda_kernels():
    for function, shapes in WORKLOADS:
        _, functions, kernels = fused_for_cuda(function, shapes)
        assert kernels, function.__name__
        for name, kernel in kernels.items():
            assert type(kernel).__module__.startswith("ppto.fusion.cuda"), name
        regions = [k for k in kernels.values() if isinstance(k, CudaRegion)]
        fallbacks = {f.name for f in functions if f.name.endswith("_unfused")}
        assert fallbacks == {region.fallback_name for region in regions}
    _, functions, kernels = fused_for_cuda(chain, [(300,)] * 3)
    (region,) = [k for k in kernels.values() if isinstance(k, CudaRegion)]
    # the whole gradient is the region: one elementwise kernel and one sum
    assert render_function(functions[0]).count("__fused") == 1
    assert [name for name, _ in region.outputs] == ["chain", "dx", "dz", "dy"]
    assert len(region.arrays) == 3 and len(region.sums) == 1


def test_a_cuda_region_reads_like_the_statements_it_replaces():
    _, _, kernels = fused_for_cuda(chain, [(300,)] * 3)
    source = kernels["__fused_region_1"].source
    assert "// __fused_region_1: x, y, z (a0, a1, ...) -> chain, dx, dz, dy" in source
    assert "const T v3 = tanh(v2);" in source and "const T v5 = exp(v4);" in source
    summed = source[source.index("// the value summed into chain") :]
    assert "return v6;" in summed and "v13" not in summed  # only what the sum needs


def test_show_grad_shows_the_cuda_code_without_a_gpu():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape) for shape in WORKLOADS[1][1]]
    text = ppto.show_grad(mlp, *args, wrt=(0, 1, 2), fused=True, device="cuda",
                          file=io.StringIO())  # fmt: skip
    assert text.startswith("# operators:")
    assert "__fused_matmul_bias(x, W1, b1)" in text
    assert "// __fused_matmul_bias: cuBLAS's a0 = A @ B, then written over a0" in text
    assert "ElementwiseKernel('T a0', 'T out')\nout = tanh(ppto_maximum<T>(a0," in text
    assert "template <typename T> __host__ __device__ void ppto_fused_region_1(" in text
    gated_args = [rng.standard_normal((7, 5))] * 2
    region = ppto.show_grad(gated, *gated_args, wrt=(0, 1), fused=True,
                            device="cuda", file=io.StringIO())  # fmt: skip
    assert "ppto_maximum(T a, T b)" in region  # the helper a region calls, with it
    on_cpu = ppto.show_grad(mlp, *args, wrt=(0, 1, 2), fused=True, file=io.StringIO())
    assert "ElementwiseKernel" not in on_cpu and "def __fused_region" not in on_cpu
    # a chain of small arrays is written out on the CPU: a kernel would run just that
    assert "t3 = tanh(maximum(t2, 0.0))" in on_cpu and "__fused_chain" not in on_cpu
    assert "the rule's implementation, ppto.fusion.patterns._matmul_bias" in on_cpu
    large = [rng.standard_normal(shape) for shape in [(160, 160), (160,), (160, 2)]]
    large.append(rng.standard_normal((256, 160)))
    on_cpu = ppto.show_grad(mlp, *large, wrt=(0, 1, 2), fused=True, file=io.StringIO())
    assert "ElementwiseKernel" not in on_cpu
    assert (
        "def __fused_chain_maximum_tanh(a0):\n    return np.tanh(np.maximum(a0"
        in on_cpu
    )
    elsewhere = ppto.show_grad(mlp, *args, wrt=(0, 1, 2), fused=True, device="sim",
                               file=io.StringIO())  # fmt: skip
    assert elsewhere.startswith("# backend 'sim' has no fused kernels")


def test_a_cuda_region_runs_for_one_shape_and_one_float_dtype_only():
    f64, f32 = np.ones((4, 3)), np.ones((4, 3), np.float32)
    assert layout([f64, 2.0, np.array(1.5), f64]) == (np.float64, tuple("fwff"))
    assert layout([f32, 1, f32 > 0, True]) == (np.float32, tuple("fwbb"))
    for refused in ([f64, f32], [f64, np.ones(3)], [f64.astype(np.float16)],
                    [f64, np.ones((4, 3), int)], [2.0, 3], [f64, np.ones(3, bool)],
                    [f64 > 0, 2.0]):  # fmt: skip
        assert layout(refused) is None


class CompileException(Exception):
    """Named as CuPy's compiler error is (NVRTC's)."""


class JitifyException(Exception):
    """Named as CuPy's error where jitify compiles a CUB reduction."""


class RefusingCupy:
    """NumPy in CuPy's place, except that every generated kernel fails to compile."""

    error = CompileException

    def __getattr__(self, name):
        return getattr(np, name)

    def ElementwiseKernel(self, *args, **kwargs):
        return self.refusing

    def ReductionKernel(self, *args, **kwargs):
        return self.refusing

    def refusing(self, *args, **options):
        raise self.error("error: identifier is undefined\nmore detail")


@pytest.mark.parametrize("error", [CompileException, JitifyException])
def test_a_kernel_cuda_cannot_compile_runs_unfused_with_a_warning(monkeypatch, error):
    monkeypatch.setattr(RefusingCupy, "error", error)
    monkeypatch.setattr(cuda, "cupy_module", RefusingCupy)
    x, y = np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 2, 4)
    p, q = Node(leaf=0), Node(leaf=1)
    tree = Node("mul", [Node("tanh", [p]), q])
    rows = cuda.CudaReduction("__fused_rows", tree, 2, mean=True, axis=-1)
    kernels = [
        (cuda.CudaElementwise("__fused_e", tree, 2), np.tanh(x) * y),
        (cuda.CudaReduction("__fused_r", tree, 2, mean=True), np.mean(np.tanh(x) * y)),
        (rows, np.mean(np.tanh(x) * y, axis=-1)),
    ]
    for kernel, expected in kernels:
        with pytest.warns(RuntimeWarning, match="did not compile .error: identifier"):
            np.testing.assert_allclose(kernel(x, y), expected, rtol=1e-15)
        assert kernel.failed
        np.testing.assert_allclose(kernel(x, y), expected, rtol=1e-15)  # no retry
    _, _, fused = fused_for_cuda(chain, [(300,)] * 3)
    (region,) = [k for k in fused.values() if isinstance(k, CudaRegion)]
    region.fallback = lambda *arguments: "the statements"
    with pytest.warns(RuntimeWarning, match="__fused_region_1 did not compile"):
        assert region(*[np.ones(300)] * 3) == "the statements"
    assert region.failed


def test_generated_cuda_expressions():
    a0, a1 = Node(leaf=0), Node(leaf=1)
    tree = Node("where", [Node("greater", [a0, Node(value=0.0)]), a1, Node(value=0)])
    assert cuda.expression(tree, ["a0", "a1"]) == "((a0 > ((T)0.0)) ? a1 : ((T)0.0))"
    maximum = Node("maximum", [a0, Node("arctan", [a1])])
    assert cuda.expression(maximum, ["x", "y"]) == "ppto_maximum<T>(x, atan(y))"
    with pytest.raises(cuda.Unsupported):
        cuda.expression(Node("add", [a0, Node(value=float("inf"))]), ["a0", "a1"])


def test_operand_types_c_would_promote_differently_are_refused():
    f32, f64 = np.ones(3, np.float32), np.ones(3)
    assert cuda.operand_kinds([f32, 2.0, np.ones(3, bool)]) == (
        ("f", "w", "b"),
        np.dtype(np.float32),
    )
    for operands in ([f32, f64], [f64, np.ones(3, np.int64)], [1.0, 2.0]):
        with pytest.raises(cuda.Unsupported):
            cuda.operand_kinds(operands)
    p, q, half = Node(leaf=0), Node(leaf=1), Node(value=0.5)
    refused = [
        (Node("add", [p, q]), "bb"),  # NumPy: bool
        (Node("mul", [p, half]), "b"),  # NumPy: float64 whatever T is
        (Node("where", [p, Node(value=1.0), half]), "b"),  # NumPy: float64
        (Node("add", [p, q]), "bw"),
    ]
    for tree, kinds in refused:
        with pytest.raises(cuda.Unsupported):
            cuda.result_kind(tree, kinds)
        with pytest.raises(cuda.Unsupported):
            cuda.CudaElementwise("k", tree, len(kinds)).operation(kinds)
    assert cuda.result_kind(Node("mul", [p, q]), "fb") == "f"
    assert cuda.result_kind(Node("mul", [p, half]), "f") == "f"
    assert cuda.result_kind(Node("less", [p, q]), "ff") == "b"
    with pytest.raises(cuda.Unsupported):  # a constant beyond any float
        cuda.expression(Node("add", [p, Node(value=10**400)]), ["a0"])


def test_kernel_names_are_c_identifiers_whatever_the_rule_is_called():
    for name in ["<lambda>", "my-rule", "__fused_chain_mul_add", "ünïcode"]:
        identifier = cuda.kernel_name(name)
        assert re.fullmatch(r"ppto_[A-Za-z0-9_]*", identifier), identifier
        assert "__" not in identifier


def test_an_epilogue_of_another_type_is_not_written_over_the_product():
    product = np.ones((2, 3))
    positive = cuda.CudaMatmulEpilogue(
        "positive", Node("greater", [Node(leaf=0), Node(value=0.0)]), [0, 1], []
    )
    assert not positive.in_place(product, [])  # a boolean result
    scaled = cuda.CudaMatmulEpilogue(
        "scaled", Node("mul", [Node(leaf=0), Node(leaf=1)]), [0, 1], [2]
    )
    assert scaled.in_place(product, [2.0])
    assert not scaled.in_place(product, [np.ones((4, 2, 3))])  # broadcast larger


def test_operators_one_by_one_give_numpy_values():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 9))
    p, q = Node(leaf=0), Node(leaf=1)
    tree = Node("where", [Node("less", [p, q]), Node("tanh", [p]), Node("abs", [q])])
    np.testing.assert_array_equal(
        cuda.evaluate_with(np, tree, [x, y]), np.where(x < y, np.tanh(x), np.abs(y))
    )


# --- the CUDA C itself, compiled by nvcc ------------------------------------------


def _cases():
    """``(label, kernel, operand kinds)`` of every built-in rule's CUDA kernel and of
    every kernel fusion makes for the workloads above: float operands, and booleans
    where a leaf is a ``where``'s condition (a mask computed before the kernel)."""
    cases = []
    for rule in CUDA_RULES:
        kernel = implementation_for(rule, "cuda")
        if hasattr(kernel, "parts"):  # each sum's map step and the results
            cases += [(f"{rule.name}{n}", p) for n, p in enumerate(kernel.parts())]
            continue
        elementwise = getattr(kernel, "epilogue", None) or getattr(
            kernel, "elementwise", kernel
        )
        cases.append((rule.name, elementwise))
    for function, shapes in WORKLOADS:
        for name, kernel in fused_for_cuda(function, shapes)[2].items():
            if isinstance(kernel, cuda.CudaElementwise):
                cases.append((f"{function.__name__}{name}", kernel))
    for op in ("maximum", "minimum"):  # NumPy's: NaN in, NaN out
        tree = Node(op, [Node(leaf=0), Node(leaf=1)])
        cases.append((f"nan_{op}", cuda.CudaElementwise(op, tree, 2)))
    for op in ("arctan2", "hypot", "fmod"):  # C's functions of two operands
        tree = Node(op, [Node(leaf=0), Node(leaf=1)])
        cases.append((op, cuda.CudaElementwise(op, tree, 2)))
    for op in ("reciprocal", "cbrt", "exp2", "log2", "log10"):
        cases.append((op, cuda.CudaElementwise(op, Node(op, [Node(leaf=0)]), 1)))
    p, q, r = Node(leaf=0), Node(leaf=1), Node(leaf=2)  # a mask times values
    mask = Node("add", [Node("where", [p, q, Node("neg", [q])]), Node("mul", [p, r])])
    cases.append(("mask", cuda.CudaElementwise("mask", mask, 3)))
    return [(label, kernel, _kinds(kernel)) for label, kernel in cases]


def _kinds(kernel) -> tuple:
    conditions = set()

    def walk(node):
        if node.op == "where" and node.children[0].leaf is not None:
            conditions.add(node.children[0].leaf)
        for child in node.children:
            walk(child)

    walk(kernel.tree)
    return tuple("b" if n in conditions else "f" for n in range(kernel.arity))


CASES = _cases()
HARNESS = """
template <typename T> __global__ void device_{n}({params}, {out}* result, long size) {{
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < size) {{ {loads} {out} out; {body}; result[i] = out; }}
}}
template __global__ void device_{n}<float>({float_params}, {float_out}* r, long s);
template __global__ void device_{n}<double>({double_params}, {double_out}* r, long s);
template <typename T> void host_{n}({params}, {out}* result, long size) {{
  for (long i = 0; i < size; ++i) {{ {loads} {out} out; {body}; result[i] = out; }}
}}
extern "C" void host_{n}_float({float_params}, {float_out}* r, long s) {{
  host_{n}<float>({names}, r, s);
}}
extern "C" void host_{n}_double({double_params}, {double_out}* r, long s) {{
  host_{n}<double>({names}, r, s);
}}
"""


def _kernel_source(number: int, kernel, kinds) -> str:
    in_params, out_params, body = kernel.operation(kinds)
    out = out_params.split()[0]
    types = ["bool" if kind == "b" else "T" for kind in kinds]
    pointers = [f"const {t}* p{i}" for i, t in enumerate(types)]
    typed = {
        name: [p.replace("T*", f"{name}*") for p in pointers]
        for name in ("float", "double")
    }
    return HARNESS.format(
        n=number,
        params=", ".join(pointers),
        out=out,
        loads=" ".join(f"const {t} a{i} = p{i}[i];" for i, t in enumerate(types)),
        body=body,
        float_params=", ".join(typed["float"]),
        double_params=", ".join(typed["double"]),
        float_out=out.replace("T", "float"),
        double_out=out.replace("T", "double"),
        names=", ".join(f"p{i}" for i in range(kernel.arity)),
    )


@pytest.fixture(scope="module")
def host_library(compile_host):
    kernels = (_kernel_source(n, k, kinds) for n, (_, k, kinds) in enumerate(CASES))
    return compile_host(cuda.PREAMBLE + "".join(kernels))


def _needs_positive(tree: Node) -> bool:
    ops = set(_ops(tree))
    positive = {"log", "log1p", "log2", "log10", "sqrt", "pow", "div", "arcsin"}
    return bool(ops & (positive | {"arccos", "reciprocal"}))


def _ops(tree: Node):
    if tree.op is not None:
        yield tree.op
    for child in tree.children:
        yield from _ops(child)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "number, label", [(n, label) for n, (label, _, _) in enumerate(CASES)]
)
def test_cuda_kernel_source_computes_what_its_tree_says(
    host_library, number, label, dtype
):
    _, kernel, kinds = CASES[number]
    rng = np.random.default_rng(number)
    low = 0.5 if _needs_positive(kernel.tree) else -1.5
    size = 257
    inputs = [
        rng.uniform(low, 1.5, size).astype(dtype)
        if kind == "f"
        else rng.random(size) > 0.5
        for kind in kinds
    ]
    if label.startswith("nan_"):  # NaN on either side, ties of equal and signed zeros
        inputs[0][:5] = np.nan
        inputs[1][3:8] = np.nan
        inputs[0][10:14] = [-0.0, 0.0, 1.5, 0.0]
        inputs[1][10:14] = [0.0, -0.0, 1.5, 0.0]
    expected = np.asarray(evaluate_numpy(kernel.tree, inputs))
    result = np.empty(size, expected.dtype)
    function = getattr(
        host_library, f"host_{number}_{'float' if dtype == 'float32' else 'double'}"
    )
    pointers = [ctypes.c_void_p(a.ctypes.data) for a in inputs]
    function(*pointers, ctypes.c_void_p(result.ctypes.data), ctypes.c_long(size))
    tolerance = 1e-13 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)
    assert np.array_equal(np.isnan(result), np.isnan(expected))
    if label.startswith("nan_"):
        assert result.tobytes() == expected.tobytes()  # the sign of each zero too


def test_cuda_regions_fallbacks_made_late_are_the_code_lowered_at_once():
    """Lowered for running (``lazy``), a CUDA region's fallback is made when first
    asked for, and is then the function lowering the program at once writes."""
    made = 0
    for function, shapes in WORKLOADS:
        program, _, _ = fused_for_cuda(function, shapes)
        eager = lower(program, backend_for(CPU), "cuda")[0]
        _, namespace = lower(program, backend_for(CPU), "cuda", lazy=True)
        for region in list(namespace.values()):
            if not isinstance(region, CudaRegion):
                continue
            assert region.fallback_name not in namespace  # not made yet
            lines = linecache.getlines(region.fallback.__code__.co_filename)
            assert "".join(lines).startswith(f"def {region.fallback_name}(")
            assert "".join(lines) in eager, function.__name__
            assert namespace[region.fallback_name] is region.fallback
            made += 1
    assert made >= 5


# --- the fused CUDA program, its kernels evaluated from their trees ----------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function, shapes", WORKLOADS, ids=lambda w: str(w)[:20])
def test_programs_fused_for_cuda_give_right_gradients(
    compiled_ahead, regions_on_the_host, function, shapes, dtype
):
    program, _, _ = fused_for_cuda(function, shapes, dtype)
    _, namespace = lower(program, backend_for(CPU), "cuda")
    entry = namespace[program.entry]
    rng = np.random.default_rng(3)
    args = [np.asarray(rng.standard_normal(shape)) for shape in shapes]  # 0-d: array
    value, gradients = entry(*[a.astype(dtype) for a in args])
    assert regions_on_the_host, "no fused kernel ran"
    if function is chain:  # the whole gradient as one region
        assert regions_on_the_host == ["__fused_region_1"]
    if function is gated:  # its first region reads the mask made before it
        assert "__fused_region_1" in regions_on_the_host
    if function is gated_inline:  # the comparison inside the region
        assert any("region" in name for name in regions_on_the_host)
    if function is softmax_loss:  # softmax's backward along axis 1, staged
        assert "__fused_softmax_backward_axis1_1" in regions_on_the_host
    tolerance = 1e-6 if dtype == "float64" else 2e-2
    assert np.shape(value) == () and value.dtype == dtype
    np.testing.assert_allclose(
        value, function(*args), rtol=1e-5 if dtype == "float32" else 1e-12
    )
    for position, gradient in enumerate(gradients):
        expected = central_differences(function, args, position)
        assert np.shape(gradient) == expected.shape, position
        np.testing.assert_allclose(gradient, expected, rtol=tolerance, atol=tolerance)


def masked_scale(x, s):
    mask = x > 0
    t = np.exp(-np.abs(x)) * x + mask * s
    return np.sum(np.cos(t) * x)


@pytest.mark.parametrize("s", [0.7, 2])
def test_a_mask_times_a_python_number_keeps_numpys_type(regions_on_the_host, s):
    """``mask * s`` is float64 in NumPy whatever x's dtype (a bool array with a
    Python number); a region reading the mask with s computed it in x's float32."""
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    transformed = ppto.value_and_grad(masked_scale)
    program, _ = transformed.program(transformed.describe([x, s], [x, s]))
    _, namespace = lower(program, backend_for(CPU), "cuda")
    value, gradient = namespace[program.entry](x, s)
    expected = masked_scale(x, s)
    assert value.dtype == expected.dtype == np.float64
    np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_a_region_handing_on_sums_only_is_valid_cuda(regions_on_the_host):
    """The forward mode of the chain: its region's results are two sums."""
    transformed = Transformed(chain, ["x", "y", "z"], "jvp", with_value=True)
    rng = np.random.default_rng(8)
    primals = [rng.standard_normal(300) for _ in range(3)]
    tangents = [rng.standard_normal(300) for _ in range(3)]
    program, _ = transformed.program(transformed.describe(primals, primals))
    _, namespace = lower(program, backend_for(CPU), "cuda")
    (region,) = [k for k in namespace.values() if isinstance(k, CudaRegion)]
    assert region.arrays == [] and len(region.sums) == 2
    parameters = program.tangent_parameters[program.entry]
    value, tangent = namespace[program.entry](
        *primals, **dict(zip(parameters, tangents))
    )
    assert regions_on_the_host == [region.name]
    expected = ppto.jvp(chain, primals, tangents)
    np.testing.assert_allclose(value, expected[0].numpy(), rtol=1e-12)
    np.testing.assert_allclose(tangent, expected[1].numpy(), rtol=1e-12)


def test_matmul_epilogues_write_over_the_product(kernels_from_trees):
    rng = np.random.default_rng(4)
    A, B, b = (
        rng.standard_normal((5, 4)),
        rng.standard_normal((4, 3)),
        rng.standard_normal(3),
    )
    for name, expected in [
        ("matmul_bias_relu", np.maximum(A @ B + b, 0)),
        ("matmul_bias_sigmoid", 1 / (1 + np.exp(-(A @ B + b)))),
        ("matmul_add", (A @ B) + A @ B),
    ]:
        third = A @ B if name == "matmul_add" else b
        result = implementation_for(_rule(name), "cuda")(A, B, third)
        np.testing.assert_allclose(result, expected, rtol=1e-13)
    assert kernels_from_trees == [
        "__fused_matmul_bias_relu",
        "__fused_matmul_bias_sigmoid",
        "__fused_matmul_add",
    ]


def _rule(name):
    return next(rule for rule in RULES if rule.name == name)


STAGED_RULES = [rule for rule in RULES if rule.name in STAGED]


def _staged_inputs(rule, dtype, eps=None):
    """Inputs of three axes (so that axis 1 is not the last), eps a 0-d array; a CNN
    rule's: NHWC images and per-channel scale and shift."""
    rng = np.random.default_rng(len(rule.name))
    image = (2, 3, 4, 5) if rule.name in CNN_STAGED else (3, 4, 5)
    return [
        np.asarray(1e-3 if eps is None else eps, dtype)
        if name == "eps"
        else rng.standard_normal(
            image[-1:] if name in ("gamma", "beta", "s") else image
        ).astype(dtype)
        for name in rule.parameters
    ]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", STAGED_RULES, ids=[rule.name for rule in STAGED_RULES])
def test_staged_kernels_compute_their_patterns(kernels_from_trees, rule, dtype):
    from tests.test_fusion import values_of

    inputs = _staged_inputs(rule, dtype)
    expected = values_of(rule, rule.pattern(*[ppto.tensor(x) for x in inputs]))
    kernel = implementation_for(rule, "cuda")
    tolerance = 1e-12 if dtype == "float64" else 1e-5
    for result in (kernel(*inputs), kernel.evaluate(np, *inputs)):
        actual = values_of(rule, result)
        assert len(actual) == len(expected)
        for value, wanted in zip(actual, expected):
            assert value.shape == wanted.shape and value.dtype == wanted.dtype
            np.testing.assert_allclose(value, wanted, rtol=tolerance, atol=tolerance)
    # each sum is one reduction kernel (a maximum is cupy.max), then the result's
    assert kernels_from_trees == [part.name for part in kernel.parts()]


def test_staged_kernels_read_like_their_patterns():
    softmax = implementation_for(_rule("softmax_axis1"), "cuda")
    assert [stage.op for stage in softmax.stages] == ["max", "sum"]  # max once
    assert [stage.axis for stage in softmax.stages] == [1, 1]
    assert softmax.result.operation(("f",) * 3)[2] == "out = (exp((a0 - a1)) / a2)"
    listing = implementation_for(_rule("cross_entropy_from_logits"), "cuda").listing()
    assert "cupy.max(a0, axis=-1, keepdims=True)" in listing
    assert "ReductionKernel('T a0, T a1, T a2, T a3', 'T y'), the sum along" in listing
    assert "(a1 * ((a0 - a2) - log(a3)))" in listing  # log-softmax, never stored
    assert "// stage 4 of stage 3 (axis dropped):" in listing
    assert "the sum of, divided by the count" in listing
    assert listing.endswith("// the result, of stage 4 (axis dropped):\nout = (-a0);\n")


def test_staged_kernels_of_other_operand_types_run_unfused(kernels_from_trees):
    rule = _rule("layer_norm")
    x, _ = _staged_inputs(rule, "float32")
    kernel = implementation_for(rule, "cuda")
    # float32 with a float64 number: the result's kernel runs unfused (NumPy's types)
    for eps, fused in ((1e-3, 1), (np.float64(1e-3), 1)):  # (fused calls so far)
        expected = np.asarray(rule.pattern(ppto.tensor(x), eps))
        actual = kernel(x, eps)
        assert actual.dtype == expected.dtype
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
        assert kernels_from_trees.count("__fused_layer_norm") == fused


# --- on a GPU -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", CUDA_RULES, ids=[rule.name for rule in CUDA_RULES])
@pytest.mark.gpu
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
def test_cuda_kernel_of_every_rule_equals_its_pattern_on_the_gpu(rule, dtype):
    import cupy

    from tests.test_fusion import _as_tensors, _inputs, values_of

    inputs = _inputs(rule, np.random.default_rng(11), dtype)
    expected = values_of(rule, rule.pattern(*_as_tensors(inputs)))
    on_gpu = [cupy.asarray(x) if isinstance(x, np.ndarray) else x for x in inputs]
    actual = implementation_for(rule, "cuda")(*on_gpu)
    actual = actual if rule.outputs else (actual,)
    assert len(actual) == len(expected)
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    for value, wanted in zip(actual, expected):
        np.testing.assert_allclose(
            cupy.asnumpy(value), wanted, rtol=tolerance, atol=tolerance
        )


@pytest.mark.parametrize("function, shapes", WORKLOADS, ids=lambda w: str(w)[:20])
@pytest.mark.gpu
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
def test_fused_gradients_on_the_gpu_equal_the_cpu_ones(function, shapes):
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(shape) for shape in shapes]
    wrt = tuple(range(len(args)))
    on_cpu = ppto.grad(function, wrt=wrt)(*args)
    on_gpu = ppto.grad(function, wrt=wrt)(
        *[ppto.tensor(a, device="cuda") for a in args]
    )
    for cpu_gradient, gpu_gradient in zip(on_cpu, on_gpu):
        assert gpu_gradient.device == "cuda:0"
        np.testing.assert_allclose(
            gpu_gradient.numpy(), cpu_gradient.numpy(), rtol=1e-10, atol=1e-12
        )


# --- whole programs on the CUDA device, CuPy emulated over NumPy --------------------


def attention_scores(q, k):  # einsum
    return np.sum(np.tanh(np.einsum("bqd,bkd->bqk", q, k)) ** 2)


def reversed_running_sums(x, w):  # flip, cumsum
    return np.sum(np.cumsum(np.flip(x, axis=1), axis=1) * w)


def picked_log_probabilities(z, w):  # take_along_axis, logaddexp
    labels = np.argmax(w, axis=1)[:, None]
    picked = np.take_along_axis(z, labels, axis=1)
    return np.sum(np.logaddexp(picked, 0.5 * np.sum(w * z, axis=1, keepdims=True)))


def swapped_products(a, b):  # swapaxes, np.dot, vdot
    product = np.dot(np.swapaxes(a, 0, 1), b)
    return np.vdot(product, product) + np.sum(np.exp(-(a * a)))


ON_EMULATED_CUPY = WORKLOADS + [
    (attention_scores, [(2, 3, 4), (2, 5, 4)]),
    (reversed_running_sums, [(3, 6), (3, 6)]),
    (picked_log_probabilities, [(4, 5), (4, 5)]),
    (swapped_products, [(4, 3), (4, 2)]),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "function, shapes", ON_EMULATED_CUPY, ids=lambda w: str(w)[:24]
)
def test_gradients_on_emulated_cupy_match_finite_differences(
    compiled_ahead, emulated_cupy, function, shapes, dtype
):
    rng = np.random.default_rng(8)
    args = [np.asarray(rng.standard_normal(shape)) for shape in shapes]
    on_device = [ppto.tensor(a.astype(dtype), device="cuda") for a in args]
    assert all(type(t.data).__name__ == "EmulatedCupyArray" for t in on_device)
    value, gradients = ppto.value_and_grad(function, wrt=tuple(range(len(args))))(
        *on_device
    )
    if function in (chain, mlp, attention_scores, swapped_products):
        assert emulated_cupy, "no fused CUDA kernel ran"
    tolerance = 1e-6 if dtype == "float64" else 2e-2
    assert value.device == "cuda:0" and value.dtype == dtype
    np.testing.assert_allclose(
        value.numpy(), function(*args), rtol=1e-5 if dtype == "float32" else 1e-12
    )
    for position, gradient in enumerate(gradients):
        assert gradient.device == "cuda:0" and gradient.dtype == dtype
        expected = central_differences(function, args, position)
        np.testing.assert_allclose(
            gradient.numpy(), expected, rtol=tolerance, atol=tolerance
        )


@pytest.fixture(scope="module")
def compiled_ahead(request):
    """The regions' sources of the selected tests of whole programs above (under
    ``regions_on_the_host`` or ``emulated_cupy``), compiled in one nvcc run before
    the first of them (``compile_ahead``: nvcc takes 0.75 s on any source)."""
    tests = {
        test_programs_fused_for_cuda_give_right_gradients: (
            install_regions_on_the_host,
            _run_fused_program,
        ),
        test_gradients_on_emulated_cupy_match_finite_differences: (
            install_emulated_cupy,
            _run_on_emulated_cupy,
        ),
    }
    runs = []
    for item in request.session.items:
        if getattr(item, "callspec", None) and item.function in tests:
            install, run = tests[item.function]
            runs.append((install, functools.partial(run, **item.callspec.params)))
    if runs and shutil.which("nvcc"):  # (those tests skip without it)
        compile_ahead(request.getfixturevalue("compile_host"), runs)


def _run_fused_program(function, shapes, dtype) -> None:
    """The call of ``test_programs_fused_for_cuda_give_right_gradients``."""
    program, _, _ = fused_for_cuda(function, shapes, dtype)
    _, namespace = lower(program, backend_for(CPU), "cuda")
    rng = np.random.default_rng(3)
    args = [np.asarray(rng.standard_normal(shape)) for shape in shapes]  # 0-d: array
    namespace[program.entry](*[a.astype(dtype) for a in args])


def _run_on_emulated_cupy(function, shapes, dtype) -> None:
    """The call of ``test_gradients_on_emulated_cupy_match_finite_differences``."""
    rng = np.random.default_rng(8)
    args = [np.asarray(rng.standard_normal(shape)) for shape in shapes]
    on_device = [ppto.tensor(a.astype(dtype), device="cuda") for a in args]
    ppto.value_and_grad(function, wrt=tuple(range(len(args))))(*on_device)


def test_emulated_cupy_arrays_refuse_what_cupys_refuse(emulated_cupy):
    # what makes the test above meaningful: host-only code meeting a device array
    # fails here as it would on a GPU
    x = ppto.tensor(np.arange(6.0).reshape(2, 3), device="cuda")
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x.data)
    with pytest.raises(TypeError):
        np.matrix_transpose(x.data)  # NumPy 2 has it, CuPy 13 does not
    assert type(np.sum(x.data)).__name__ == "EmulatedCupyArray"  # 0-d, no scalar
    assert np.sum(x.data).shape == ()
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


def overwritten(x, v):  # x[[0, 2, 0]] = ...: NumPy keeps the last write to x[0]
    y = np.copy(x)
    y[np.array([0, 2, 0])] = v * 3.0
    return np.sum(np.sin(y) * x)


def test_a_write_to_a_repeated_index_keeps_the_last_on_cupy(emulated_cupy):
    # CuPy leaves which of several writes to one element lands undefined (its
    # documentation, "Duplicate values in indices"); the emulation lets the first
    # land, where NumPy, and so ppto, keeps the last
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(4), rng.standard_normal(3)]
    on_device = [ppto.tensor(a, device="cuda") for a in args]
    value, gradients = ppto.value_and_grad(overwritten, wrt=(0, 1))(*on_device)
    np.testing.assert_allclose(value.numpy(), overwritten(*args), rtol=1e-12)
    for position, gradient in enumerate(gradients):
        expected = central_differences(overwritten, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-6)
    x = ppto.tensor(np.zeros(3), device="cuda")
    written = ppto.setitem(x, ppto.tensor([1.0, 2.0, 3.0], device="cuda"), [1, 1, 1])
    np.testing.assert_array_equal(written.numpy(), [0.0, 3.0, 0.0])


def _cupy_kernels_of(kernel) -> list:
    """The CuPy kernel objects ``kernel`` makes for float32 and float64 operands
    (booleans where a leaf is a ``where``'s condition)."""
    if isinstance(kernel, CudaStaged):
        stages = [stage.kernel for stage in kernel.stages if stage.kernel is not None]
        results = [value for _, value in kernel.values]  # (each of several values')
        return [k for part in [*stages, *results] for k in _cupy_kernels_of(part)]
    if isinstance(kernel, CudaBatchNormBackward):
        parts = [sum_kernel for sum_kernel, _ in kernel.sums.values()]
        parts += [kernel.gradient, kernel.scale_gradient]
        return [k for part in parts for k in _cupy_kernels_of(part)]
    if isinstance(kernel, CudaLabelCrossEntropy):
        return _cupy_kernels_of(kernel.kernel)
    if isinstance(kernel, cuda.CudaMatmulEpilogue):
        return _cupy_kernels_of(kernel.epilogue)
    kinds = _kinds(getattr(kernel, "elementwise", kernel))
    return [
        kernel.kernel([np.zeros(3, bool if k == "b" else dtype) for k in kinds])
        for dtype in ("float32", "float64")
    ]


def test_cupys_constructors_take_every_generated_kernel():
    # CuPy builds ElementwiseKernel and ReductionKernel objects without a GPU,
    # parsing their parameter lists: every rule's kernels and every region of the
    # programs above, as CuPy would compile them on a GPU
    cupy = pytest.importorskip("cupy")
    made = [
        made
        for rule in CUDA_RULES
        for made in _cupy_kernels_of(implementation_for(rule, "cuda"))
    ]
    assert made and all(
        isinstance(k, (cupy.ElementwiseKernel, cupy.ReductionKernel)) for k in made
    )
    regions = [
        kernel
        for function, shapes in ON_EMULATED_CUPY
        for kernel in fused_for_cuda(function, shapes)[2].values()
        if isinstance(kernel, CudaRegion)
    ]
    assert regions
    for region in regions:
        elementwise, reductions = region.build(("f",) * len(region.inputs))
        assert elementwise is None or isinstance(elementwise, cupy.ElementwiseKernel)
        assert all(isinstance(k, cupy.ReductionKernel) for k in reductions)
