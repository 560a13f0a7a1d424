"""CuPy kernels of batch norm's backward pass and of cross-entropy over integer
labels (``ppto/fusion/cuda_batch_norm_backward.py``,
``cuda_label_cross_entropy.py``), and the CuPy emulation that compiles every kernel
as CuPy would (``tests/cupy_kernels_compiled.py``).

Without a GPU: each kernel equals its rule's CPU implementation with NumPy in
CuPy's place (float64 and float32, odd shapes, repeated and negative indices); the
same kernels compiled by nvcc from the source CuPy would make of them and run on the
host equal them too; whole programs (a batch-norm layer, a classifier over labels)
differentiated on the emulated device match central differences. With CuPy and a
GPU (``gpu``) the kernels run there against the CPU's results.
"""

import functools
import shutil

import numpy as np
import pytest

import ppto
from ppto.fusion import cuda
from ppto.fusion.cuda_batch_norm_backward import CudaBatchNormBackward
from ppto.fusion.cuda_label_cross_entropy import CudaLabelCrossEntropy
from ppto.transform.fuse import implementation_for
from tests.conftest import cuda_available
from tests.cuda_emulation import compile_ahead, install_emulated_cupy
from tests.cupy_kernels_compiled import install_compiled_cupy
from tests.test_fusion import values_of
from tests.test_golden import central_differences


def chain(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
def test_compiled_cupy_runs_generated_kernels_as_cupy_builds_them(compiled_cupy):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(37) for _ in range(3)]
    value, grads = ppto.value_and_grad(chain, wrt=(0, 1, 2))(
        *[ppto.tensor(a, device="cuda") for a in args]
    )
    assert compiled_cupy
    np.testing.assert_allclose(value.numpy(), chain(*args), rtol=1e-12)
    for position, gradient in enumerate(grads):
        expected = central_differences(chain, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-6)


RULES = ppto.fusion_rules()
BATCH_NORM = [r for r in RULES if r.name.startswith("batch_norm_backward")]
LABELS = [r for r in RULES if r.name.startswith("label_cross_entropy")]
# odd sizes: 5 channels, 3 * 5 * 7 pixels
IMAGES = {"nhwc": ((3, 5, 7, 5), (5,)), "nchw": ((3, 5, 7, 9), (1, 5, 1, 1))}
# rows out of order, one twice and one by a negative index; (2, 3) twice, a
# negative label
ROWS, LABELS_OF = np.array([2, 0, 2, -1, 6, 1, 0]), np.array([3, 10, 3, -2, 0, 5, 7])
MATRIX = (7, 11)


def _batch_norm_inputs(rule, dtype, count="int", gamma_shape=None) -> list:
    """Images, per-channel deviation (positive) and scale, the pixel count (a Python
    int, a float or a 0-d array) and, masked, a ReLU's mask (and its ties); by
    parameter name."""
    image, channel = IMAGES[rule.name[-4:]]
    rng = np.random.default_rng(len(rule.name))
    pixels = int(np.prod(image)) // channel[-1 if len(channel) == 1 else 1]
    counts = {"int": pixels, "float": float(pixels), "array": np.asarray(pixels, dtype)}
    values = {
        "deviation": rng.uniform(0.5, 1.5, channel).astype(dtype),
        "gamma": rng.standard_normal(gamma_shape or channel).astype(dtype),
        "count": counts[count],
        "shape": image,
        "condition": rng.standard_normal(image) >= 0.0,
        "tie": rng.standard_normal(image) >= 1.0,  # (np.maximum's: some ties)
    }
    return [
        values[name] if name in values else rng.standard_normal(image).astype(dtype)
        for name in rule.parameters
    ]


def _label_inputs(rule, dtype, rows=ROWS, labels=LABELS_OF) -> list:
    """The gradient of the gathered entries (or the loss's number and the gather's
    shape), the index, the log-probabilities as ``like``, the axis, then the
    exponentials and their row sums, or the log-probabilities."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(MATRIX)
    exps = np.exp(logits - logits.max(axis=1, keepdims=True)).astype(dtype)
    total = exps.sum(axis=1, keepdims=True)
    log_probs = np.log(exps / total)
    if rule.parameters[0] == "loss":
        given = [np.asarray(-1.0 / len(rows), dtype), (len(rows),)]
    else:
        given = [rng.uniform(-1.0, 1.0, len(rows)).astype(dtype)]
    matrix = [log_probs] if rule.parameters[-1] == "log_probs" else [total, exps]
    return [*given, (rows, labels), log_probs, -1, *matrix]


def _unfused(rule, inputs) -> list:
    """The rule's pattern, operator by operator, on the CPU."""
    tensors = [ppto.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]
    return values_of(rule, rule.pattern(*tensors))


