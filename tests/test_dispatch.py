"""Dispatch and migration across devices, the transfer ledger and its policies, and
registered backends (exercised on the simulated second device ``sim``)."""

import io
import logging
import warnings

import numpy as np
import pytest

import ppto
from ppto.runtime.sim import SimBackend


def test_implementation_is_chosen_from_the_inputs_device():
    before = SimBackend.dot_calls
    a = ppto.tensor(np.eye(2), device="sim")
    out = ppto.dot(a, a)
    assert out.device == "sim:0"
    assert SimBackend.dot_calls == before + 1  # the backend's own dot_impl ran
    ppto.dot(a.to("cpu"), a.to("cpu"))
    assert SimBackend.dot_calls == before + 1
    assert not [t for t in ppto.transfers() if t.implicit]


def test_mixed_devices_migrate_to_the_accelerator_and_are_recorded():
    cpu = ppto.tensor(np.ones((3, 4)))
    sim = ppto.tensor(np.ones((4, 2)), device="sim")
    out = ppto.dot(cpu, sim)
    assert out.device == "sim:0"
    (entry,) = ppto.transfers()
    assert entry.op == "dot" and entry.nbytes == 3 * 4 * 8
    assert entry.source == "cpu" and entry.target == "sim:0" and entry.implicit
    assert entry.where.startswith(__file__ + ":")  # the user's line, not ppto's
    np.testing.assert_allclose(out.numpy(), np.full((3, 2), 4.0))


def test_accelerator_wins_even_as_second_argument_and_raw_numpy_counts_as_cpu():
    sim = ppto.tensor([1.0, 2.0], device="sim:1")
    out = np.array([10.0, 20.0]) + sim
    assert out.device == "sim:1"
    assert [(t.source, t.target) for t in ppto.transfers()] == [("cpu", "sim:1")]


def test_between_two_accelerators_the_first_argument_wins():
    a = ppto.tensor([1.0], device="sim:1")
    b = ppto.tensor([2.0], device="sim:0")
    assert (a + b).device == "sim:1"
    assert ppto.transfers()[-1].source == "sim:0"


def test_python_scalars_never_migrate():
    (ppto.tensor([1.0], device="sim") * 3.0).numpy()
    assert not [t for t in ppto.transfers() if t.implicit]


def product_sum(x, y):
    return ppto.reduce_sum(x * y)


def doubled(x):
    return x * 2.0


def test_scalar_cotangents_and_tangents_are_not_transfers():
    # pullback(1.0) and a jvp tangent 1.0 were copied to the device through the
    # ledger as implicit transfers, so policy 'error' refused them (and the jvp's
    # entry was labelled 'pullback')
    on_sim = ppto.tensor([1.0, 2.0], device="sim")
    ppto.set_transfer_policy("error")
    _, pullback = ppto.vjp(product_sum, on_sim, on_sim)
    first, second = pullback(1.0)
    np.testing.assert_array_equal(first.numpy(), [1.0, 2.0])
    _, pullback = ppto.vjp(product_sum, on_sim, on_sim)
    assert pullback(np.float64(2.0))[0].device == "sim:0"
    scalar = ppto.tensor(3.0, device="sim")
    assert ppto.jvp(doubled, (scalar,), (1.0,))[1].item() == 2.0
    assert not [t for t in ppto.transfers() if t.implicit]
    ppto.set_transfer_policy("allow")
    ppto.jvp(doubled, (on_sim,), (np.ones(2),))
    assert [t.op for t in ppto.transfers() if t.implicit] == ["jvp tangent"]


def test_policy_error_refuses_implicit_copies_but_not_explicit_ones():
    ppto.set_transfer_policy("error")
    cpu = ppto.tensor([1.0, 2.0])
    sim = cpu.to("sim")
    with pytest.raises(
        ppto.TransferError, match=r"add at .*test_dispatch.py:\d+.*\.to"
    ):
        ppto.add(cpu, sim)
    assert ppto.add(sim, sim).device == "sim:0"
    assert [t.implicit for t in ppto.transfers()] == [False]


def test_policy_log_records_and_warns(caplog):
    ppto.set_transfer_policy("log")
    with caplog.at_level(logging.WARNING, logger="ppto.transfers"):
        ppto.mul(ppto.tensor([1.0]), ppto.tensor([2.0], device="sim"))
    assert "implicit transfer: mul" in caplog.text
    assert len(ppto.transfers()) == 1


def test_unknown_policy_is_refused():
    with pytest.raises(ppto.PptoError, match="allow"):
        ppto.set_transfer_policy("sometimes")


