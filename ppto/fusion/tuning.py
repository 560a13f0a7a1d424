"""Whether fusion pays off for one generated function on the CPU, decided by timing
it.

A fused kernel's own timing misses what it costs the code around it: values it
writes from several threads sit in other cores' caches when the next operator reads
them (a float32 ``exp(x - peak)`` in blocks timed as fast as NumPy's, and made the
whole logsumexp gradient 1.4x slower). Which is faster depends on the machine, the
dtype and the load, so it is measured where it runs: the first calls run the fused
code, long enough for its kernels to choose their own ways (``kernels._Plan.run``);
then the unfused code is lowered, and the two run alternately, a few timed calls
each. The faster keeps running from then on.

While they alternate, results can differ from one call to the next by rounding
(a fused sum adds in another order); ``ppto.set_precision('strict')`` runs the
unfused code only.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

from ppto.fusion.kernels import TRIALS

# fused calls first: each kernel warms up and times both its ways
SETTLE_CALLS = 2 * (TRIALS + 1)
TIMED_CALLS = 4  # timed calls of each program after that

log = logging.getLogger("ppto.fusion")


class FusionChoice:
    """A generated function, fused, that becomes the unfused one where that measures
    faster (see the module docstring). ``make_unfused`` lowers the unfused function
    when it is first needed."""

    __slots__ = ("name", "fused", "unfused", "make_unfused", "chosen", "calls", "times")

    def __init__(self, name: str, fused: Callable, make_unfused: Callable) -> None:
        self.name = name
        self.fused = fused
        self.unfused = None
        self.make_unfused = make_unfused
        self.chosen = None  # the function kept, once decided
        self.calls = 0
        self.times: dict = {"fused": [], "unfused": []}

    def __call__(self, *args, **kwargs):
        chosen = self.chosen
        if chosen is not None:
            return chosen(*args, **kwargs)
        self.calls += 1
        if self.calls <= SETTLE_CALLS:
            return self.fused(*args, **kwargs)
        if self.unfused is None:  # its first call lowers and warms it: not timed
            self.unfused = self.make_unfused()
            return self.unfused(*args, **kwargs)
        times = self.times
        way = "fused" if len(times["fused"]) <= len(times["unfused"]) else "unfused"
        function = self.fused if way == "fused" else self.unfused
        start = time.perf_counter()
        result = function(*args, **kwargs)
        times[way].append(time.perf_counter() - start)
        if len(times["unfused"]) >= TIMED_CALLS:
            self.decide()
        return result

    def decide(self) -> None:
        fused = statistics.median(self.times["fused"])
        unfused = statistics.median(self.times["unfused"])
        keep_fused = fused <= unfused
        self.chosen = self.fused if keep_fused else self.unfused
        log.info(
            "%s: runs the %s code (median %.3f ms fused, %.3f ms unfused)",
            self.name,
            "fused" if keep_fused else "unfused",
            fused * 1e3,
            unfused * 1e3,
        )

    @property
    def decision(self) -> str | None:
        """``'fused'``, ``'unfused'``, or None while still timing."""
        if self.chosen is None:
            return None
        return "fused" if self.chosen is self.fused else "unfused"