def _on_device(module, inputs) -> list:
    """``inputs`` with NumPy arrays (an index's too) as ``module``'s arrays."""
    if module is np:
        return inputs
    return [
        tuple(module.asarray(p) for p in x) if isinstance(x, tuple) and any(
            isinstance(p, np.ndarray) for p in x) else
        module.asarray(x) if isinstance(x, np.ndarray) else x
        for x in inputs
    ]  # fmt: skip


def _host(value) -> np.ndarray:
    return value.get() if hasattr(value, "get") else np.asarray(value)


@pytest.fixture(params=["trees", "compiled"])
def emulation(request):
    """``trees``: NumPy in CuPy's place, each kernel evaluated from its tree;
    ``compiled``: each kernel compiled by nvcc as CuPy builds it and run on the host.
    Returns the names of the kernels run."""
    if request.param == "trees":
        return request.getfixturevalue("kernels_from_trees")
    return request.getfixturevalue("compiled_cupy")


def test_the_rules_have_their_own_cuda_kernels():
    for rule in BATCH_NORM:
        assert type(implementation_for(rule, "cuda")) is CudaBatchNormBackward
    for rule in LABELS:
        assert type(implementation_for(rule, "cuda")) is CudaLabelCrossEntropy
    assert len(BATCH_NORM) == 24 and len(LABELS) == 4


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", BATCH_NORM, ids=[r.name for r in BATCH_NORM])
def test_batch_norm_backward_kernels_equal_the_unfused_pattern(
    compiled_ahead, emulation, rule, dtype
):
    inputs = _batch_norm_inputs(rule, dtype)
    expected = _unfused(rule, inputs)
    kernel = implementation_for(rule, "cuda")
    actual = kernel(*_on_device(cuda.cupy_module(), inputs))
    tolerance = 1e-11 if dtype == "float64" else 3e-5
    assert len(actual) == 3
    for value, wanted in zip(actual, expected):
        value = _host(value)
        assert value.shape == wanted.shape and value.dtype == wanted.dtype
        scale = np.max(np.abs(wanted))
        np.testing.assert_allclose(
            value, wanted, rtol=tolerance, atol=tolerance * scale
        )
    # four sums, dgamma and dx, each once: no other kernel ran
    assert sorted(_named(emulation)) == sorted(_named(p.name for p in kernel.parts()))


def _named(names) -> list:
    """Kernel names as CuPy gets them (``kernels_from_trees`` records ppto's)."""
    return [n if n.startswith("ppto_") else cuda.kernel_name(n) for n in names]