def test_explicit_copies_are_recorded_as_explicit():
    t = ppto.tensor([1.0, 2.0], device="sim")
    t.numpy()
    np.asarray(t)
    assert [(e.op, e.implicit) for e in ppto.transfers()] == [
        ("numpy", False),
        ("__array__", False),
    ]


def test_a_cpu_tensor_copied_to_a_device_by_ppto_tensor_is_recorded():
    # ppto.tensor(cpu_tensor, device="sim") copied it unrecorded, while the same
    # copy by .to("sim"), or ppto.tensor(sim_tensor, device="cpu"), was recorded
    cpu = ppto.tensor([1.0, 2.0])
    on_sim = ppto.tensor(cpu, device="sim:1", dtype="float32")
    back = ppto.tensor(on_sim, device="cpu")
    np.testing.assert_array_equal(back.numpy(), [1.0, 2.0])
    assert [(e.op, e.nbytes, str(e.source), str(e.target), e.implicit)
            for e in ppto.transfers()] == [
        ("tensor", 8, "cpu", "sim:1", False),
        ("tensor", 8, "sim:1", "cpu", False),
    ]  # fmt: skip
    ppto.tensor(np.ones(2), device="sim")  # host data, not yet a tensor's
    assert len(ppto.transfers()) == 2


def test_a_write_copies_the_value_to_the_tensor_not_the_tensor_to_the_value():
    # t[0] = s[1] with t on the CPU and s on sim copied all of t to sim and back
    # (an implicit copy of t there, an 'explicit' one back that the user never
    # wrote); a mask on another device did the same
    on_sim = ppto.tensor([1.0, 2.0, 3.0], device="sim")
    t = ppto.tensor(np.zeros((10, 100)))
    ppto.clear_transfers()
    t[0, 0] = on_sim[1]
    t[(ppto.tensor(np.arange(10) == 3, device="sim"), 1)] = on_sim[2]
    t[ppto.tensor(np.arange(1000).reshape(10, 100) == 5, device="sim")] = 7.0
    expected = np.zeros((10, 100))
    expected[0, 0], expected[3, 1], expected[0, 5] = 2.0, 3.0, 7.0
    np.testing.assert_array_equal(t.numpy(), expected)
    assert t.device == "cpu"
    assert [(e.op, e.nbytes, str(e.source), e.implicit)
            for e in ppto.transfers()] == [
        ("setitem", 8, "sim:0", True),
        ("setitem", 8, "sim:0", True),
        ("setitem", 10, "sim:0", True),
        ("setitem", 1000, "sim:0", True),
    ]  # fmt: skip


def test_a_backend_with_a_bad_device_count_or_from_numpy_is_refused_by_name():
    # device_count = "two" was accepted, and then every ppto.devices() raised a
    # raw ValueError; from_numpy returning a list was an AttributeError in
    # ppto.tensor; a bad name was reported as a missing stream protocol
    class CountedInWords:
        xp = np
        device_count = "two"

    with pytest.raises(ppto.BackendError, match="'words': device_count.*'two'"):
        ppto.register_backend("words", CountedInWords)
    assert "words" not in {d.kind for d in ppto.devices()}

    class Listing:
        xp = np

        @staticmethod
        def from_numpy(array):
            return array.tolist()

        @staticmethod
        def device_count():
            return -1

    ppto.register_backend("listing", Listing)
    try:
        with pytest.raises(ppto.BackendError, match="from_numpy.*list of shape None"):
            ppto.tensor([1.0], device="listing")
        with pytest.raises(ppto.BackendError, match="device_count is -1"):
            ppto.devices()
    finally:
        ppto.unregister_backend("listing")

    class Streamed:
        xp = np

        @staticmethod
        def new_stream(index):
            return None

    with pytest.raises(ppto.BackendError, match="identifier.*got None"):
        ppto.register_backend(None, Streamed)


def test_index_tensors_inside_a_tuple_move_through_the_ledger():
    # x[mask, 0] and x[:, idx] with the index tensor on another device read its
    # raw array in place: no ledger entry (policy 'error' bypassed), and on a GPU
    # NumPy handed a CuPy index (or the reverse)
    x = ppto.tensor(np.arange(6.0).reshape(2, 3))
    mask = ppto.tensor([True, False], device="sim")
    columns = ppto.tensor([2, 0], device="sim")
    np.testing.assert_array_equal(x[mask, 0].numpy(), [0.0])
    np.testing.assert_array_equal(x[:, columns].numpy(), [[2.0, 0.0], [5.0, 3.0]])
    assert [(e.op, e.nbytes, str(e.source), e.implicit)
            for e in ppto.transfers()] == [
        ("getitem", 2, "sim:0", True),
        ("getitem", 16, "sim:0", True),
    ]  # fmt: skip
    ppto.set_transfer_policy("error")
    with pytest.raises(ppto.TransferError, match="getitem"):
        x[mask, 0]


