"""``ppto.checkpoint``: trade memory for recomputation in differentiated code.

``ppto.checkpoint(step)(h, x)`` calls ``step`` as usual; inside a differentiated
function, the values ``step`` computes are not kept for the backward pass, which runs
``step`` again. ``for t in ppto.checkpoint(range(n)):`` does the same for a loop body:
only the values carried from one iteration to the next are saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ppto.errors import PptoError


class Checkpointed:
    """A function whose intermediate values are recomputed rather than saved."""

    def __init__(self, function: Callable) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", "checkpointed")
        self.__wrapped__ = function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ppto.checkpoint of {self.__name__}>"


def checkpoint(target: Any) -> Any:
    """Mark a function (or a loop's range) for recomputation (see module docstring).

    >>> def rnn_step(h, x, W):
    ...     return np.tanh(x @ W + h)
    >>> step = ppto.checkpoint(rnn_step)
    >>> step
    <ppto.checkpoint of rnn_step>
    >>> for t in ppto.checkpoint(range(steps)):     # doctest: +SKIP
    ...     h = np.tanh(x[t] @ Wx + h @ Wh)
    """
    if callable(target) and not isinstance(target, range):
        return Checkpointed(target)
    try:
        iter(target)
    except TypeError as error:
        raise PptoError(
            f"ppto.checkpoint takes a function or a loop's range, got {target!r}: "
            "write ppto.checkpoint(step)(h, x) or for t in ppto.checkpoint(range(n))"
        ) from error
    return target  # an iterable: the transformer reads the mark from the source
