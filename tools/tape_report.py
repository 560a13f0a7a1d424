"""Bytes the backward pass keeps for a 50-step RNN, against the minimum (its 50 hidden
states), with and without ``ppto.checkpoint``.

Run: ``python tools/tape_report.py`` (it uses ``ppto.debug.saved_bytes``).
"""

import numpy as np

import ppto
from ppto.debug import saved_bytes

STEPS, BATCH, INPUT, HIDDEN = 50, 32, 64, 128


def vanilla(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def two_layer(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        a = np.tanh(x[t] @ Wx + h @ Wh + b)
        h = np.tanh(a @ Wh) * 0.5 + h * 0.5
    return np.sum(h**2)


def two_layer_checkpointed(x, h, Wx, Wh, b):
    for t in ppto.checkpoint(range(x.shape[0])):
        a = np.tanh(x[t] @ Wx + h @ Wh + b)
        h = np.tanh(a @ Wh) * 0.5 + h * 0.5
    return np.sum(h**2)


def main() -> None:
    rng = np.random.default_rng(0)
    arguments = (
        rng.standard_normal((STEPS, BATCH, INPUT)),
        rng.standard_normal((BATCH, HIDDEN)) * 0.1,
        rng.standard_normal((INPUT, HIDDEN)) * 0.1,
        rng.standard_normal((HIDDEN, HIDDEN)) * 0.1,
        rng.standard_normal(HIDDEN) * 0.1,
    )
    minimum = STEPS * BATCH * HIDDEN * 8
    print(f"RNN, {STEPS} steps, batch {BATCH}, hidden {HIDDEN}, float64")
    print(f"minimum (the {STEPS} hidden states): {minimum:>10,d} bytes")
    for function in (vanilla, two_layer, two_layer_checkpointed):
        size = saved_bytes(function, *arguments, wrt=("Wx", "Wh", "b"))
        print(
            f"{function.__name__:24s} saves {size:>10,d} bytes = {size / minimum:.2f}x"
        )


if __name__ == "__main__":
    main()
