"""The transformation corpus in reverse mode: every corpus function is differentiated
with respect to each differentiable argument (``grad`` per argument,
``value_and_grad`` and ``grad`` by parameter names for all of them, ``vjp`` for every
function: split mode, with a random cotangent for non-scalar results) and compared
with float64 central differences of the plain function evaluated on NumPy arrays.
Also: integer arguments and non-scalar results raise ``GradError``, and generating
the source twice gives the same bytes.

Entries of a corpus module's ``KNOWN_FAILING`` ``{(test, case id): reason}`` are
bugs not fixed yet: their check must still fail, so the test flips when the bug is
fixed (then remove the entry). ``test`` is one of the names in
``test_known_failing_entries_name_real_tests``.
"""

import inspect
import io

import numpy as np
import pytest

import ppto
from tests.corpus import numpy_style, ppto_style
from tests.corpus.case import numpy_arguments

MODULES = (numpy_style, ppto_style)
CASES = [case for module in MODULES for case in module.CASES]
KNOWN_FAILING = {
    key: reason
    for module in MODULES
    for key, reason in getattr(module, "KNOWN_FAILING", {}).items()
}

EPS = 1e-6
RTOL = 1e-6


# --- the reference: central differences, independent of ppto's gradients ---


def as_float(value) -> np.ndarray:
    if isinstance(value, tuple):
        return tuple(as_float(v) for v in value)
    return np.array(np.asarray(value), dtype=np.float64)


def plain(case, arguments):
    """The plain function on NumPy copies of the arguments."""
    return as_float(case.fn(*numpy_arguments(arguments)))


def central_differences(function, arguments, position):
    """d function(*arguments) / d arguments[position], one element at a time."""
    arguments = list(numpy_arguments(arguments))
    point = arguments[position]
    if isinstance(point, float):

        def at(value):
            arguments[position] = value
            return float(function(*arguments))

        return np.array((at(point + EPS) - at(point - EPS)) / (2 * EPS))
    point = np.array(point, dtype=np.float64)
    gradient = np.zeros_like(point)
    for index in np.ndindex(point.shape):
        values = []
        for step in (EPS, -EPS):
            moved = point.copy()
            moved[index] += step
            arguments[position] = moved
            values.append(float(function(*arguments)))
        gradient[index] = (values[0] - values[1]) / (2 * EPS)
    arguments[position] = point
    return gradient


def scalar_function(case):
    return lambda *arguments: as_float(case.fn(*arguments))


def contracted_function(case, cotangent):
    """sum(cotangent * f(...)) over every output, for checking a pullback."""

    def function(*arguments):
        out = as_float(case.fn(*arguments))
        outs, cots = (
            (out, cotangent) if isinstance(out, tuple) else ((out,), (cotangent,))
        )
        return sum(float(np.sum(c * o)) for c, o in zip(cots, outs))

    return function


def assert_gradient(actual, expected, what):
    actual = np.asarray(actual)
    assert isinstance(actual, np.ndarray)
    assert actual.shape == expected.shape, (
        f"{what}: gradient shape {actual.shape}, expected {expected.shape}"
    )
    assert actual.dtype == np.float64, f"{what}: gradient dtype {actual.dtype}"
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1e-2)
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    assert error <= RTOL * scale, (
        f"{what}: max error {error:.3g} (scale {scale:.3g})\n"
        f"ppto:\n{actual}\nfinite differences:\n{expected}"
    )


def assert_value(actual, expected, what):
    np.testing.assert_allclose(
        np.asarray(actual), expected, rtol=1e-12, atol=1e-14, err_msg=what
    )


def expect(test: str, case_id: str):
    """Run the check; a known failure must still fail."""
    reason = KNOWN_FAILING.get((test, case_id))
    return _Passes() if reason is None else _StillFails(test, case_id, reason)


class _Passes:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _StillFails:
    """Swallows the failure of a KNOWN_FAILING check; complains if there is none."""

    def __init__(self, test, case_id, reason):
        self.key, self.reason = (test, case_id), reason

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if kind is None:
            pytest.fail(
                f"{self.key} is in KNOWN_FAILING ({self.reason}) but now passes: "
                "remove it from KNOWN_FAILING"
            )
        return issubclass(kind, (Exception, pytest.fail.Exception))


# --- parametrization ---

SCALAR = [c for c in CASES if not c.vjp]
NON_SCALAR = [c for c in CASES if c.vjp]
PER_ARGUMENT = [
    pytest.param(case, position, id=f"{case.id}-wrt{position}")
    for case in SCALAR
    for position in case.wrt
]
INTEGER = [
    pytest.param(case, position, id=f"{case.id}-arg{position}")
    for case in CASES
    for position in case.integer_positions()
]


def ids(case):
    return case.id