def test_a_tensor_of_an_unregistered_backend_still_has_a_repr():
    # repr raised DeviceError once the backend was unregistered: a debugger or a
    # traceback showing the variable failed in turn
    ppto.register_backend("gone", SimBackend)
    left = ppto.tensor(np.ones((2, 3)), device="gone")
    ppto.unregister_backend("gone")
    assert repr(left) == "Tensor(<unreadable>, shape=(2, 3), device='gone:0')"
    with pytest.raises(ppto.DeviceError, match="unknown device 'gone:0'"):
        left.numpy()


def test_registered_backend_with_only_dot_impl():
    class DotOnly:
        calls = []

        @staticmethod
        def dot_impl(A, B):
            DotOnly.calls.append((A.shape, B.shape))
            return np.matmul(A, B) * 1.0

    ppto.register_backend("dotonly", DotOnly)
    try:
        a = ppto.tensor(np.eye(2), device="dotonly")
        np.testing.assert_allclose(ppto.dot(a, a).numpy(), np.eye(2))
        assert DotOnly.calls == [((2, 2), (2, 2))]
        with pytest.raises(
            ppto.BackendError, match="no implementation of 'exp'.*exp_impl"
        ):
            ppto.exp(a)
    finally:
        ppto.unregister_backend("dotonly")


def test_register_backend_validates():
    with pytest.raises(ppto.BackendError, match="defines no operator"):
        ppto.register_backend("empty", object())

    class Misspelled:
        xp = np

        @staticmethod
        def dott_impl(A, B):
            return A @ B

    # the misspelled implementation was ignored silently: ppto's own dot ran
    with pytest.raises(ppto.BackendError, match="dott_impl.*did you mean dot_impl"):
        ppto.register_backend("misspelled", Misspelled)
    assert all(device.kind != "misspelled" for device in ppto.devices())
    with pytest.raises(ppto.BackendError, match="built in"):
        ppto.register_backend("cpu", SimBackend)
    with pytest.raises(ppto.BackendError, match="identifier"):
        ppto.register_backend("my hw", SimBackend)


def test_shape_mismatch_names_operator_signature_and_shapes():
    a, b = ppto.tensor(np.ones((3, 4))), ppto.tensor(np.ones((5, 6)))
    with pytest.raises(ppto.ShapeError) as info:
        ppto.dot(a, b)
    message = str(info.value)
    assert "ppto.dot" in message and "(3, 4), (5, 6)" in message
    assert (
        "(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]" in message and "K is 4" in message
    )


def test_broadcast_mismatch_is_a_shape_error():
    with pytest.raises(
        ppto.ShapeError, match=r"ppto.add: shapes \(3,\), \(4,\).*broadcast"
    ):
        ppto.tensor(np.ones(3)) + ppto.tensor(np.ones(4))


def filled_like(x, y):
    return np.sum(np.full_like(x, y) * x)


def test_a_fill_that_does_not_broadcast_to_its_target_is_a_shape_error():
    # in generated code it was NumPy's ValueError from the generated line
    message = r"ppto.full_like: shapes \(3,\), \(4,\).*must broadcast to .*\(3,\)"
    with pytest.raises(ppto.ShapeError, match=message):
        ppto.full_like(ppto.tensor(np.ones(3)), ppto.tensor(np.ones(4)))
    with pytest.raises(ppto.ShapeError, match=message) as info:
        ppto.grad(filled_like, wrt=1)(np.ones(3), np.ones(4))
    assert "np.full_like(x, y)" in str(info.value)  # the user's line
    # (a fill that broadcasts, a smaller one or a number, is fine)
    gradient = ppto.grad(filled_like, wrt=1)(np.arange(6.0).reshape(2, 3), np.ones(3))
    np.testing.assert_allclose(gradient.numpy(), [3.0, 5.0, 7.0])


def test_a_fill_may_have_leading_axes_of_size_one_as_in_numpy():
    x, fill = np.arange(6.0).reshape(2, 3), np.full((1, 2, 3), 0.5)
    filled = ppto.full_like(ppto.tensor(x), ppto.tensor(fill))
    np.testing.assert_array_equal(filled.numpy(), np.full_like(x, fill))
    gradient = ppto.grad(filled_like, wrt=1)(x, fill).numpy()
    assert gradient.shape == (1, 2, 3)
    np.testing.assert_allclose(gradient, x[None])  # d/dfill sum(fill * x) = x
    unfit = ppto.full_like(ppto.symbol("s", (2, 3)), ppto.symbol("g", (4,)))
    with pytest.raises(ppto.ShapeError, match="must broadcast"):  # symbols too
        unfit.shape  # noqa: B018  (a symbolic shape is worked out when asked for)


