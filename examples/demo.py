"""ppto's main demo: differentiate a small model written in plain NumPy style, print
the backward source ppto generated for it, train it for a few steps, and check the
gradient against finite differences. Then a glimpse of the runtime: an operator's
signature and rule, and an implicit device copy recorded in the transfer ledger.
Runs on generated data; no GPU needed.
"""

import numpy as np

import ppto
from ppto.runtime.sim import SimBackend


def mlp_loss(W1, b1, W2, b2, x, labels):
    """Two-layer network with softmax cross-entropy, in plain NumPy."""
    hidden = np.tanh(x @ W1 + b1)
    logits = hidden @ W2 + b2
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    picked = log_probs[np.arange(x.shape[0]), labels]
    return -np.mean(picked)


def dict_loss(params, x, labels):
    """mlp_loss with its parameters in a dict, as JAX users keep them."""
    return mlp_loss(params["W1"], params["b1"], params["W2"], params["b2"], x, labels)


def softmax_row(logits):
    shifted = np.exp(logits - np.max(logits))
    return shifted / np.sum(shifted)


def make_data(rng, n=256):
    """Two interleaved spirals, 2-D points with labels 0/1."""
    t = rng.uniform(0.5, 3.5, n)
    labels = rng.integers(0, 2, n)
    angle = t * 2.2 + np.pi * labels
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1)
    return x + rng.normal(0, 0.1, x.shape), labels


def main() -> None:
    rng = np.random.default_rng(0)
    x, labels = make_data(rng)
    params = [
        rng.normal(0, 0.5, (2, 32)),
        np.zeros(32),
        rng.normal(0, 0.5, (32, 2)),
        np.zeros(2),
    ]

    print("== The backward pass ppto generated for mlp_loss (wrt W1, b1, W2, b2)\n")
    ppto.show_grad(mlp_loss, *params, x, labels, wrt=(0, 1, 2, 3))

    print("== Training with plain gradient descent")
    step = ppto.value_and_grad(mlp_loss, wrt=(0, 1, 2, 3))
    for epoch in range(301):
        loss, grads = step(*params, x, labels)
        params = [p - 0.5 * np.asarray(g) for p, g in zip(params, grads)]
        if epoch % 50 == 0:
            hidden = np.tanh(x @ params[0] + params[1])
            accuracy = np.mean(np.argmax(hidden @ params[2] + params[3], 1) == labels)
            print(f"  step {epoch:3d}  loss {loss.item():.4f}  accuracy {accuracy:.2f}")

    print("\n== The generated gradient against central differences")
    grad_W1 = np.asarray(ppto.grad(mlp_loss, wrt=0)(*params, x, labels))
    numeric = np.zeros_like(grad_W1)
    for index in np.ndindex(numeric.shape):
        bump = np.zeros_like(params[0])
        bump[index] = 1e-6
        up = mlp_loss(params[0] + bump, *params[1:], x, labels)
        down = mlp_loss(params[0] - bump, *params[1:], x, labels)
        numeric[index] = (up - down) / 2e-6
    error = np.max(np.abs(grad_W1 - numeric)) / np.max(np.abs(numeric))
    print(f"  largest relative difference over dW1: {error:.2e}")
    if error > 1e-5:
        raise SystemExit("gradient check failed")

    print("\n== The same model with its parameters in a dict (gradients come back so)")
    named = dict(zip(("W1", "b1", "W2", "b2"), params))
    grads = ppto.grad(dict_loss)(named, x, labels)
    print(
        f"  gradient keys: {sorted(grads)}; dW1 agrees with the one above: "
        f"{np.allclose(np.asarray(grads['W1']), grad_W1)}"
    )

    print("\n== A whole Jacobian: d softmax(logits) / d logits for one example")
    jacobian = ppto.jacobian(softmax_row)(np.array([1.0, -0.5, 0.25]))
    print(
        f"  shape {jacobian.shape}, its columns sum to zero (the outputs sum to 1): "
        f"{np.allclose(np.asarray(jacobian).sum(axis=0), 0.0)}"
    )

    print("\n== An operator carries its signature and gradient rule")
    ppto.show_op(ppto.dot)

    print("\n== Devices: a CPU tensor meets one on a second device")
    ppto.register_backend("sim", SimBackend)
    on_sim = ppto.tensor(params[2], device="sim")
    mixed = ppto.dot(ppto.tensor(np.tanh(x @ params[0])), on_sim)
    print(f"  dot(cpu, sim) ran on {mixed.device}; ledger:")
    for entry in ppto.transfers():
        print("   ", entry)


if __name__ == "__main__":
    main()