def test_corpus_size():
    assert len({case.fn for case in CASES}) >= 80
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("case, position", PER_ARGUMENT)
def test_grad_matches_finite_differences(case, position):
    arguments = case.arguments()
    with expect("grad", f"{case.id}-wrt{position}"):
        gradient = ppto.grad(case.fn, wrt=position)(*arguments)
        assert isinstance(gradient, ppto.Tensor)
        expected = central_differences(scalar_function(case), arguments, position)
        assert_gradient(gradient, expected, f"{case.id} d/d arg {position}")


@pytest.mark.parametrize("case", SCALAR, ids=ids)
def test_value_and_grad_matches(case):
    arguments = case.arguments()
    with expect("value_and_grad", case.id):
        value, gradients = ppto.value_and_grad(case.fn, wrt=case.wrt)(*arguments)
        assert isinstance(gradients, tuple) and len(gradients) == len(case.wrt)
        assert_value(value, plain(case, arguments), f"{case.id} value")
        for position, gradient in zip(case.wrt, gradients):
            expected = central_differences(scalar_function(case), arguments, position)
            assert_gradient(gradient, expected, f"{case.id} d/d arg {position}")


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_vjp_matches(case):
    arguments = case.arguments()
    with expect("vjp", case.id):
        out, pullback = ppto.vjp(case.fn, *arguments)
        reference = plain(case, arguments)
        rng = np.random.default_rng(7)
        if isinstance(reference, tuple):
            assert isinstance(out, tuple) and len(out) == len(reference)
            for o, r in zip(out, reference):
                assert_value(o, r, f"{case.id} value")
            cotangent = tuple(rng.standard_normal(r.shape) for r in reference)
        else:
            assert_value(out, reference, f"{case.id} value")
            cotangent = rng.standard_normal(reference.shape)
        gradients = pullback(cotangent)
        assert len(gradients) == len(arguments)
        function = contracted_function(case, cotangent)
        for position in case.wrt:
            expected = central_differences(function, arguments, position)
            assert_gradient(
                gradients[position], expected, f"{case.id} vjp arg {position}"
            )


@pytest.mark.parametrize("case", SCALAR, ids=ids)
def test_vjp_of_scalar_functions(case):
    """Split mode (forward saves, backward replays) on every scalar function, with
    a cotangent other than one."""
    arguments = case.arguments()
    with expect("vjp_scalar", case.id):
        out, pullback = ppto.vjp(case.fn, *arguments)
        assert_value(out, plain(case, arguments), f"{case.id} value")
        gradients = pullback(-1.5)
        assert len(gradients) == len(arguments)
        for position in case.wrt:
            expected = -1.5 * central_differences(
                scalar_function(case), arguments, position
            )
            assert_gradient(
                gradients[position], expected, f"{case.id} vjp arg {position}"
            )


@pytest.mark.parametrize("case", [c for c in SCALAR if len(c.wrt) > 1], ids=ids)
def test_grad_by_parameter_names(case):
    """``wrt`` given as parameter names, in reverse order, gives the same gradients
    as positions."""
    arguments = case.arguments()
    names = list(inspect.signature(inspect.unwrap(case.fn)).parameters)
    with expect("grad_names", case.id):
        by_name = ppto.grad(case.fn, wrt=tuple(names[i] for i in case.wrt[::-1]))(
            *arguments
        )
        by_position = ppto.grad(case.fn, wrt=case.wrt[::-1])(*arguments)
        assert len(by_name) == len(by_position) == len(case.wrt)
        for a, b in zip(by_name, by_position):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_grad_of_non_scalar_raises(case):
    arguments = case.arguments()
    with expect("grad_non_scalar", case.id):
        with pytest.raises(ppto.GradError, match="scalar"):
            ppto.grad(case.fn, wrt=case.wrt[0])(*arguments)


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_value_and_grad_of_non_scalar_raises(case):
    arguments = case.arguments()
    with expect("value_and_grad_non_scalar", case.id):
        with pytest.raises(ppto.GradError, match="scalar"):
            ppto.value_and_grad(case.fn, wrt=case.wrt[0])(*arguments)


@pytest.mark.parametrize("case, position", INTEGER)
def test_grad_wrt_integer_raises(case, position):
    arguments = case.arguments()
    with expect("grad_integer", f"{case.id}-arg{position}"):
        with pytest.raises(ppto.GradError):
            ppto.grad(case.fn, wrt=position)(*arguments)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_generated_source_is_deterministic(case):
    arguments = case.arguments()
    with expect("show_grad", case.id):
        first = ppto.show_grad(case.fn, *arguments, wrt=case.wrt, file=io.StringIO())
        second = ppto.show_grad(case.fn, *arguments, wrt=case.wrt, file=io.StringIO())
        assert isinstance(first, str) and first
        assert first == second


@pytest.mark.parametrize("key", sorted(KNOWN_FAILING), ids=str)
def test_known_failing_entries_name_real_tests(key):
    test, case_id = key
    assert test in {
        "grad",
        "value_and_grad",
        "vjp",
        "vjp_scalar",
        "grad_names",
        "grad_non_scalar",
        "value_and_grad_non_scalar",
        "grad_integer",
        "show_grad",
    }
    assert any(case_id.startswith(case.id) for case in CASES), key
