"""``SimBackend``: a second device that lives in host memory but behaves as a separate
device, registered through ``ppto.register_backend`` like any user backend.

It lets dispatch, migration and the transfer ledger be exercised on machines without a
GPU: its arrays are private copies, it counts as an accelerator (so it wins over
``cpu`` in mixed calls, as a GPU would), and it overrides ``dot`` so tests can see that
a backend's own implementation is the one that runs.
"""

import numpy as np


class SimBackend:
    """Register with ``ppto.register_backend("sim", SimBackend)``."""

    xp = np
    accelerator = True
    device_count = 2
    dot_calls = 0

    @staticmethod
    def from_numpy(array):
        return np.array(array, copy=True)

    @staticmethod
    def to_numpy(array):
        return np.array(array, copy=True)

    @classmethod
    def dot_impl(cls, A, B):
        cls.dot_calls += 1
        return np.matmul(A, B)