INDICES = {
    "repeated": (ROWS, LABELS_OF),
    "each_row_once": (np.arange(MATRIX[0]), np.array([3, 10, 0, 4, 9, 1, 6])),
    "int32": (ROWS.astype(np.int32), LABELS_OF.astype(np.int32)),
    # rows on the host (generated code's np.arange), labels a list
    "host": (np.arange(MATRIX[0]), np.array([3, 10, 0, 4, 9, 1, 6])),
}


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.parametrize("index", INDICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", LABELS, ids=[r.name for r in LABELS])
def test_label_cross_entropy_kernels_equal_the_unfused_pattern(
    compiled_ahead, emulation, rule, dtype, index
):
    inputs = _label_inputs(rule, dtype, *INDICES[index])
    expected = _unfused(rule, inputs)
    kernel = implementation_for(rule, "cuda")
    actual = _host(kernel(*_label_arguments_on_device(rule, inputs, index)))
    tolerance = 1e-13 if dtype == "float64" else 2e-6
    assert actual.shape == expected[0].shape and actual.dtype == expected[0].dtype
    np.testing.assert_allclose(actual, expected[0], rtol=tolerance, atol=tolerance)
    # one generated kernel (the softmax part); the scatters are CuPy's add.at
    assert _named(emulation) == _named([kernel.kernel.name])


def _label_arguments_on_device(rule, inputs, index) -> list:
    on_device = _on_device(cuda.cupy_module(), inputs)
    if index == "host":
        rows, labels = INDICES[index]
        on_device[rule.parameters.index("index")] = (rows, labels.tolist())
    return on_device


@pytest.mark.parametrize("rule", LABELS[:2], ids=[r.name for r in LABELS[:2]])
def test_label_kernels_refuse_an_index_out_of_bounds_as_numpy(compiled_cupy, rule):
    # (CuPy would wrap it around: the unfused code refuses it, so does the kernel)
    inputs = _label_inputs(rule, "float64", ROWS, np.where(ROWS == 6, 11, LABELS_OF))
    kernel = implementation_for(rule, "cuda")
    with pytest.raises(IndexError, match="index 11 is out of bounds for axis 1"):
        kernel(*_on_device(cuda.cupy_module(), inputs))


def test_other_types_and_shapes_run_the_patterns_operators(compiled_cupy):
    module = cuda.cupy_module()
    rule = next(r for r in BATCH_NORM if r.name == "batch_norm_backward_nhwc")
    inputs = _batch_norm_inputs(rule, "float32")
    inputs[2] = inputs[2].astype("float64")  # a float64 deviation: NumPy's types
    expected = _unfused(rule, inputs)
    actual = implementation_for(rule, "cuda")(*_on_device(module, inputs))
    assert [_host(v).dtype for v in actual] == ["float32", "float64", "float64"]
    for value, wanted in zip(actual, expected):
        assert _host(value).dtype == wanted.dtype
        np.testing.assert_allclose(_host(value), wanted, rtol=1e-5, atol=1e-5)
    assert compiled_cupy == []  # no kernel of the rule's
    rule = next(r for r in LABELS if r.name == "label_cross_entropy_backward")
    inputs = _label_inputs(rule, "float64")
    inputs[0] = inputs[0].astype("float32")  # float32 gradients, float64 matrix
    expected = _unfused(rule, inputs)
    actual = implementation_for(rule, "cuda")(*_on_device(module, inputs))
    np.testing.assert_allclose(_host(actual), expected[0], rtol=1e-13, atol=1e-13)
    assert compiled_cupy == []


# --- whole programs on the emulated device ------------------------------------------


def batch_norm_layer(x, g, b):  # NHWC, the ReLU's mask folded into the rule
    m = np.mean(x, axis=(0, 1, 2))
    v = np.mean((x - m) ** 2, axis=(0, 1, 2))
    y = np.maximum(g * (x - m) / np.sqrt(v + 1e-5) + b, 0.0)
    return np.sum(np.tanh(y) * y)


def batch_norm_layer_nchw(x, g, b):  # the input read again: its gradient added
    c = x - np.mean(x, axis=(0, 2, 3), keepdims=True)
    y = g * c / np.sqrt(np.mean(c**2, axis=(0, 2, 3), keepdims=True) + 1e-3) + b
    return np.sum(np.sin(y) * x)


def classifier(W, b, x, labels):  # softmax cross-entropy of a linear layer
    logits = x @ W + b
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def classifier_log_softmax(W, b, x, labels):  # rows twice, summed
    log_probs = ppto.log_softmax(np.tanh(x @ W + b), axis=1)
    return -np.sum(log_probs[ROWS, labels])


PROGRAMS = {  # the function, its arguments' shapes (labels last) and its rule
    "batch_norm_layer": (
        batch_norm_layer,
        [(3, 5, 7, 5), (5,), (5,)],
        "batch_norm_backward_masked_tied_nhwc",
    ),
    "batch_norm_layer_nchw": (
        batch_norm_layer_nchw,
        [(3, 5, 7, 9), (1, 5, 1, 1), (1, 5, 1, 1)],
        "batch_norm_backward_centred_added_nchw",
    ),
    "classifier": (
        classifier,
        [(6, 11), (11,), (7, 6)],
        "label_cross_entropy_reduced_backward",
    ),
    "classifier_log_softmax": (
        classifier_log_softmax,
        [(6, 11), (11,), (7, 6)],
        "label_cross_entropy_reduced_log_softmax_backward",
    ),
}


def _program_arguments(shapes, labelled: bool) -> list:
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(shape) for shape in shapes]
    if labelled:
        args.append(LABELS_OF)
    return args


