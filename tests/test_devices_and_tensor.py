"""Devices, tensor construction and the Tensor surface (NumPy interoperation)."""

import io

import numpy as np
import pytest

import ppto


def test_device_parsing_and_equality():
    assert ppto.Device("cuda") == "cuda:0"
    assert ppto.Device("cuda:1").kind == "cuda" and ppto.Device("cuda:1").index == 1
    assert str(ppto.Device("cpu")) == "cpu"
    assert ppto.Device("sim:1") != "sim:0"
    assert len({ppto.Device("cpu"), ppto.Device("cpu")}) == 1


def test_a_device_hashes_as_the_string_it_equals_and_its_index_is_checked():
    # Device("cuda") == "cuda:0" but hashed otherwise, so {dev: ...}["cuda:0"]
    # was a KeyError; Device(kind, index) took any index: Device("cpu", 3) printed
    # as "cpu" but was not equal to it, Device("cuda", "1") held the string "1"
    assert {ppto.Device("cuda"): 1}["cuda:0"] == 1
    assert "sim:1" in {ppto.Device("sim", 1)} and ppto.Device("sim", 1) in {"sim:1"}
    assert ppto.Device("cuda", np.int64(2)).index == 2
    for kind, index in (("cpu", 3), ("cuda", -1), ("cuda", "1"), ("cuda", True)):
        with pytest.raises(ppto.DeviceError, match="index|one CPU device"):
            ppto.Device(kind, index)


def test_tensors_and_devices_deep_copy_and_pickle():
    # copy.deepcopy(tensor) (keeping the best weights) and pickle raised
    # "Device is immutable": the default rebuilding set a Device's attributes
    import copy
    import pickle

    t = ppto.tensor([1.0, 2.0], device="sim:1")
    for copied in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert copied.device == "sim:1" and copied.data is not t.data
        np.testing.assert_array_equal(copied.numpy(), [1.0, 2.0])
    assert pickle.loads(pickle.dumps(ppto.Device("cuda"))) == "cuda:0"


@pytest.mark.parametrize("spec", ["cuda:x", "", "cpu:3", "gpu!"])
def test_malformed_device_strings_are_refused(spec):
    with pytest.raises(ppto.DeviceError):
        ppto.Device(spec)


def test_unknown_device_names_the_known_kinds():
    with pytest.raises(
        ppto.DeviceError, match="unknown device 'tpu:0'.*register_backend"
    ):
        ppto.tensor([1.0], device="tpu")


def test_missing_device_index_is_refused():
    with pytest.raises(ppto.DeviceError, match="sim:5.*2 device"):
        ppto.tensor([1.0], device="sim:5")


def test_tensor_dtype_follows_numpy():
    assert ppto.tensor(1.5).dtype == np.float64
    assert ppto.tensor([1, 2]).dtype == np.int64
    assert ppto.tensor([1, 2], dtype="float32").dtype == np.float32
    assert ppto.tensor([True]).dtype == np.bool_


@pytest.mark.parametrize(
    "data, pattern",
    [
        (np.array(["a", "b"]), "strings"),
        (np.array([object(), 1], dtype=object), "convert the data"),
        (np.array([1 + 2j]), "complex"),
    ],
)
def test_unsupported_dtypes_are_refused(data, pattern):
    with pytest.raises(ppto.DTypeError, match=pattern):
        ppto.tensor(data)


@pytest.mark.parametrize("call, name", [
    (lambda: ppto.tensor([300], dtype=np.uint8), "ppto.tensor"),
    (lambda: ppto.full((2,), -1, dtype="uint8"), "ppto.full"),
    (lambda: ppto.tensor([1]) + 2**70, "ppto.add"),
    (lambda: ppto.tensor([1], dtype=np.uint8) * 300, "ppto.mul"),
])  # fmt: skip
def test_integers_beyond_the_dtype_are_a_dtype_error(call, name):
    # NumPy 2's OverflowError came out raw from ppto.tensor, full and operators
    with pytest.raises(ppto.DTypeError, match=rf"{name}: Python int"):
        call()


def test_a_constructor_given_device_0_does_not_make_it_on_the_cpu():
    # device=0 (PyTorch's spelling of the first GPU) was falsy, so zeros(2,
    # device=0) silently made a CPU tensor; ppto.tensor refused it
    for make in (ppto.zeros, ppto.ones, lambda *a, **k: ppto.eye(2, **k)):
        with pytest.raises(ppto.DeviceError, match="got 0 of type int"):
            make(2, device=0)


def test_ragged_lists_are_refused_with_a_hint():
    with pytest.raises(ppto.ShapeError, match="rectangular"):
        ppto.tensor([[1.0, 2.0], [3.0]])


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x: ppto.add([1.0, [2.0, 3.0]], x), ppto.ShapeError, "rectangular"),
    (lambda x: ppto.cast(x, "complex128"), ppto.DTypeError, "complex"),
    (lambda x: x.astype(str), ppto.DTypeError, "strings"),
    (lambda x: ppto.cast(x, "no such dtype"), ppto.DTypeError, "not a dtype"),
    (lambda x: ppto.zeros_like(x, dtype=complex), ppto.DTypeError, "zeros_like"),
    (lambda x: np.ones_like(x, dtype="complex64"), ppto.DTypeError, "ones_like"),
    (lambda x: ppto.full_like(x, 1.0, dtype="U3"), ppto.DTypeError, "full_like"),
    (lambda x: bool(x), ppto.ShapeError, "ambiguous"),
])  # fmt: skip
def test_operators_refuse_data_and_dtypes_tensors_cannot_hold(call, error, pattern):
    # a ragged list was a raw NumPy ValueError, and the dtypes made complex or
    # string tensors (which ppto.tensor refuses), bool() a raw ValueError
    with pytest.raises(error, match=pattern):
        call(ppto.tensor([1.0, 2.0]))


def test_tensor_copies_its_data():
    data = np.ones(3)
    t = ppto.tensor(data)
    data[0] = 5.0
    assert t.numpy()[0] == 1.0


def test_np_array_of_a_tensor_is_a_copy_and_np_asarray_may_share():
    # np.array(t) passes copy=True to __array__ and trusts it: the tensor's own
    # memory came back, so writing to the "copy" changed the tensor
    t = ppto.tensor([1.0, 2.0, 3.0])
    for copied in (np.array(t), np.array(t, dtype=np.float64), np.array(t, copy=True)):
        copied[0] = 99.0
    assert t.numpy()[0] == 1.0
    assert np.shares_memory(np.asarray(t), np.array(t, copy=False))
    with pytest.raises(ppto.DTypeError, match="copy=False.*float64, not float32"):
        np.array(t, dtype=np.float32, copy=False)
    with pytest.raises(ppto.DeviceError, match="copy=False.*on sim:0"):
        np.array(ppto.tensor([1.0], device="sim"), copy=False)


