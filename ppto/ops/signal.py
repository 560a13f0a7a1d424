"""Signals: the discrete convolution and correlation of two 1-D arrays
(``np.convolve``, ``np.correlate``, modes full, same and valid).

Both are bilinear (tangents derived). A mode's result is a window of the full
one, so a gradient puts dY back where its window sits (zeros around it) and
correlates it with the other input.
"""

import numpy as np

from ppto.errors import PptoError
from ppto.ops.arrange import pad
from ppto.ops.primitive import primitive
from ppto.ops.rules import shape_helper
from ppto.ops.shape import flip

SIGNALS = "(Tensor[N], Tensor[M]) -> Tensor[K]"
MODES = ("full", "same", "valid")


def check_mode(a, v, mode, name: str) -> None:
    """NumPy's modes (by name); empty inputs refused, as NumPy refuses them."""
    if mode not in MODES:
        raise PptoError(
            f"ppto.{name} takes mode='full', 'same' or 'valid', not {mode!r}"
        )
    if not (np.size(a) and np.size(v)):
        raise PptoError(f"ppto.{name} of an empty array: NumPy refuses it too")


@primitive(SIGNALS, tangent="bilinear")
def convolve(xp, a, v, mode="full"):
    """The discrete convolution of two 1-D arrays, like np.convolve: out[k] =
    sum over n of a[n] * v[k - n], all len(a) + len(v) - 1 of them ('full'), the
    middle max(len(a), len(v)) ('same') or those where the two overlap
    entirely ('valid')."""
    check_mode(a, v, mode, "convolve")
    return xp.convolve(a, v, mode=mode)


@convolve.grad_rule
def _(a, v, mode="full"):
    def backward(dY):
        # dY where it sits in the full convolution, correlated with the other input
        full = pad(dY, 0.0, full_window(a, v, mode))
        return correlate(full, v, "valid"), correlate(full, a, "valid")

    return backward


@primitive(SIGNALS, tangent="bilinear")
def correlate(xp, a, v, mode="valid"):
    """The cross-correlation of two 1-D real arrays, like np.correlate: out[k] =
    sum over n of a[n + k] * v[n], NumPy's modes (its default: 'valid'); the
    convolution of a with v reversed."""
    check_mode(a, v, mode, "correlate")
    return xp.correlate(a, v, mode=mode)


@correlate.grad_rule
def _(a, v, mode="valid"):
    def backward(dY):
        full = pad(dY, 0.0, full_window(a, v, mode, True))
        return convolve(full, v, "valid"), flip(correlate(full, a, "valid"))

    return backward


@shape_helper
def full_window(a, v, mode, correlation=False):
    """The pad widths that put a ``mode`` result of np.convolve (of np.correlate:
    ``correlation``) back where it sits in the full result (NumPy centres 'same'
    one place later for a correlation with the longer array second)."""
    n, m = np.shape(a)[0], np.shape(v)[0]
    full = n + m - 1
    if mode == "full":
        return ((0, 0),)
    if mode == "valid":
        before, length = min(n, m) - 1, abs(n - m) + 1
    else:  # (same)
        before, length = (min(n, m) - 1) // 2, max(n, m)
        if correlation and n < m:
            before = n // 2
    return ((before, full - length - before),)
