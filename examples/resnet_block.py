"""A ResNet basic block on channels-last (NHWC) images, written in NumPy style with
ppto.conv2d: conv - batch norm - ReLU - conv - batch norm, the skip connection added,
ReLU, global average pooling, a linear layer and softmax cross-entropy.

Prints the operator count of the block's code before and after fusion, for the
forward pass (the function itself) and for its gradient, then checks the gradient
(run through the fused code) against central differences in float64. Runs on
generated data; no GPU needed.

    python examples/resnet_block.py
"""

import io
import os

import numpy as np

import ppto


def block_loss(x, w1, g1, b1, w2, g2, b2, W, c, labels):
    """The block and its classifier's mean cross-entropy; ``labels`` are one-hot.
    Batch norm is in training mode: statistics over batch, rows and columns, one
    per channel. (It is written out twice, not called: fusion rewrites one
    function's code, and a called function's is its own.)"""
    h = ppto.conv2d(x, w1, 1, 1, layout="nhwc")
    mean = np.mean(h, axis=(0, 1, 2))
    variance = np.mean((h - mean) ** 2, axis=(0, 1, 2))
    h = np.maximum(g1 * (h - mean) / np.sqrt(variance + 1e-5) + b1, 0.0)
    h = ppto.conv2d(h, w2, 1, 1, layout="nhwc")
    mean = np.mean(h, axis=(0, 1, 2))
    variance = np.mean((h - mean) ** 2, axis=(0, 1, 2))
    h = g2 * (h - mean) / np.sqrt(variance + 1e-5) + b2
    pooled = np.mean(np.maximum(h + x, 0.0), axis=(1, 2))
    logits = pooled @ W + c
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(np.sum(labels * log_probs, axis=1))


PARAMETERS = ("x", "w1", "g1", "b1", "w2", "g2", "b2", "W", "c")


def make_arguments(seed=0, batch=8, size=16, channels=16, classes=10):
    """Images, the block's weights (OIHW), batch norm scales and shifts, the
    classifier and one-hot labels."""
    rng = np.random.default_rng(seed)
    spread = np.sqrt(2.0 / (9 * channels))  # He initialisation of a 3x3 kernel

    def kernel():
        return rng.normal(0.0, spread, (channels, channels, 3, 3))

    def scale():
        return rng.uniform(0.8, 1.2, channels)

    def shift():
        return rng.normal(0.0, 0.1, channels)

    return [
        rng.standard_normal((batch, size, size, channels)),
        kernel(),
        scale(),
        shift(),
        kernel(),
        scale(),
        shift(),
        rng.normal(0.0, 0.3, (channels, classes)),
        np.zeros(classes),
        np.eye(classes)[rng.integers(0, classes, batch)],
    ]


def counts(text: str) -> tuple[int, int]:
    """The (before, after) operator counts of a fused listing's first line."""
    before, after = [int(word) for word in text.splitlines()[0].split() if
                     word.isdigit()]  # fmt: skip
    return before, after


def gradient_errors(args, grads, directions=2, step=1e-6):
    """For each parameter, the largest relative difference between the gradient's
    directional derivative and central differences along seeded random directions."""
    rng = np.random.default_rng(1)
    errors = {}
    for position, name in enumerate(PARAMETERS):
        worst = 0.0
        for _ in range(directions):
            direction = rng.standard_normal(np.shape(args[position]))
            moved = [list(args), list(args)]
            moved[0][position] = args[position] + step * direction
            moved[1][position] = args[position] - step * direction
            plus, minus = (block_loss(*m) for m in moved)
            numeric = (plus - minus) / (2 * step)
            analytic = float(np.sum(np.asarray(grads[position]) * direction))
            worst = max(worst, abs(numeric - analytic) / max(1e-3, abs(numeric)))
        errors[name] = worst
    return errors


def main() -> dict:
    args = make_arguments()
    wrt = tuple(range(len(PARAMETERS)))
    quiet = io.StringIO()

    listing = ppto.show_source(block_loss, *args, fused=True, file=quiet)
    forward = counts(listing)
    gradient = counts(
        ppto.show_grad(block_loss, *args, wrt=wrt, fused=True, file=quiet)
    )
    print("== Operators in the generated code, before and after fusion")
    print(f"  forward pass:  {forward[0]:3d} -> {forward[1]:3d}")
    print(f"  gradient:      {gradient[0]:3d} -> {gradient[1]:3d}")
    print("\n== The fused forward pass (ppto.show_source(block_loss, ..., fused=True))")
    print(listing.split("\n\n")[0].split("\n", 1)[1])

    # the fused code, whatever the timing on this machine would choose
    previous = os.environ.get("PPTO_FUSION")
    os.environ["PPTO_FUSION"] = "on"
    try:
        loss, grads = ppto.value_and_grad(block_loss, wrt=wrt)(*args)
    finally:
        if previous is None:
            del os.environ["PPTO_FUSION"]
        else:
            os.environ["PPTO_FUSION"] = previous
    print(f"\n== Loss {float(loss):.6f} (NumPy: {block_loss(*args):.6f})")
    print("== The fused gradient against central differences (float64)")
    errors = gradient_errors(args, grads)
    for name, error in errors.items():
        print(f"  d{name:3s} largest relative difference {error:.1e}")
    if max(errors.values()) > 1e-5 or abs(float(loss) - block_loss(*args)) > 1e-12:
        raise SystemExit("gradient check failed")
    return {"forward": forward, "gradient": gradient, "errors": errors}


if __name__ == "__main__":
    main()