def test_the_tensor_class_called_as_pytorch_spells_it_makes_a_tensor():
    # ppto.Tensor([1.0, 2.0]) kept the list (.shape and repr raised
    # AttributeError) and ppto.Tensor(data, "sim") kept the device as a string
    made = ppto.Tensor([1.0, 2.0])
    assert made.shape == (2,) and made.dtype == np.float64
    assert repr(made) == "Tensor([1., 2.], device='cpu', dtype=float64)"
    on_sim = ppto.Tensor(np.ones(2), "sim")
    assert isinstance(on_sim.device, ppto.Device) and on_sim.device.kind == "sim"
    with pytest.raises(ppto.DTypeError, match="strings"):
        ppto.Tensor("ab")
    # ppto.Tensor(t) held the tensor t as its array, and so did the results of
    # operators on it: their .data was no array
    source = ppto.tensor([1.0, 2.0], device="sim")
    made = ppto.Tensor(source)
    assert isinstance(made.data, np.ndarray) and made.device == "sim:0"
    assert isinstance((made + 1.0).data, np.ndarray)
    # ppto.Tensor(np_array) shared the user's array (writes to the tensor
    # changed it) and took dtypes no tensor holds
    values = np.zeros(3)
    ppto.Tensor(values)[0] = 5.0
    np.testing.assert_array_equal(values, np.zeros(3))
    with pytest.raises(ppto.DTypeError, match="complex"):
        ppto.Tensor(np.array([1j]))


def test_tensor_surface():
    t = ppto.tensor(np.arange(6.0).reshape(2, 3), device="sim")
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6
    assert t.device == "sim:0"
    assert t.T.shape == (3, 2)
    assert t.to("cpu").device == "cpu"
    assert t[1, 2].item() == 5.0
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(t.sum(axis=0).numpy(), [3.0, 5.0, 7.0])
    assert t.mean().item() == 2.5
    assert t.reshape(3, 2).shape == (3, 2)
    assert t.transpose(1, 0).shape == (3, 2)
    assert t.max().item() == 5.0
    assert float(ppto.tensor([2.5])) == 2.5
    assert len(t) == 2
    assert [row.shape for row in t] == [(3,), (3,)]
    with pytest.raises(TypeError, match="0-d"):  # (it iterated over nothing)
        list(ppto.tensor(2.5))


def test_format_spec_membership_and_truth_value_as_numpy():
    # f"{loss:.4f}" raised TypeError (the first print of a training loop), `in`
    # compared whole rows and raised, and the truth-value error suggested an
    # .any() that tensors do not have
    loss = ppto.tensor([[1.0, 2.0], [3.0, 4.5]], device="sim")
    assert f"{loss.sum():.3f}" == "10.500" and f"{ppto.tensor(3):>3d}" == "  3"
    assert f"{loss}" == str(loss)
    with pytest.raises(ppto.ShapeError, match=r"'.2f'.*shape \(2, 2\)"):
        f"{loss:.2f}"
    assert 4.5 in loss and 5.0 not in loss and 1.0 not in ppto.tensor([])
    with pytest.raises(ppto.ShapeError, match=r"x\.any\(\), x\.all\(\)"):
        bool(loss)
    assert bool(loss.any()) and not bool((loss > 4.0).all())  # (the hint works)