def _program_on_device(program, dtype) -> tuple:
    """``(the arguments, wrt, the arguments on the device in dtype)``."""
    _, shapes, _ = PROGRAMS[program]
    args = _program_arguments(shapes, program.startswith("classifier"))
    on_device = [
        ppto.tensor(a if a.dtype.kind == "i" else a.astype(dtype), device="cuda")
        for a in args
    ]
    return args, tuple(range(len(shapes))), on_device


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("emulator", ["emulated_cupy", "compiled_cupy"])
@pytest.mark.parametrize("program", PROGRAMS)
def test_programs_on_the_emulated_device_match_finite_differences(
    compiled_ahead, request, program, emulator, dtype
):
    ran = request.getfixturevalue(emulator)
    function, _, rule_name = PROGRAMS[program]
    args, wrt, on_device = _program_on_device(program, dtype)
    value, gradients = ppto.value_and_grad(function, wrt=wrt)(*on_device)
    rule = next(r for r in RULES if r.name == rule_name)
    parts = _named(p.name for p in implementation_for(rule, "cuda").parts())
    assert set(parts) <= set(_named(ran)), "the rule's kernels did not run"
    assert value.device == "cuda:0" and value.dtype == dtype
    np.testing.assert_allclose(
        value.numpy(), function(*args), rtol=1e-12 if dtype == "float64" else 1e-5
    )
    tolerance = 1e-6 if dtype == "float64" else 2e-2
    for position, gradient in zip(wrt, gradients):
        assert gradient.device == "cuda:0" and gradient.dtype == dtype
        expected = central_differences(function, args, position)
        scale = max(1.0, np.max(np.abs(expected)))
        np.testing.assert_allclose(
            gradient.numpy(), expected, rtol=tolerance, atol=tolerance * scale
        )


@pytest.fixture(scope="module")
def compiled_ahead(request):
    """The sources of the selected tests above that nvcc compiles (under
    ``compiled_cupy``, and the regions' under ``emulated_cupy``), compiled in one
    nvcc run before the first of them (``compile_ahead``: nvcc takes 0.75 s on any
    source; their 238 sources took 180 s one by one, 10 s together)."""
    tests = {
        test_batch_norm_backward_kernels_equal_the_unfused_pattern: _run_batch_norm,
        test_label_cross_entropy_kernels_equal_the_unfused_pattern: _run_label,
        test_programs_on_the_emulated_device_match_finite_differences: _run_program,
    }
    installs = {  # by the emulation's parameter (none for "trees": no nvcc)
        "compiled": install_compiled_cupy,
        "compiled_cupy": install_compiled_cupy,
        "emulated_cupy": install_emulated_cupy,
    }
    runs = []
    for item in request.session.items:
        params = getattr(item, "callspec", None) and dict(item.callspec.params)
        if params and item.function in tests:
            emulation = params.pop("emulation", None) or params.pop("emulator")
            if emulation in installs:
                call = functools.partial(tests[item.function], **params)
                runs.append((installs[emulation], call))
    if runs and shutil.which("nvcc"):  # (those tests skip without it)
        compile_ahead(request.getfixturevalue("compile_host"), runs)


def _run_batch_norm(rule, dtype) -> None:
    """The kernel call of ``test_batch_norm_backward_kernels_equal_...``."""
    inputs = _batch_norm_inputs(rule, dtype)
    implementation_for(rule, "cuda")(*_on_device(cuda.cupy_module(), inputs))


def _run_label(rule, dtype, index) -> None:
    """The kernel call of ``test_label_cross_entropy_kernels_equal_...``."""
    inputs = _label_inputs(rule, dtype, *INDICES[index])
    implementation_for(rule, "cuda")(*_label_arguments_on_device(rule, inputs, index))


def _run_program(program, dtype) -> None:
    """The call of ``test_programs_on_the_emulated_device_match_...``."""
    _, wrt, on_device = _program_on_device(program, dtype)
    ppto.value_and_grad(PROGRAMS[program][0], wrt=wrt)(*on_device)


# --- what the compiled emulation refuses, as CuPy would -----------------------------