def test_an_operator_called_in_numpys_order_says_how_to_call_it():
    # ppto.einsum("ij,kj->ik", a, b) was refused as "argument 'ij,kj->ik' has
    # dtype <U9 ... strings cannot be tensors"
    a = ppto.tensor(np.arange(6.0).reshape(2, 3))
    message = r"takes an array as a, got the string 'ij,kj->ik'.*subscripts=\.\.\."
    with pytest.raises(ppto.DTypeError, match=message):
        ppto.einsum("ij,kj->ik", a, a)
    product = ppto.einsum(a, a, subscripts="ij,kj->ik")
    np.testing.assert_allclose(product.numpy(), a.numpy() @ a.numpy().T)
    with pytest.raises(ppto.DTypeError, match="strings cannot be tensors"):
        ppto.exp("a")  # (no parameter took an array: not a matter of order)


def test_an_operator_of_a_list_given_no_list_says_to_pass_one():
    # ppto.concat(t) of a 0-d t (no rows to read as the list) said only "expected
    # a list of tensors, got Tensor", naming neither the operator nor what to write
    x = ppto.tensor(1.0)
    with pytest.raises(ppto.PptoError, match=r"ppto.concat takes a list .* as xs"):
        ppto.concat(x)
    assert ppto.stack([x, x]).shape == (2,)
    # ppto.meshgrid(x, y), as np.meshgrid is called, read x's rows as the list
    # and y as indexing=: "the truth value of an array ... is ambiguous"
    row = ppto.tensor([1.0, 2.0])
    with pytest.raises(ppto.PptoError, match=r"in one list, ppto.meshgrid\(\[x, y\]\)"):
        ppto.meshgrid(row, row)


def test_dtypes_the_array_library_refuses_are_dtype_errors():
    # NumPy's TypeError (bool - bool, an unsupported loop) was a ShapeError (a
    # ValueError) saying the inputs' shapes, which were fine
    flags = ppto.tensor([True, False])
    with pytest.raises(ppto.DTypeError, match=r"ppto.sub.*of dtype bool, bool"):
        flags - flags
    with pytest.raises(TypeError, match="boolean negative"):  # (as NumPy's)
        ppto.neg(flags)


def test_array_library_errors_are_wrapped_with_context():
    with pytest.raises(
        ppto.ShapeError, match=r"ppto.reshape.*\(2, 3\).*shape=\(4, 4\)"
    ):
        ppto.reshape(ppto.tensor(np.ones((2, 3))), (4, 4))


def test_bad_arguments_are_named():
    with pytest.raises(ppto.PptoError, match="unexpected argument 'axes'.*reduce_sum"):
        ppto.reduce_sum(ppto.tensor([1.0]), axes=0)
    with pytest.raises(ppto.PptoError, match="missing argument"):
        ppto.add(ppto.tensor([1.0]))
    with pytest.raises(ppto.PptoError, match=r"missing argument\(s\) \['a'\]"):
        ppto.sub(b=ppto.tensor([1.0]))
    with pytest.raises(ppto.PptoError, match="got 'a' by position and by name"):
        ppto.sub(ppto.tensor([1.0]), a=ppto.tensor([2.0]))


def test_inputs_passed_by_name_take_their_place_in_any_order():
    # (ppto.sub(b=..., a=...) was refused as "an unexpected argument 'a'": inputs
    # by name were appended in the order written, then a came too late)
    a, b = ppto.tensor([5.0]), ppto.tensor([1.0])
    assert float(ppto.sub(b=b, a=a)[0]) == 4.0
    chosen = ppto.where(np.array([True, False]), b=np.zeros(2), a=np.ones(2))
    np.testing.assert_array_equal(chosen.numpy(), [1.0, 0.0])