def test_any_all_tolist_and_clip_keywords_as_numpy():
    # .any() / .all() / .tolist() were missing (AttributeError), and
    # x.clip(min=0) (NumPy 2's and PyTorch's keyword) a raw TypeError
    x = ppto.tensor([[0.0, 2.0], [np.nan, 0.0]], device="sim")
    values = np.array([[0.0, 2.0], [np.nan, 0.0]])
    for axis in (None, 0, 1):
        for method in ("any", "all"):
            got = getattr(x, method)(axis=axis, keepdims=True)
            expected = getattr(values, method)(axis=axis, keepdims=True)
            assert got.device == "sim:0" and got.dtype == np.bool_
            np.testing.assert_array_equal(got.numpy(), expected)
    assert not bool(ppto.tensor([]).any()) and bool(ppto.tensor([]).all())
    assert ppto.tensor([[1, 2]], device="sim").tolist() == [[1, 2]]
    y = ppto.tensor([-1.0, 0.5, 3.0])
    np.testing.assert_array_equal(y.clip(min=0.0, max=1.0).numpy(), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(y.clip(a_max=1.0).numpy(), [-1.0, 0.5, 1.0])
    with pytest.raises(ppto.PptoError, match="twice or a keyword"):
        y.clip(0.0, low=1.0)


def test_sort_method_sorts_the_tensor_in_place_as_ndarray_sort():
    # x.sort() was an AttributeError (ndarrays sort themselves in place)
    values = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    for axis in (-1, 0, 1):
        x = ppto.tensor(values, device="sim")
        assert x.sort(axis=axis) is None
        assert x.device == "sim:0" and x.shape == values.shape
        np.testing.assert_array_equal(x.numpy(), np.sort(values, axis))
    with pytest.raises(ppto.PptoError, match="np.sort\\(x, axis=None\\)"):
        ppto.tensor(values).sort(axis=None)  # (ndarray.sort refuses it too)


def test_sort_in_place_writes_through_views_as_other_writes_do():
    # x.sort() took new memory: a row of a matrix sorted in place left the matrix
    # as it was, and a view (x.T) of a sorted tensor kept the old order, where
    # NumPy's sort writes into the array's memory
    values = np.array([[3.0, 1.0, 2.0], [9.0, 7.0, 8.0]])
    x = ppto.tensor(values)
    row = x[0]
    row.sort()
    np.testing.assert_array_equal(x.numpy(), [[1.0, 2.0, 3.0], [9.0, 7.0, 8.0]])
    transposed = x.T
    x.sort(axis=1)
    np.testing.assert_array_equal(
        transposed.numpy(), [[1.0, 7.0], [2.0, 8.0], [3.0, 9.0]]
    )


def test_arithmetic_and_comparisons_dispatch_to_operators():
    a = ppto.tensor([1.0, 2.0, 3.0])
    b = ppto.tensor([3.0, 2.0, 1.0])
    np.testing.assert_allclose((a + b * 2 - 1 / a).numpy(), [6.0, 5.5, 4 + 2 / 3])
    np.testing.assert_allclose((-a).numpy(), [-1.0, -2.0, -3.0])
    np.testing.assert_allclose((2**a).numpy(), [2.0, 4.0, 8.0])
    np.testing.assert_array_equal((a > b).numpy(), [False, False, True])
    np.testing.assert_array_equal((a == b).numpy(), [False, True, False])
    assert (a @ b).item() == 10.0


def test_numpy_functions_on_tensors_run_ppto_operators_on_the_tensor_device():
    x = ppto.tensor([[1.0, 2.0], [3.0, 4.0]], device="sim")
    for result in (np.exp(x), np.sum(x, axis=1), np.maximum(x, 2.0), x + np.ones(2)):
        assert isinstance(result, ppto.Tensor) and result.device == "sim:0"
    np.testing.assert_allclose(np.sum(x, axis=1).numpy(), [3.0, 7.0])
    np.testing.assert_allclose(
        np.clip(x, a_min=1.5, a_max=3.5).numpy(), [[1.5, 2], [3, 3.5]]
    )
    np.testing.assert_allclose(np.concatenate([x, x]).numpy().shape, (4, 2))
    parts = np.split(ppto.tensor(np.arange(6.0)), 3)
    assert [p.shape for p in parts] == [(2,), (2,), (2,)]
    assert type(parts) is list  # as NumPy's (ppto.split's own parts: a tuple)
    assert type(np.array_split(ppto.tensor(np.arange(5.0)), 2)) is list
    assert np.shape(x) == (2, 2) and np.ndim(x) == 2


def test_numpy_function_without_operator_names_it():
    with pytest.raises(ppto.PptoError, match="np.fft|np.nancumprod|no ppto operator"):
        np.nancumprod(ppto.tensor([1.0, 2.0]))


def test_numpy_dot_on_tensors_is_numpy_dot_or_refused():
    # np.dot and .dot of 3-d tensors ran as np.matmul: a silently different value
    a, b = np.arange(12.0).reshape(2, 2, 3), np.arange(12.0).reshape(2, 3, 2)
    for product in (lambda: np.dot(ppto.tensor(a), b), lambda: ppto.tensor(a).dot(b)):
        with pytest.raises(ppto.PptoError, match="np.dot of a 3-d and a 3-d array"):
            product()
    with pytest.raises(ppto.PptoError, match="0-d operand is a product"):
        np.dot(ppto.tensor(a), 2.0)
    matrix, vector = np.arange(6.0).reshape(3, 2), np.arange(3.0)
    for left, right in ((a, matrix), (vector, b), (matrix.T, vector)):
        np.testing.assert_allclose(
            np.dot(ppto.tensor(left), ppto.tensor(right)).numpy(), np.dot(left, right)
        )
        np.testing.assert_allclose(
            ppto.tensor(left).dot(right).numpy(), left.dot(right)
        )


def test_numpy_einsum_on_tensors_counts_its_arrays():
    """np.einsum of two tensors is ppto.einsum and of one is ppto's one-operand
    einsum (a transpose written 'ij->ji' said only "ppto.einsum is missing
    argument(s) ['b']"); three arrays are refused by count."""
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(
        np.einsum("ij,jk->ik", ppto.tensor(a), b).numpy(), np.einsum("ij,jk", a, b)
    )
    transposed = np.einsum("ij->ji", ppto.tensor(a))
    assert isinstance(transposed, ppto.Tensor)
    np.testing.assert_array_equal(transposed.numpy(), a.T)
    with pytest.raises(ppto.ShapeError, match="ppto.einsum takes 2 arrays"):
        np.einsum("ij,jk,kl->il", ppto.tensor(a), b, b.T)


def test_numpy_average_on_tensors_reads_numpys_positions_and_refuses_bad_weights():
    x, w = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 0.5])
    for call in (
        lambda a: np.average(a, 1, w),
        lambda a: np.average(a, axis=1, weights=w, keepdims=True),
        lambda a: np.average(a, weights=np.outer([1.0, 3.0], w)),
        lambda a: np.average(a, 0),
        np.average,
    ):
        np.testing.assert_allclose(np.asarray(call(ppto.tensor(x))), call(x))
    refused = [
        (lambda a: np.average(a, weights=w), "with axis=None"),
        (lambda a: np.average(a, 0, w), "3 weights along axis 0"),
        (lambda a: np.average(a, 1, w[None]), r"shape \(1, 3\)"),
        (lambda a: ppto.average(a, 1, w, False, True), "at most 4 positional"),
    ]
    for call, message in refused:
        with pytest.raises(ppto.PptoError, match=message):
            call(ppto.tensor(x))
    with pytest.raises(ppto.PptoError, match="weights sum to zero along axis=1"):
        np.average(ppto.tensor(x), 1, np.array([1.0, -1.0, 0.0]))


def average_along_rows(x, w):
    return np.sum(ppto.average(x, 1, w) ** 2) + np.sum(ppto.average(x, 0) ** 3)


def test_ppto_average_takes_numpys_positional_order():
    # ppto.average was (a, weights, axis): ppto.average(x, 1) took 1 as weights
    # and averaged everything where np.average(x, 1) averages along axis 1
    from tests.corpus.checks import central_differences

    x, w = np.arange(1.0, 7.0).reshape(2, 3) ** 1.5, np.array([1.0, 2.0, 0.5])
    for call in (
        lambda av, a: av(a, 1),
        lambda av, a: av(a, 1, w),
        lambda av, a: av(a, 0, None, keepdims=True),
        lambda av, a: av(a, weights=w, axis=1),
    ):
        expected = call(np.average, x)
        np.testing.assert_allclose(call(ppto.average, ppto.tensor(x)).numpy(), expected)
        np.testing.assert_allclose(call(ppto.average, x).numpy(), expected)
    dx, dw = ppto.grad(average_along_rows, wrt=(0, 1))(x, w)
    np.testing.assert_allclose(
        dx.numpy(), central_differences(average_along_rows, [x, w], 0), rtol=1e-6
    )
    np.testing.assert_allclose(
        dw.numpy(), central_differences(average_along_rows, [x, w], 1), rtol=1e-6
    )
    tx, tw = np.linspace(1.0, -1.0, 6).reshape(2, 3), np.array([0.5, -1.0, 2.0])
    _, derivative = ppto.jvp(average_along_rows, (x, w), (tx, tw))
    expected = np.sum(dx.numpy() * tx) + np.sum(dw.numpy() * tw)
    assert float(derivative) == pytest.approx(expected, rel=1e-8)
    with pytest.raises(ppto.PptoError, match="ppto.average got 'axis' by position"):
        ppto.average(x, 1, axis=1)
    assert "Average" in ppto.show_op(ppto.average, file=io.StringIO())


