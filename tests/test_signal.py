"""np.convolve and np.correlate for every pair of lengths and mode: values against
NumPy (whose 'same' window of a correlation with the longer array second sits one
place later) and gradients against central differences; the refusals."""

import numpy as np
import pytest

import ppto

PAIRS = [(n, m) for n in range(1, 6) for m in range(1, 6)]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n, m", PAIRS)
def test_values_and_gradients_for_every_length_and_mode(name, mode, n, m):
    rng = np.random.default_rng(n * 10 + m)
    a, v = rng.standard_normal(n), rng.standard_normal(m)
    op = getattr(ppto, name)
    result = getattr(np, name)(ppto.tensor(a), v, mode=mode)
    np.testing.assert_allclose(result.numpy(), getattr(np, name)(a, v, mode=mode))
    report = ppto.check_grad(
        lambda a, v: op(a, v, mode), ppto.tensor(a), ppto.tensor(v), wrt=(0, 1)
    )
    assert report.ok, str(report)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: np.convolve(x, x, mode="circular"), ppto.PptoError, "'circular'"),
        (lambda x: np.correlate(x, x[:0]), ppto.PptoError, "empty array"),
        (
            lambda x: np.convolve(ppto.reshape(x, (2, 2)), x),
            ppto.ShapeError,
            r"convolve.*\(Tensor\[N\], Tensor\[M\]\)",
        ),
    ],
)
def test_refusals_name_the_operator(call, error, message):
    with pytest.raises(error, match=message):
        call(ppto.tensor(np.ones(4)))