def test_parameters_given_as_tensors_reach_the_implementation_as_arrays():
    # (clip's bounds and split's points once sent the implementation back into
    # ppto without end; a slope gave a tensor wrapped in a tensor)
    x = ppto.tensor([-2.0, 0.25, 3.0])
    clipped = ppto.clip(x, ppto.tensor(-1.0), ppto.tensor([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(clipped), [-1.0, 0.0, 2.0])
    leaky = ppto.leaky_relu(x, negative_slope=ppto.tensor(0.5))
    assert type(leaky.data) is np.ndarray
    np.testing.assert_array_equal(np.asarray(leaky), [-1.0, 0.25, 3.0])
    first, second = ppto.split(x, ppto.tensor([1]))
    assert first.shape == (1,) and second.shape == (2,)
    on_sim = ppto.clip(x.to("sim"), ppto.tensor(-1.0), 1.0)
    assert on_sim.device == "sim"
    np.testing.assert_array_equal(np.asarray(on_sim), [-1.0, 0.25, 1.0])
    bounds = ppto.tensor([-0.5, 0.0, 0.5]), ppto.tensor([0.5, 0.4, 2.5])
    report = ppto.check_grad(lambda v: ppto.clip(v, *bounds), x)
    assert report.ok, str(report)


def test_object_arrays_passed_to_operators_are_refused():
    with pytest.raises(ppto.DTypeError, match="ppto.exp|exp: a NumPy argument"):
        ppto.exp(np.array([object()], dtype=object))


def test_numpy_where_with_a_zero_is_exactly_np_where(monkeypatch):
    """The NumPy backend computes where(mask, values, 0) by masking the values' bits:
    the same array bit for bit, signed zeros, infinities and NaN included, for every
    float width and for strided values, without calling np.where."""
    from ppto.runtime.backends import backend_for

    where = backend_for(ppto.Device("cpu")).override("where")
    rng = np.random.default_rng(0)
    cases = []
    for dtype in ("float64", "float32", "float16"):
        values = rng.standard_normal((40, 30)).astype(dtype)
        mask = rng.standard_normal((40, 30)) > 0
        spoiled = values.copy()
        spoiled[0, :3] = [np.inf, -np.inf, np.nan]
        mask[0, :2] = False  # infinities masked out: zeros, not NaN
        strided = rng.standard_normal((30, 80)).astype(dtype).T[::2]
        for a in (values, spoiled, -np.abs(values), strided):
            for args in ((mask, a, 0.0), (mask, 0, a), (mask, a, 0)):
                cases.append((args, np.where(*args)))
        strided_mask = (rng.standard_normal((30, 80)) > 0).T[::2]  # (its bytes too)
        for args in ((strided_mask, values, 0.0), (strided_mask, 0.0, strided)):
            cases.append((args, np.where(*args)))
    calls = []
    monkeypatch.setattr(np, "where", lambda *args: calls.append(args))
    for args, expected in cases:
        with np.errstate(all="raise"):  # no warning np.where would not give
            got = where(*args)
        assert got.dtype == expected.dtype and got.flags.writeable
        assert np.array_equal(np.signbit(got), np.signbit(expected))
        assert got.tobytes() == expected.tobytes()  # NaN's bits too
    assert calls == []


def test_numpy_where_with_other_zeros_and_arrays_is_np_where():
    """-0.0 stays -0.0, and 0-d or byte-swapped values still give np.where's result
    (the bitwise route is only for +0 and native arrays with an axis)."""
    from ppto.runtime.backends import backend_for

    where = backend_for(ppto.Device("cpu")).override("where")
    rng = np.random.default_rng(1)
    values = rng.standard_normal(50)
    mask = values > 0
    cases = [
        (mask, values, -0.0),
        (mask, -0.0, values),
        (np.array(True), np.array(2.5), 0.0),
        (mask, values.astype(">f8"), 0.0),
    ]
    for args in cases:
        got, expected = where(*args), np.where(*args)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def test_where_into_a_block_is_np_where_bit_for_bit():
    """A fused pass writes where(mask, values, 0) into its block of rows (``out=``,
    which np.where lacks): the bits np.where gives, by the masking route where it
    applies and np.where's value copied in where not (other zeros, 0-d values)."""
    from ppto.runtime.backends import where_into

    rng = np.random.default_rng(2)
    for dtype in ("float64", "float32"):
        values = rng.standard_normal((64, 8)).astype(dtype)
        values[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
        mask = rng.standard_normal((64, 8)) > 0
        mask[0, :2] = False
        for args in ((mask, values, 0.0), (mask, 0, values), (mask, values, -0.0),
                     (mask, values, 1.5), (mask, values[:1], 0.0)):  # fmt: skip
            expected = np.where(*args)
            whole = np.full((128, 8), 7.0, dtype)
            block = whole[32:96]  # a block of a pass's output rows
            got = where_into(*args, out=block)
            assert got is block
            assert block.tobytes() == expected.tobytes()  # NaN's and zeros' bits
            assert (whole[:32] == 7.0).all() and (whole[96:] == 7.0).all()
        # written over its own values (a fused kernel's destination holding them)
        for args in ((mask, 0.0), (0.0, mask)):
            expected = np.where(mask, *[values if a is mask else a for a in args])
            block = values.copy()
            operands = [block if a is mask else a for a in args]
            assert where_into(mask, *operands, out=block) is block
            assert block.tobytes() == expected.tobytes()


def test_numpy_mean_is_np_mean_bit_for_bit():
    """The NumPy backend's mean (np.mean's steps without its dispatch) gives the very
    result np.mean gives: type, shape, dtype and bits, for every axis and keepdims,
    float32 and float64, and falls back to np.mean for other dtypes and empty arrays."""
    from ppto.runtime.backends import backend_for

    mean = backend_for(ppto.Device("cpu")).override("reduce_mean")
    rng = np.random.default_rng(2)
    arrays = [
        (rng.standard_normal(shape) * scale).astype(dtype)
        for dtype in ("float32", "float64")
        for shape in [(257,), (7, 13), (3, 4, 5), (1,), ()]
        for scale in (1e-3, 1.0, 1e4)
    ]
    arrays += [np.arange(12).reshape(3, 4), np.ones((2, 0)), np.ones(6, "float16")]
    for x in arrays:
        axes = [None, *range(x.ndim)] + ([(0, x.ndim - 1)] if x.ndim > 1 else [])
        for axis in axes:
            for keepdims in (False, True):
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected = np.mean(x, axis=axis, keepdims=keepdims)
                    got = mean(x, axis=axis, keepdims=keepdims)
                assert type(got) is type(expected)
                assert got.dtype == expected.dtype and got.shape == expected.shape
                assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_numpy_max_and_min_are_np_max_and_min_bit_for_bit(name):
    """The NumPy backend's maximum and minimum (the ufuncs' reduce without np.max's
    dispatch) give what np.max and np.min give: type, shape, dtype and bits (NaN
    and signed zeros), every axis and keepdims; an empty reduction raises alike
    and a Python list still works."""
    from ppto.runtime.backends import backend_for

    own = backend_for(ppto.Device("cpu")).override(name)
    numpy = np.max if name == "reduce_max" else np.min
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(dtype)
              for dtype in ("float32", "float64", "int64")
              for shape in [(257,), (7, 13), (3, 4, 5), ()]]  # fmt: skip
    spoiled = rng.standard_normal((4, 6))
    spoiled[1, 2], spoiled[2, :] = np.nan, [0.0, -0.0] * 3
    arrays += [spoiled, spoiled.T[::2]]
    for x in arrays:
        axes = [None, *range(x.ndim)] + ([(0, x.ndim - 1)] if x.ndim > 1 else [])
        for axis in axes:
            for keepdims in (False, True):
                expected = numpy(x, axis=axis, keepdims=keepdims)
                got = own(x, axis=axis, keepdims=keepdims)
                assert type(got) is type(expected)
                assert got.dtype == expected.dtype and got.shape == expected.shape
                assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()
    with pytest.raises(ValueError, match="zero-size array"):
        own(np.ones((2, 0)), axis=1)
    assert own([[1.0, 3.0], [2.0, -1.0]], axis=0).tolist() == (
        numpy([[1.0, 3.0], [2.0, -1.0]], axis=0).tolist()
    )


def test_numpy_unreduce_is_the_operators_broadcast_view():
    """The NumPy backend's unreduce (a 0-d value's zero-stride view made directly)
    gives what the operator's own implementation (np.broadcast_to) gives: type,
    shape, dtype, strides, values and a read-only view, for 0-d arrays, NumPy and
    Python scalars against arrays and saved shapes; other values fall back to it."""
    from ppto.ops.reductions import unreduce
    from ppto.runtime.backends import backend_for

    own = backend_for(ppto.Device("cpu")).override("unreduce")
    likes = [np.ones((4, 3), "float32"), np.ones(()), np.ones((2, 0, 5)), (2, 3)]
    values = [np.asarray(np.float32(-0.25)), np.float64(1.5), 2.5, np.complex64(1j)]
    values += [np.float32(np.nan), np.arange(3.0), np.array([[1.0], [2.0]]), 3]
    values += [np.array(None, dtype=object)]
    for like in likes:
        for x in values:
            for axis, keepdims in [(None, False), (1, True), (0, False)]:
                try:
                    expected = unreduce.impl(np, x, like, axis, keepdims)
                except (ValueError, IndexError) as error:  # (a mismatch: the same)
                    with pytest.raises(type(error)):
                        own(x, like, axis, keepdims)
                    continue
                got = own(x, like, axis, keepdims)
                assert type(got) is type(expected)
                assert got.dtype == expected.dtype and got.shape == expected.shape
                assert got.strides == expected.strides
                assert not got.flags.writeable
                assert np.array_equal(got, expected, equal_nan=x is not values[-1])


def test_the_mean_of_a_gather_differentiates_through_the_numpy_unreduce():
    """A loss that is the mean of gathered entries (cross-entropy's), whose gradient
    runs the NumPy unreduce on a 0-d value, against central differences."""

    def loss(z, labels):
        rows = np.arange(z.shape[0])
        return -np.mean(z[rows, labels] * np.tanh(z[rows, labels]))

    rng = np.random.default_rng(3)
    z, labels = rng.standard_normal((6, 4)), np.array([0, 3, 3, 1, 2, 0])
    lowered = ppto.show_grad(loss, z, labels, lowered=True, file=io.StringIO())
    assert "unreduce_impl(dt" in lowered  # (the NumPy backend's own: no xp)
    got = np.asarray(ppto.grad(loss)(z, labels))
    step, expected = 1e-6, np.zeros_like(z)
    for i in np.ndindex(z.shape):
        shift = np.zeros_like(z)
        shift[i] = step
        expected[i] = (loss(z + shift, labels) - loss(z - shift, labels)) / (2 * step)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
    assert ppto.check_grad(loss, z, labels).ok


class Transposing:
    """A backend whose dot returns the product transposed."""

    xp = np

    @staticmethod
    def dot_impl(A, B):
        return np.matmul(A, B).T

    @staticmethod
    def exp_impl(x):
        return np.exp(x)


class ByAlias:
    xp = np
    calls = 0

    @staticmethod
    def matmul_impl(A, B):
        ByAlias.calls += 1
        return np.matmul(A, B)


def test_a_backend_result_of_the_wrong_shape_is_refused():
    # a wrong shape from a user's implementation flowed on silently
    ppto.register_backend("transposing", Transposing)
    try:
        a = ppto.tensor(np.ones((2, 3)), device="transposing")
        b = ppto.tensor(np.ones((3, 4)), device="transposing")
        message = (
            r"dot_impl returned a result of shape \(4, 2\).*ppto.dot gives \(2, 4\)"
        )
        with pytest.raises(ppto.BackendError, match=message):
            ppto.dot(a, b)
        with pytest.raises(ppto.BackendError, match=message):  # generated code too
            ppto.grad(lambda A, B: ppto.reduce_sum(ppto.dot(A, B)))(a, b)
        np.testing.assert_allclose(ppto.exp(a).numpy(), np.e * np.ones((2, 3)))
    finally:
        ppto.unregister_backend("transposing")


class Narrowing:
    """A backend whose dot computes in float32, whatever its inputs, and whose sum
    of integers wraps around in int8."""

    xp = np

    @staticmethod
    def dot_impl(A, B):
        return np.matmul(A.astype(np.float32), B.astype(np.float32))

    @staticmethod
    def reduce_sum_impl(x, axis=None, keepdims=False):
        return np.sum(x, axis, keepdims=keepdims).astype(np.int8)


def test_a_backend_result_of_the_wrong_dtype_is_refused():
    # only the shape was checked: float64 tensors came out of the backend's dot as
    # float32 (and a sum as int8) without a word
    ppto.register_backend("narrowing", Narrowing)
    try:
        a = ppto.tensor(np.ones((2, 3)), device="narrowing")
        b = ppto.tensor(np.ones((3, 4)), device="narrowing")
        message = (
            r"dot_impl returned a result of dtype float32 for inputs of dtype "
            r"float64, float64, but ppto.dot gives float64"
        )
        with pytest.raises(ppto.BackendError, match=message):
            ppto.dot(a, b)
        with pytest.raises(ppto.BackendError, match=message):  # generated code too
            ppto.grad(lambda A, B: ppto.reduce_sum(ppto.dot(A, B)))(a, b)
        counts = ppto.tensor(np.full(300, 1), device="narrowing")
        with pytest.raises(ppto.BackendError, match="dtype int8.*gives int64"):
            counts.sum()
    finally:
        ppto.unregister_backend("narrowing")


class Faulty:
    """A backend whose dot takes one argument too few, and whose exp fails."""

    xp = np

    @staticmethod
    def dot_impl(A):
        return A

    @staticmethod
    def exp_impl(x):
        raise RuntimeError("device fault")


def test_a_backend_implementation_that_fails_is_named():
    # a dot_impl taking other parameters than ppto's was a ShapeError about the
    # inputs' shapes, and an implementation's own error came out raw; NumPy's
    # refusals of the inputs still are the operator's errors
    ppto.register_backend("faulty", Faulty)
    try:
        a = ppto.tensor(np.ones((2, 2)), device="faulty")
        with pytest.raises(ppto.BackendError, match=r"'faulty': dot_impl cannot be "):
            ppto.dot(a, a)
        with pytest.raises(ppto.BackendError, match="exp_impl raised RuntimeError"):
            ppto.exp(a)
        with pytest.raises(ppto.ShapeError, match="out of bounds"):
            a[5]
    finally:
        ppto.unregister_backend("faulty")


def test_an_implementation_named_by_an_alias_runs():
    ppto.register_backend("by_alias", ByAlias)
    try:
        a = ppto.tensor(np.arange(6.0).reshape(2, 3), device="by_alias")
        b = ppto.tensor(np.ones((3, 2)), device="by_alias")
        np.testing.assert_allclose(
            ppto.dot(a, b).numpy(), np.arange(6.0).reshape(2, 3) @ np.ones((3, 2))
        )
        assert ByAlias.calls == 1
    finally:
        ppto.unregister_backend("by_alias")


class Segments:
    """A correct segment_sum whose result's length depends on the ids' values, and a
    helper of its own (a leading underscore: not an operator)."""

    xp = np
    calls = 0

    @staticmethod
    def segment_sum_impl(data, ids, num_segments=None):
        Segments.calls += 1
        count = int(ids.max()) + 1 if num_segments is None else num_segments
        out = np.zeros((count,) + data.shape[1:], data.dtype)
        np.add.at(out, ids, data)
        return out

    @staticmethod
    def _gemm_impl(A, B):
        return A @ B


class Twice:
    xp = np

    @staticmethod
    def dot_impl(A, B):
        return A @ B

    @staticmethod
    def matmul_impl(A, B):
        return A @ B


def test_backend_checks_refuse_nothing_correct():
    # a shape that depends on values was refused (stand-in ids of zeros give one
    # segment), and so was a backend with a helper named like an implementation
    ppto.register_backend("segments", Segments)
    try:
        data = ppto.tensor(np.arange(6.0).reshape(3, 2), device="segments")
        ids = ppto.tensor(np.array([0, 2, 2]), device="segments")
        total = ppto.segment_sum(data, ids)
        np.testing.assert_allclose(total.numpy(), [[0.0, 1.0], [0.0, 0.0], [6.0, 8.0]])
        assert Segments.calls == 1  # (the backend's own, not ppto's)
    finally:
        ppto.unregister_backend("segments")
    with pytest.raises(ppto.BackendError, match="both dot_impl and matmul_impl"):
        ppto.register_backend("twice", Twice)


def test_expected_shapes_come_from_signatures_or_small_reference_runs():
    from ppto.ops import expected

    big = np.lib.stride_tricks.as_strided(np.zeros(1), (2048, 1024), (0, 0))
    f8 = np.dtype("float64")
    # matrix products and broadcasting: from the signature, whatever the size (the
    # dtype from a run on one element per axis)
    assert expected._expected(ppto.dot, (big, big.T), {}) == ((2048, 2048), f8)
    small = np.ones(1024, np.float32)
    assert expected._expected(ppto.add, (big, small), {}) == ((2048, 1024), f8)
    assert expected._expected(ppto.reduce_sum, (big,), {"axis": 0}) == ((1024,), f8)
    # anything else runs the operator, on inputs of at most PROBE_LIMIT elements
    softmax = expected._expected(ppto.softmax, (big[:4],), {"axis": 1})
    assert softmax == ((4, 1024), f8)
    assert expected._expected(ppto.softmax, (big,), {"axis": 1}) is None


def gathered_squares(W, idx):
    return np.sum(W[idx] ** 2)


def test_a_backends_constructors_are_not_written_into():
    # ppto's own backends make a new array at every zeros_like; another backend's
    # may hand out a shared one, which a gather's gradient must then copy
    import types

    pool = {}

    def pooled_zeros_like(x, dtype=None, **keywords):
        key = (np.shape(x), np.dtype(dtype or np.asarray(x).dtype))
        return pool.setdefault(key, np.zeros(*key))

    namespace = types.ModuleType("pooled_numpy")
    namespace.__dict__.update({k: getattr(np, k) for k in dir(np) if k[:2] != "__"})
    namespace.zeros_like = pooled_zeros_like

    class Pooled:
        xp = namespace

    ppto.register_backend("pooled_zeros", Pooled)
    try:
        W = ppto.tensor(np.arange(6.0).reshape(3, 2), device="pooled_zeros")
        rows = np.array([2, 0, 2])
        expected = np.zeros((3, 2))
        np.add.at(expected, rows, 2 * np.arange(6.0).reshape(3, 2)[rows])
        for _ in range(3):
            gradient = ppto.grad(gathered_squares)(W, rows)
            np.testing.assert_array_equal(gradient.numpy(), expected)
        assert pool and all(not block.any() for block in pool.values())
    finally:
        ppto.unregister_backend("pooled_zeros")
