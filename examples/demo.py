"""ppto's main demo: tensors on devices, composed operators, an operator's signature and
gradient, a gradient checked against finite differences, and an implicit device copy
recorded in the transfer ledger. Runs on generated data; no GPU needed.
"""

import numpy as np

import ppto
from ppto.runtime.sim import SimBackend


def main() -> None:
    rng = np.random.default_rng(0)
    A = ppto.tensor(rng.standard_normal((4, 3, 5)), device="cpu")
    B = ppto.tensor(rng.standard_normal((5, 2)), device="cpu")

    print("== Composition: reduce_sum(dot(A, B), axis=1)")
    result = ppto.reduce_sum(ppto.dot(A, B), axis=1)
    print(result, "\n")

    print("== An operator carries its signature and gradient rule")
    ppto.show_op(ppto.dot)
    print()
    ppto.show_op(ppto.logsumexp)
    print()

    print("== Gradients through the rules, checked against central differences")

    def loss(A, B):
        return ppto.logsumexp(ppto.tanh(A @ B), axis=-1)

    report = ppto.check_grad(loss, A, B, wrt=(0, 1))
    print(report, "\n")
    if not report.ok:
        raise SystemExit("gradient check failed")

    print("== Devices: a CPU tensor meets one on a second device")
    ppto.register_backend("sim", SimBackend)
    on_sim = ppto.tensor(rng.standard_normal((5, 2)), device="sim")
    mixed = ppto.dot(A, on_sim)
    print(f"dot(cpu, sim) ran on {mixed.device}; ledger:")
    for entry in ppto.transfers():
        print("  ", entry)
    print("\nusable devices:", ", ".join(str(d) for d in ppto.devices()))


if __name__ == "__main__":
    main()