def test_average_returned_gives_numpys_pair_on_tensors():
    # returned=True was refused: the average and the sum of the weights
    x, w = np.arange(1.0, 7.0).reshape(2, 3), np.array([1.0, 2.0, 0.5])
    for call in (
        lambda av, a: av(a, 1, w, True),
        lambda av, a: av(a, axis=1, weights=w, returned=True, keepdims=True),
        lambda av, a: av(a, weights=a * a, returned=True),
        lambda av, a: av(a, 0, returned=True),
        lambda av, a: av(a, returned=True),
    ):
        expected = call(np.average, x)
        for got in (call(np.average, ppto.tensor(x)), call(ppto.average, x)):
            assert len(got) == 2
            for part, want in zip(got, expected):
                assert part.shape == np.shape(want)
                np.testing.assert_allclose(part.numpy(), want)


def running_and_trace_in_float64(x):
    products = np.cumprod(x, 1, np.float64)
    sums = x.cumsum(0, np.float64)
    return np.sum(products**2) + x.trace(0, 0, 1, np.float64) + np.sum(sums**2)


def test_cumsum_cumprod_and_trace_take_numpys_dtype():
    # dtype= was refused by np.cumsum, np.cumprod and np.trace, and the methods
    # given NumPy's positional dtype (x.cumprod(0, np.float64)) raised Python's
    # own TypeError
    from tests.corpus.checks import central_differences

    x = np.arange(1.0, 7.0).reshape(2, 3) * 0.5
    t = ppto.tensor(x)
    for spelled, expected in (
        (t.cumprod(0, np.float32), x.cumprod(0, np.float32)),
        (t.cumsum(None, np.float32), x.cumsum(None, np.float32)),
        (t.trace(0, 0, 1, np.float32), x.trace(0, 0, 1, np.float32)),
        (np.cumsum(t, axis=0, dtype=np.float32), np.cumsum(x, 0, np.float32)),
        (np.cumprod(t, dtype=np.float32), np.cumprod(x, dtype=np.float32)),
        (np.trace(t, dtype=np.float32), np.trace(x, dtype=np.float32)),
    ):
        assert spelled.dtype == expected.dtype
        np.testing.assert_allclose(spelled.numpy(), expected)
    expected = central_differences(running_and_trace_in_float64, [x], 0)
    single = x.astype(np.float32)  # (the gradient comes back in x's dtype)
    gradient = ppto.grad(running_and_trace_in_float64)(single)
    assert gradient.dtype == np.float32
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-5)
    tangent = np.linspace(1.0, -1.0, 6).reshape(2, 3)
    _, derivative = ppto.jvp(running_and_trace_in_float64, (x,), (tangent,))
    assert float(derivative) == pytest.approx(np.sum(expected * tangent), rel=1e-6)
    with pytest.raises(ppto.PptoError, match="takes no out="):
        t.cumprod(0, None, np.zeros((2, 3)))
    with pytest.raises(ppto.PptoError, match=r"Tensor.trace\(\) takes \(offset"):
        t.trace(0, 0, 1, None, None, 6)


def test_numpy_slogdet_on_tensors_has_numpys_fields():
    A = np.array([[2.0, 0.5], [1.0, -3.0]])
    sign, logabsdet = np.linalg.slogdet(A)
    result = np.linalg.slogdet(ppto.tensor(A))
    assert float(result.sign) == sign and float(result[0]) == sign
    assert float(result.logabsdet) == pytest.approx(logabsdet)


def test_numpy_cross_on_tensors_takes_3_vectors_only():
    a, b = np.arange(6.0).reshape(2, 3), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(np.cross(ppto.tensor(a), b).numpy(), np.cross(a, b))
    with pytest.raises(ppto.ShapeError, match="no axis -1 of 3 components"):
        np.cross(ppto.tensor(a[:, :2]), b[:2])
    # axis= names each operand's own axis of vectors, the rest broadcasting (a
    # vector and columns were refused as not broadcasting)
    columns = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(
        np.cross(b, ppto.tensor(columns), axis=0).numpy(), np.cross(b, columns, axis=0)
    )
    with pytest.raises(ppto.ShapeError, match="along axis 0 do not broadcast"):
        np.cross(ppto.tensor(columns), np.ones((3, 4)), axis=0)


def factors_and_products(A, a, b):
    upper = np.linalg.cholesky(A, upper=True)
    lower = np.linalg.cholesky(A)
    product = np.cross(a, b, axisa=0, axisb=1, axisc=0)
    return np.sum(np.sin(upper)) + np.sum(lower**3) + np.sum(np.sin(product))


def test_cholesky_takes_upper_and_cross_takes_each_operands_axis():
    # np.linalg.cholesky(A, upper=True) (NumPy 2) and np.cross's axisa=, axisb=,
    # axisc= were refused as unexpected arguments
    from tests.corpus.checks import central_differences

    A = np.array(
        [[4.0, 1.0, 0.5], [-2.0, 3.0, 0.2], [0.3, 0.7, 5.0]]
    )  # (not symmetric:
    a, b = np.arange(1.0, 7.0).reshape(3, 2), np.arange(6.0).reshape(2, 3) ** 2
    np.testing.assert_allclose(  # the upper factor reads the upper triangle)
        np.linalg.cholesky(ppto.tensor(A), upper=True).numpy(),
        np.linalg.cholesky(A, upper=True),
    )
    for axes in ({"axisa": 0, "axisb": 1, "axisc": 0}, {"axisa": 1, "axis": 0}):
        left, right = (a, b) if "axisb" in axes else (a, b.T)
        np.testing.assert_allclose(
            np.cross(ppto.tensor(left), right, **axes).numpy(),
            np.cross(left, right, **axes),
        )
    arguments = (A, a, b)
    gradients = ppto.grad(factors_and_products, wrt=(0, 1, 2))(*arguments)
    for i, gradient in enumerate(gradients):
        expected = central_differences(factors_and_products, list(arguments), i)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6)
    tangents = tuple(np.linspace(-1.0, 1.0, x.size).reshape(x.shape) for x in arguments)
    _, derivative = ppto.jvp(factors_and_products, arguments, tangents)
    expected = sum(np.sum(g.numpy() * t) for g, t in zip(gradients, tangents))
    assert float(derivative) == pytest.approx(expected, rel=1e-8)


def test_setitem_writes_through_an_operator():
    t = ppto.tensor(np.zeros((2, 3)))
    t[0, 1:] = 5.0
    np.testing.assert_array_equal(t.numpy(), [[0, 5, 5], [0, 0, 0]])


def mean_square(W, b, x):
    return np.mean((x @ W + b) ** 2)


