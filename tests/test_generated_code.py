"""Properties of the generated code that are not about its numbers: a traceback inside
it shows the generated line, and a value under ``ppto.stop_gradient`` gets no adjoint
at all (not a zero one)."""

import io
import traceback

import numpy as np
import pytest

import ppto


def sqrt_sum(x):
    return np.sum(np.sqrt(x))


def test_traceback_inside_generated_code_shows_the_generated_line():
    gradient = ppto.grad(sqrt_sum)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError) as raised:
        gradient(np.array([0.0, 1.0]))  # the backward pass divides by sqrt(0)
    innermost = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert innermost.filename.startswith("<ppto generated: sqrt_sum_grad")
    assert innermost.line == "dx = dsqrt_sum / (2 * t1)"


def logsumexp_stopped(x):
    peak = ppto.stop_gradient(np.max(x, axis=1, keepdims=True))
    return np.sum(np.log(np.sum(np.exp(x - peak), axis=1)) + peak[:, 0])


def test_stopped_value_gets_no_adjoint():
    x = np.random.default_rng(0).standard_normal((4, 5))
    source = ppto.show_grad(logsumexp_stopped, x, file=io.StringIO())
    assert "dpeak" not in source
    assert "# grad of: peak =" not in source
    # the peak cancels in logsumexp, so holding it constant leaves softmax(x)
    expected = np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True)
    np.testing.assert_allclose(ppto.grad(logsumexp_stopped)(x), expected, rtol=1e-12)