def test_compiled_cupy_refuses_kernels_cupy_could_not_compile(compiled_cupy):
    from tests.cupy_kernels_compiled import CompileException

    module = cuda.cupy_module()
    x = module.asarray(np.linspace(-1.0, 1.0, 9))
    # the operation calls a function nothing defines: nvcc (as NVRTC) refuses it
    undefined = module.ElementwiseKernel("T a0", "T out", "out = ppto_f(a0)", "k")
    with pytest.raises(CompileException, match="ppto_f"):
        undefined(x)
    # a host-only function called on the device
    host_only = "double twice(double v) { return 2 * v; }\n"
    on_host = module.ElementwiseKernel(
        "T a0", "T out", "out = twice(a0)", "k2", preamble=host_only
    )
    with pytest.raises(CompileException):
        on_host(x)
    # a map step reading a name CuPy's reduction does not declare
    reduction = module.ReductionKernel("T a0", "T y", "a0 * _k", "a + b", "y = a", "0")
    with pytest.raises(CompileException):
        reduction(x)
    with pytest.raises(ValueError, match="'i' as a parameter"):
        module.ElementwiseKernel("T i", "T out", "out = i", "k3")
    with pytest.raises(TypeError, match="mismatched"):  # T float64 and float32
        module.ElementwiseKernel("T a0, T a1", "T out", "out = a0 + a1", "k4")(
            x, x.astype(np.float32)
        )
    # ppto's own kernel whose C does not compile: a warning and the unfused route
    tree = cuda.Node("tanh", [cuda.Node(leaf=0)])
    broken = cuda.CudaElementwise("__fused_broken", tree, 1)
    broken.operation = lambda kinds: ("T a0", "T out", "out = tanhh(a0)")
    with pytest.warns(RuntimeWarning, match="__fused_broken did not compile"):
        result = broken(x)
    np.testing.assert_allclose(_host(result), np.tanh(_host(x)), rtol=1e-15)


def test_the_tree_emulation_alone_would_pass_that_kernel(kernels_from_trees):
    # why compiled_cupy exists: evaluated from its tree, C that cannot compile runs
    tree = cuda.Node("tanh", [cuda.Node(leaf=0)])
    broken = cuda.CudaElementwise("__fused_broken", tree, 1)
    broken.operation = lambda kinds: ("T a0", "T out", "out = tanhh(a0)")
    x = np.linspace(-1.0, 1.0, 9)
    np.testing.assert_allclose(broken(x), np.tanh(x), rtol=1e-15)
    assert kernels_from_trees == ["__fused_broken"]


# --- on a GPU -----------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rule", BATCH_NORM + LABELS, ids=lambda r: r.name)
def test_the_kernels_equal_the_unfused_pattern_on_the_gpu(rule, dtype):
    import cupy

    if rule in BATCH_NORM:
        inputs = _batch_norm_inputs(rule, dtype)
    else:
        inputs = _label_inputs(rule, dtype)
    expected = _unfused(rule, inputs)
    actual = implementation_for(rule, "cuda")(*_on_device(cupy, inputs))
    actual = actual if isinstance(actual, tuple) else (actual,)
    tolerance = 1e-11 if dtype == "float64" else 3e-5
    for value, wanted in zip(actual, expected):
        assert isinstance(value, cupy.ndarray) and value.dtype == wanted.dtype
        scale = max(1.0, np.max(np.abs(wanted)))
        np.testing.assert_allclose(
            cupy.asnumpy(value), wanted, rtol=tolerance, atol=tolerance * scale
        )


@pytest.mark.gpu
@pytest.mark.filterwarnings("error::RuntimeWarning")  # a kernel that did not compile
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("program", PROGRAMS)
def test_programs_on_the_gpu_match_finite_differences(program):
    function, shapes, _ = PROGRAMS[program]
    args = _program_arguments(shapes, program.startswith("classifier"))
    wrt = tuple(range(len(shapes)))
    on_device = [ppto.tensor(a, device="cuda") for a in args]
    value, gradients = ppto.value_and_grad(function, wrt=wrt)(*on_device)
    np.testing.assert_allclose(value.numpy(), function(*args), rtol=1e-12)
    for position, gradient in zip(wrt, gradients):
        assert gradient.device == "cuda:0"
        expected = central_differences(function, args, position)
        scale = max(1.0, np.max(np.abs(expected)))
        np.testing.assert_allclose(
            gradient.numpy(), expected, rtol=1e-6, atol=1e-6 * scale
        )