def test_an_sgd_loop_of_in_place_updates_trains_the_tensors_in_its_list():
    # p -= lr * g made a new tensor: the list kept the old ones, the loss stayed
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3))
    W, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    arrays, tensors = [W.copy(), b.copy()], [ppto.tensor(W), ppto.tensor(b)]
    grad = ppto.grad(mean_square, wrt=(0, 1))
    for _ in range(20):
        for params in (arrays, tensors):
            gradients = grad(*params, x)
            for p, g in zip(params, gradients):
                p -= 0.1 * (g if isinstance(p, ppto.Tensor) else np.asarray(g))
    for array, tensor in zip(arrays, tensors):
        np.testing.assert_allclose(tensor.numpy(), array, rtol=1e-12)
    assert mean_square(*arrays, x) < 0.1 * mean_square(W, b, x)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_in_place_operators_write_into_the_tensor_as_numpy_does(device):
    rng = np.random.default_rng(1)
    start, other = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    expected = start.copy()
    t = ppto.tensor(start, device=device)
    same = t
    steps = [
        ("+=", lambda a, v: a.__iadd__(v), other),
        ("-=", lambda a, v: a.__isub__(v), 0.5),
        ("*=", lambda a, v: a.__imul__(v), other[0]),
        ("/=", lambda a, v: a.__itruediv__(v), 4.0),
        ("**=", lambda a, v: a.__ipow__(v), 2.0),
        ("@=", lambda a, v: a.__imatmul__(v), np.eye(3)[::-1].copy()),
    ]
    for symbol, update, value in steps:
        expected = update(expected, value)
        result = update(
            t, ppto.tensor(value, device=device) if symbol == "@=" else value
        )
        assert result is same, symbol
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-12, err_msg=symbol)
    assert t.device == device


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_floor_division_remainder_and_logical_updates_are_in_place(device):
    # t //= 2 and t %= 3 made a new tensor: a view of t, or the list holding
    # it, kept the old values (the other in-place operators wrote into t)
    cases = [
        (np.array([7.0, -8.5, 9.0]), [("//=", 2.0), ("%=", 3.0), ("//=", -0.75)]),
        (np.array([7, -8, 9, 30]), [("//=", 2), ("%=", 3)]),
        (np.array([True, False, True, False]), [("&=", [1, 1, 0, 0]), ("|=", 1)]),
    ]
    for start, steps in cases:
        expected, t = start.copy(), ppto.tensor(start, device=device)
        view, expected_view, tensors = t[1:], expected[1:], [t]
        for symbol, value in steps:
            value = np.array(value, dtype=start.dtype)
            for array in (expected, *tensors):
                namespace = {"a": array, "v": value}
                exec(f"a {symbol} v", namespace)
                assert namespace["a"] is array, symbol
            np.testing.assert_array_equal(t.numpy(), expected, err_msg=symbol)
            np.testing.assert_array_equal(view.numpy(), expected_view)
        assert t.dtype == start.dtype
    whole = ppto.tensor(np.array([6, 5]), device=device)
    for symbol in ("&=", "|="):  # (a tensor's & is logical, NumPy's bitwise)
        with pytest.raises(ppto.DTypeError, match="bitwise.*np.bitwise_"):
            exec(f"whole {symbol} 3", {"whole": whole})
    np.testing.assert_array_equal(whole.numpy(), [6, 5])


def test_logical_operators_take_booleans_and_refuse_integers():
    # t & 1 on an integer tensor was logical_and (True where NumPy's bitwise
    # and gives 0 for even numbers), ~t logical_not, and ^ a TypeError
    flags, other = np.array([True, False, True]), np.array([True, True, False])
    t, u = ppto.tensor(flags), ppto.tensor(other)
    for result, expected in [
        (t & u, flags & other),
        (t | u, flags | other),
        (t ^ u, flags ^ other),
        (~t, ~flags),
        (True & t, True & flags),
        (t | other, flags | other),
    ]:
        assert result.dtype == np.bool_
        np.testing.assert_array_equal(result.numpy(), expected)
    whole = ppto.tensor(np.array([1, 2, 3, 6]))
    calls = [
        lambda: whole & 1,
        lambda: 1 & whole,
        lambda: whole | whole,
        lambda: whole ^ 3,
        lambda: ~whole,
        lambda: t & whole,
        lambda: t | 2,
    ]
    for call in calls:
        with pytest.raises(ppto.DTypeError, match="bitwise.*np.(bitwise_|invert)"):
            call()


def test_copy_copy_of_a_tensor_copies_its_values():
    # the copy held the tensor's own array: writing into it changed the tensor
    import copy

    t = ppto.tensor(np.ones((1, 2, 2, 3)), layout="nhwc")
    for copied in (copy.copy(t), copy.deepcopy(t)):
        copied += 1.0
        copied[0, 0, 0, 0] = 5.0
        np.testing.assert_array_equal(t.numpy(), np.ones((1, 2, 2, 3)))
        assert copied.layout == "nhwc" and copied.device == t.device


def test_in_place_operators_keep_the_dtype_and_refuse_what_numpy_refuses():
    t = ppto.tensor(np.ones(3, np.float32))
    t *= np.float64(2.5)
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t.numpy(), [2.5, 2.5, 2.5])
    whole = ppto.tensor(np.zeros(3, np.int64))
    with pytest.raises(ppto.DTypeError, match="'same_kind'.*test_devices_and_tensor"):
        whole += 0.5
    with pytest.raises(ppto.ShapeError, match="cannot broadcast.*\\(2, 3\\)"):
        t += np.ones((2, 3))
    np.testing.assert_array_equal(whole.numpy(), [0, 0, 0])


def test_writes_into_an_index_or_a_transpose_reach_the_tensor():
    # t[0] and t.T wrote into copies
    t = ppto.tensor(np.zeros((2, 3)))
    row = t[0]
    row[1] = 5.0
    t.T[2, 1] = 7.0
    t.reshape(-1)[0] = 1.0
    row += 2.0
    np.testing.assert_array_equal(t.numpy(), [[3, 7, 2], [0, 0, 7]])


