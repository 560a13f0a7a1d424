"""``saved_bytes``: how much memory the backward pass of a gradient keeps.

It runs the generated forward function of ``ppto.vjp``'s split form and counts the
arrays handed to the backward function (tapes included), each array once; the
arguments themselves are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def saved_bytes(function: Callable, *args: Any, wrt: Sequence = (0,)) -> int:
    """Bytes of the values saved for the backward pass of ``function`` at ``args``.

    >>> ppto.debug.saved_bytes(rnn, x, h, Wx, Wh, wrt=("Wx", "Wh"))  # doctest: +SKIP
    1671168
    """
    from ppto.api import Transformed

    transformed = Transformed(function, list(wrt), "split", True)
    _, values, ranks, _, device = transformed.prepare(args, {})
    transformed.program(ranks)
    _, saved = transformed.run(0, ranks, device, values)
    arguments = {id(value) for value in values}
    seen: set[int] = set()
    total, pending = 0, [saved]
    while pending:
        value = pending.pop()
        if isinstance(value, (list, tuple)):
            pending.extend(value)
        elif (
            hasattr(value, "nbytes")
            and id(value) not in seen
            and id(value) not in arguments
        ):
            seen.add(id(value))
            total += int(value.nbytes)
    return total
