"""What the corpus tests share: every corpus case, the reference they are compared
with (float64 central differences of the plain function on NumPy arrays), the
tolerances, and the ``KNOWN_FAILING`` mechanism.

Entries of a corpus module's ``KNOWN_FAILING`` ``{(test, case id): reason}`` are
bugs not fixed yet: their check must still fail, so the test flips when the bug is
fixed (then remove the entry). ``test`` is one of ``KNOWN_TESTS``; ``reason`` says
what fails and why. No corpus check is known to fail at present.
"""

import numpy as np
import pytest

from tests.corpus import local_functions, loops, numpy_style, ppto_style
from tests.corpus.case import numpy_arguments

MODULES = (numpy_style, ppto_style, loops, local_functions)
CASES = [case for module in MODULES for case in module.CASES]
KNOWN_FAILING = {
    key: reason
    for module in MODULES
    for key, reason in getattr(module, "KNOWN_FAILING", {}).items()
}
# The names a KNOWN_FAILING entry may use, one per check that calls ``expect``.
KNOWN_TESTS = {
    "grad",
    "value_and_grad",
    "vjp",
    "vjp_scalar",
    "grad_names",
    "grad_non_scalar",
    "value_and_grad_non_scalar",
    "grad_integer",
    "show_grad",
    "show_grad_hash_seed",
    "jvp",
    "jvp_all",
    "hvp",
}

EPS = 1e-6
RTOL = 1e-6


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


def moved(arguments, direction: dict, step: float) -> tuple:
    """NumPy copies of ``arguments`` with ``step * direction[i]`` added to each
    argument ``i`` that ``direction`` names."""
    out = list(numpy_arguments(arguments))
    for position, tangent in direction.items():
        out[position] = out[position] + step * tangent
    return tuple(out)


def directional_differences(function, arguments, direction: dict, eps=EPS):
    """d/dt function(arguments + t * direction) at t = 0; tuples stay tuples."""
    ahead = function(*moved(arguments, direction, eps))
    behind = function(*moved(arguments, direction, -eps))
    if isinstance(ahead, tuple):
        return tuple((a - b) / (2 * eps) for a, b in zip(ahead, behind))
    return (ahead - behind) / (2 * eps)


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


def assert_gradient(actual, expected, what, rtol=RTOL):
    actual = np.asarray(actual)
    assert isinstance(actual, np.ndarray)
    assert actual.shape == expected.shape, (
        f"{what}: gradient shape {actual.shape}, expected {expected.shape}"
    )
    assert actual.dtype == np.float64, f"{what}: gradient dtype {actual.dtype}"
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1e-2)
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    assert error <= rtol * scale, (
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