def test_results_updated_in_place_leave_the_callers_arrays_alone():
    # jvp's value and tangent, vjp's out and value_and_grad's value were Tensors
    # over the caller's arrays where the code returned an argument or a view of
    # it, so t += 5 wrote into the caller's x and v (NumPy/JAX: new arrays)
    x, v, y = np.array([1.0, 2.0]), np.array([1.0, 1.0]), np.array([3.0, 4.0])
    primal = ppto.tensor(x.copy())
    cases = [
        (lambda a: a, (x,), (v,)),
        (lambda a, b: a + b, (x, y), (v, None)),
        (lambda a: a.reshape(2, 1), (x,), (v,)),
        (lambda a: (a, a[::-1]), (x,), (v,)),
        (lambda a: a, (x,), (x,)),  # (the same array for primal and tangent)
        (lambda a: a, (primal,), (v,)),
    ]
    for f, primals, tangents in cases:
        expected = f(*[np.array(p) for p in primals])
        out, tangent = ppto.jvp(f, primals, tangents)
        for part in (out, tangent):
            for item in part if isinstance(part, tuple) else (part,):
                item += 5.0
                item[0] = 7.0
        np.testing.assert_array_equal(x, [1.0, 2.0])
        np.testing.assert_array_equal(v, [1.0, 1.0])
        np.testing.assert_array_equal(primal.numpy(), [1.0, 2.0])
        for got, want in zip(
            out if isinstance(out, tuple) else (out,),
            expected if isinstance(expected, tuple) else (expected,),
        ):
            np.testing.assert_array_equal(
                got.numpy(),
                np.where(
                    np.arange(want.size).reshape(want.shape) == 0, 7.0, want + 5.0
                ),
            )
    out, pullback = ppto.vjp(lambda a: a, x)
    out += 5.0
    np.testing.assert_array_equal(x, [1.0, 2.0])
    np.testing.assert_array_equal(out.numpy(), [6.0, 7.0])
    s = np.array(2.0)
    value_and_grad = ppto.value_and_grad(lambda a: a)
    for _ in range(3):  # (later calls take the repeated call's fast path)
        value, gradient = value_and_grad(s)
        value += 1.0
        assert float(value) == 3.0 and float(gradient) == 1.0
        assert float(s) == 2.0


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_positive_and_flatten_are_copies_as_in_numpy(device):
    # +t returned t itself and t.flatten() a view: t += 10 changed them, and a
    # write into them changed t (NumPy: +a and a.flatten() are copies)
    from ppto.ruletape import vjp_by_rules
    from tests.corpus.checks import central_differences

    for make in (lambda a: +a, lambda a: a.flatten(), lambda a: a.T.flatten()):
        array = np.arange(6.0).reshape(2, 3)
        t = ppto.tensor(array.copy(), device=device)
        made, expected = make(t), make(array)
        t += 10.0
        array += 10.0
        np.testing.assert_array_equal(made.numpy(), expected)
        made[0] = -1.0
        np.testing.assert_array_equal(t.numpy(), array)

        def f(a, make=make):
            return (make(a) * make(a) * 1.5).sum()

        x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
        out, pullback = vjp_by_rules(f, [ppto.tensor(x, device=device)], [0])
        assert float(out) == pytest.approx(f(x), rel=1e-12)
        (gradient,) = pullback(ppto.tensor(np.array(1.0), device=device))
        np.testing.assert_allclose(
            gradient.numpy(), central_differences(f, [x], 0), rtol=1e-6
        )


def test_constructors():
    assert ppto.zeros((2, 3), device="sim").device == "sim:0"
    assert ppto.ones(3, dtype="float32").dtype == np.float32
    np.testing.assert_array_equal(ppto.full((2,), 7).numpy(), [7, 7])
    np.testing.assert_array_equal(ppto.arange(3).numpy(), [0, 1, 2])
    np.testing.assert_array_equal(ppto.arange(1, 7, 2).numpy(), [1, 3, 5])
    np.testing.assert_array_equal(ppto.eye(2).numpy(), np.eye(2))
    x = ppto.tensor([[1.0, 2.0]], device="sim")
    assert ppto.zeros_like(x).device == "sim:0"
    assert ppto.ones_like(x, device="cpu").device == "cpu"
    assert ppto.zeros_like(x, dtype="int32").dtype == np.int32


def test_zeros_like_on_another_device_keeps_the_dtype_and_layout():
    # ones_like([[1, 2]], device="sim") was float64 (int64 without device=), and
    # zeros_like(nhwc_image, device="sim") dropped the layout it keeps otherwise
    assert ppto.ones_like([[1, 2]], device="sim").dtype == np.int64
    assert ppto.ones_like([[1, 2]]).dtype == np.int64
    image = ppto.tensor(np.zeros((1, 2, 2, 3)), layout="nhwc")
    assert ppto.zeros_like(image, device="sim").layout == "nhwc"
    assert ppto.zeros_like(image).layout == "nhwc"
    assert ppto.zeros_like(image, dtype="float32", device="sim").dtype == np.float32


def test_layout_hint():
    image = ppto.tensor(np.zeros((1, 4, 4, 3)), layout="nhwc")
    assert image.layout == "nhwc"
    assert ppto.relu(image).layout == "nhwc"
    with pytest.raises(ppto.ShapeError, match="4-D"):
        ppto.tensor(np.zeros((4, 3)), layout="nhwc")
    with pytest.raises(ppto.ShapeError, match="layout must be"):
        ppto.tensor(np.zeros((1, 1, 1, 1)), layout="hwcn")


def test_devices_lists_cpu_and_registered():
    kinds = [str(d) for d in ppto.devices()]
    assert kinds[0] == "cpu" and "sim:0" in kinds and "sim:1" in kinds


def test_cuda_without_gpu_explains(monkeypatch):
    if any(d.kind == "cuda" for d in ppto.devices()):
        pytest.skip("a GPU is present")
    with pytest.raises(ppto.DeviceError, match="CuPy"):
        ppto.tensor([1.0], device="cuda")


def test_a_copy_to_a_device_that_cannot_be_used_is_not_in_the_ledger():
    # x.to("cuda") without a GPU raised, but the ledger kept a copy that never happened
    if any(d.kind == "cuda" for d in ppto.devices()):
        pytest.skip("a GPU is present")
    x = ppto.tensor([1.0, 2.0])
    before = ppto.transfers()
    with pytest.raises(ppto.DeviceError, match="CuPy"):
        x.to("cuda")
    with pytest.raises(ppto.DeviceError, match="CuPy"):
        ppto.tensor(x, device="cuda:0")
    assert ppto.transfers() == before


def test_numpy_style_spread_flatten_and_remainder_methods():
    # .var(), .std(), .flatten(), .ravel(), // and % were missing on tensors
    values = np.random.default_rng(5).standard_normal((3, 4))
    t = ppto.tensor(values)
    cases = [
        (t.var(), values.var()),
        (t.var(axis=1, ddof=1), values.var(axis=1, ddof=1)),
        (t.std(axis=0, keepdims=True), values.std(axis=0, keepdims=True)),
        (np.std(t, axis=1, ddof=1), np.std(values, axis=1, ddof=1)),
        (np.var(t), np.var(values)),
        (t.flatten(), values.flatten()),
        (t.ravel(), values.ravel()),
        (np.ravel(t), np.ravel(values)),
        (t // 0.5, values // 0.5),
        (t % 0.7, values % 0.7),
    ]
    for result, expected in cases:
        assert isinstance(result, ppto.Tensor)
        assert result.shape == np.shape(expected)
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)


def test_numpy_spelled_reductions_take_only_the_axis_by_position():
    # t.var(0, None) and np.var(t, 0, None) passed NumPy's dtype as keepdims
    t = ppto.tensor(np.arange(6.0).reshape(2, 3))
    for call in (
        lambda: t.var(0, None),
        lambda: np.var(t, 0, None),
        lambda: t.sum(0, 1),
    ):
        with pytest.raises(
            ppto.PptoError, match="axis by position and the rest by name"
        ):
            call()
    np.testing.assert_allclose(t.var(0, ddof=1).numpy(), np.var(t.numpy(), 0, ddof=1))
    assert ppto.reduce_sum(t, 1, True).shape == (2, 1)  # ppto's own order stands


def test_raw_cupy_arrays_pass_as_cotangents_and_tangents(emulated_cupy):
    # a CuPy array given to a pullback (or as a tangent) went through np.asarray,
    # which CuPy refuses (TypeError: implicit conversion); the emulated CuPy
    # refuses it as CuPy does
    from ppto.runtime.backends import backend_for

    cupy = backend_for(ppto.Device("cuda")).xp
    x = np.linspace(-1.0, 1.0, 5)
    on_gpu = cupy.asarray(x)
    out, pullback = ppto.vjp(np.tanh, on_gpu)
    (gradient,) = pullback(cupy.asarray(np.full(5, 2.0)))
    assert gradient.device == "cuda:0"
    np.testing.assert_allclose(gradient.numpy(), 2.0 / np.cosh(x) ** 2, rtol=1e-12)
    (gradient,) = pullback(np.full(5, 2.0))  # a host array still comes across
    np.testing.assert_allclose(gradient.numpy(), 2.0 / np.cosh(x) ** 2, rtol=1e-12)
    _, tangent = ppto.jvp(np.tanh, (on_gpu,), (cupy.asarray(np.ones(5)),))
    assert tangent.device == "cuda:0"
    np.testing.assert_allclose(tangent.numpy(), 1.0 / np.cosh(x) ** 2, rtol=1e-12)


def squares_on_the_gpu_else_sum(x):
    if x.device == "cuda:0" and str(x.device) == "cuda:0":
        return np.sum(x * x)
    return np.sum(x)


def test_a_differentiated_function_reading_x_device_sees_the_tensors_device(
    emulated_cupy,
):
    # generated code computes on raw arrays: x.device read a CuPy array's own
    # device (<CUDA Device 0>, unequal to "cuda:0"), and the test took the other
    # branch on a GPU
    x = np.array([1.0, -2.0, 0.5])
    on_gpu = ppto.tensor(x, device="cuda")
    gradient = ppto.grad(squares_on_the_gpu_else_sum)(on_gpu)
    np.testing.assert_allclose(gradient.numpy(), 2 * x)
    np.testing.assert_allclose(
        ppto.grad(squares_on_the_gpu_else_sum)(x).numpy(), np.ones(3)
    )


OUT_OF_BOUNDS = {  # an index 5 into 3 elements, or -4
    "take": lambda x, i: ppto.take(x, i),
    "take_axis": lambda x, i: ppto.take(x.reshape((1, 3)), i, axis=1),
    "take_along_axis": lambda x, i: ppto.take_along_axis(x, i, axis=0),
    "gather": lambda x, i: ppto.gather(x, i),
    "getitem": lambda x, i: x[i],
    "getitem_tuple": lambda x, i: x.reshape((1, 3))[..., i],
    "index_add": lambda x, i: ppto.index_add(x, ppto.ones_like(x)[:1], i),
    "scatter_add": lambda x, i: ppto.scatter_add(x, i, ppto.ones_like(x)[:1]),
    "setitem": lambda x, i: ppto.setitem(x, 1.0, i),
}


@pytest.mark.parametrize("index", [5, -4])
@pytest.mark.parametrize("name", OUT_OF_BOUNDS)
def test_an_index_out_of_bounds_is_refused_on_cupy_as_on_the_cpu(
    emulated_cupy, name, index
):
    # CuPy wraps an integer index out of bounds around (NumPy raises), so on a GPU
    # these read or wrote another element without a word; the emulated CuPy wraps
    # as CuPy does
    call = OUT_OF_BOUNDS[name]
    for device in ("cpu", "cuda"):
        x = ppto.tensor([1.0, 2.0, 3.0], device=device)
        with pytest.raises(ppto.ShapeError, match="out of bounds"):
            call(x, ppto.tensor([index], device=device))
        inside = call(x, ppto.tensor([index % 3 - 3], device=device))  # -3..-1: fine
        assert inside.device == device


def test_eye_takes_numpys_diagonal_k_in_numpys_order():
    # ppto.eye(3, 4, k=1) was a raw TypeError (no k), and ppto.eye(3, 4, 1) read
    # the 1 as the dtype, where NumPy's third argument is the diagonal
    np.testing.assert_array_equal(ppto.eye(3, 4, k=1).numpy(), np.eye(3, 4, k=1))
    made = ppto.eye(3, None, -1, "int32")
    np.testing.assert_array_equal(made.numpy(), np.eye(3, k=-1, dtype="int32"))
    assert made.dtype == np.int32


def test_an_empty_list_indexes_no_element_as_in_numpy():
    # NumPy reads x[[]] as an empty integer index; ppto made a float64 array of the
    # list and refused it ("arrays used as indices must be of integer type")
    a = np.arange(6.0).reshape(2, 3)
    x = ppto.tensor(a)
    for index in ([], [[]], (slice(None), []), ([], [])):
        assert x[index].shape == a[index].shape and x[index].dtype == a.dtype
    x[[]] = 5.0
    np.testing.assert_array_equal(x.numpy(), a)


def test_numpys_any_all_and_comparisons_of_whole_arrays_take_tensors():
    # np.any(t > 1), np.allclose(t, expected) and np.array_equal(t, u), as a user
    # coming from NumPy checks results, were refused: "np.allclose has no ppto
    # operator"
    a = np.arange(6.0).reshape(2, 3)
    t = ppto.tensor(a)
    assert bool(np.any(t > 4)) and not bool(np.all(t > 0))
    np.testing.assert_array_equal(np.all(t >= 1, axis=1).numpy(), [False, True])
    assert np.any(t > 1, 0, None, True).shape == (1, 3)
    assert np.allclose(t, a + 1e-9) is True and np.allclose(a, t + 1.0) is False
    assert np.array_equal(t, ppto.tensor(a)) and not np.array_equal(t, a[:1])
    assert np.array_equiv(ppto.tensor([[1.0, 2.0]] * 2), [1.0, 2.0])
    with pytest.raises(ppto.PptoError, match="np.any of a tensor takes no where="):
        np.any(t, where=t > 1)


def test_divmod_of_tensors_is_numpys():
    # divmod(t, 2) was Python's raw TypeError (no __divmod__), np.divmod(t, 2)
    # refused as having no ppto operator
    a = np.array([7.0, -7.5, 3.0])
    for quotient_remainder in (divmod(ppto.tensor(a), 2), np.divmod(ppto.tensor(a), 2)):
        expected = np.divmod(a, 2)
        for got, wanted in zip(quotient_remainder, expected):
            np.testing.assert_array_equal(got.numpy(), wanted)
    quotient, remainder = divmod(7, ppto.tensor([2, -3]))
    np.testing.assert_array_equal(quotient.numpy(), [3, -3])
    np.testing.assert_array_equal(remainder.numpy(), [1, -2])


def test_the_repr_of_an_empty_tensor_gives_its_shape():
    # every empty tensor printed as Tensor([], ...): (0, 3) read as (0,), as
    # NumPy's repr says shape=(0, 3)
    assert repr(ppto.tensor(np.zeros((0, 3)))) == (
        "Tensor([], shape=(0, 3), device='cpu', dtype=float64)"
    )
    assert repr(ppto.tensor([])) == "Tensor([], device='cpu', dtype=float64)"


def test_a_numpy_array_plus_equals_a_tensor_writes_into_the_array():
    # total += t for a NumPy array total (np.add(total, t, out=(total,))) was
    # refused, "np.add with out has no ppto operator"; it writes into the array,
    # in its dtype, with NumPy's refusals, and out= may be a tensor
    t = ppto.tensor([1.0, 2.0, 3.0])
    total = np.zeros((2, 3), np.float32)
    total += t
    total *= t
    assert total.dtype == np.float32
    np.testing.assert_array_equal(total, [[1.0, 4.0, 9.0]] * 2)
    with pytest.raises(ppto.DTypeError, match="not 'same_kind'"):
        counts = np.zeros(3, int)
        counts += t
    with pytest.raises(ppto.ShapeError, match=r"shape \(3,\) to \(2, 3\)"):
        row = np.zeros(3)
        row += ppto.tensor(np.ones((2, 3)))
    x = ppto.tensor(np.arange(6.0).reshape(2, 3))
    assert np.multiply(x[0], 10.0, out=x[0]).shape == (3,)
    np.testing.assert_array_equal(x.numpy(), [[0.0, 10.0, 20.0], [3.0, 4.0, 5.0]])


def test_numpys_index_finders_take_tensors():
    # np.where(t > 1) (NumPy's one-argument where: the positions) said "ppto.where
    # is missing argument(s) ['a', 'b']"; np.nonzero, np.argwhere, np.flatnonzero
    # and np.count_nonzero were refused as having no ppto operator
    a = np.array([[0.0, 3.0], [0.0, 5.0]])
    t = ppto.tensor(a)
    for got, wanted in zip(np.where(t > 1), np.where(a > 1)):
        assert isinstance(got, ppto.Tensor)
        np.testing.assert_array_equal(got.numpy(), wanted)
    np.testing.assert_array_equal(t[np.nonzero(t)].numpy(), [3.0, 5.0])
    np.testing.assert_array_equal(np.argwhere(t).numpy(), np.argwhere(a))
    np.testing.assert_array_equal(np.flatnonzero(t).numpy(), [1, 3])
    assert np.count_nonzero(t).item() == 2
    np.testing.assert_array_equal(np.where(t > 1, t, -1.0).numpy(), [[-1, 3], [-1, 5]])


def test_numpys_reduction_options_take_tensors_as_in_differentiated_code():
    # np.sum(t, where=m), np.max(t, initial=v), np.mean(t, where=m) and
    # t.sum(dtype=...) were refused ("ppto.reduce_sum got an unexpected argument
    # 'where'"), where differentiated code takes them
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    counts = np.array([[1, 2, 3], [4, 5, 6]])
    mask = a > 0
    t, c, m = ppto.tensor(a), ppto.tensor(counts), ppto.tensor(mask)
    pairs = [
        (np.sum(t, axis=1, where=m), np.sum(a, axis=1, where=mask)),
        (np.sum(c, initial=10), np.sum(counts, initial=10)),
        (np.prod(t, axis=0, where=m), np.prod(a, axis=0, where=mask)),
        (
            np.max(t, axis=1, where=m, initial=-9.0),
            np.max(a, 1, where=mask, initial=-9.0),
        ),
        (np.mean(c, axis=1, where=m), np.mean(counts, axis=1, where=mask)),
        (np.mean(c, dtype=np.float32), np.mean(counts, dtype=np.float32)),
        (c.sum(axis=1, dtype=np.int8, where=m), counts.sum(1, np.int8, where=mask)),
        (t.min(where=m, initial=100.0), a.min(where=mask, initial=100.0)),
    ]
    for got, wanted in pairs:
        assert got.dtype == wanted.dtype and got.shape == np.shape(wanted)
        np.testing.assert_allclose(got.numpy(), wanted)
    with pytest.raises(ppto.PptoError, match="np.max with where= and no initial="):
        np.max(t, where=m)


def test_bit_shifts_of_tensors_are_refused_saying_what_to_write():
    # t << 1 was Python's raw TypeError ("unsupported operand type(s) for <<")
    t = ppto.tensor([1, 2])
    with pytest.raises(ppto.DTypeError, match=r"<< of a tensor of int64.*left_shift"):
        t << 1  # noqa: B018
    with pytest.raises(ppto.DTypeError, match=r">> of int 8 and a tensor"):
        8 >> t  # noqa: B018


def test_numpys_isclose_and_unique_take_tensors():
    # np.isclose(t, v) and np.unique(t), as users check and count values, were
    # refused ("np.isclose has no ppto operator"): NumPy's answers, as tensors
    t = ppto.tensor([3.0, 1.0, 3.0, 2.0 + 1e-12])
    close = np.isclose(t, [3.0, 1.5, 3.0, 2.0])
    assert isinstance(close, ppto.Tensor) and close.dtype == np.bool_
    np.testing.assert_array_equal(close.numpy(), [True, False, True, True])
    for tolerances in ({}, {"rtol": 0.0, "atol": 0.0}):
        np.testing.assert_array_equal(
            np.isclose(2.0, t, **tolerances).numpy(),
            np.isclose(2.0, t.numpy(), **tolerances),
        )
    assert not np.isclose(2.0, t, rtol=0.0, atol=0.0).numpy().any()
    values, counts = np.unique(t, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), np.unique(t.numpy()))
    np.testing.assert_array_equal(counts.numpy(), [1, 1, 2])
