"""Whether fusion pays off for one generated function on the CPU, decided by timing
it.

A fused kernel's own timing misses what it costs the code around it: values it
writes from several threads sit in other cores' caches when the next operator reads
them (a float32 ``exp(x - peak)`` in blocks timed as fast as NumPy's, and made the
whole logsumexp gradient 1.3x slower). Which is faster depends on the machine, the
dtype and the load, so it is measured where it runs. The first call runs the
unfused code where the arrays are small enough that fusing first (a few
milliseconds of a first call's twenty) would not pay for itself in that call, else
the fused code; the next calls run the fused code, long enough for its kernels to
choose their own ways (``kernels._Plan.run``); then the two run alternately, a few
timed calls each (a code's first call is not timed: it pays for fresh memory). The
one whose fastest call was faster keeps running from then on.

While they alternate, results can differ from one call to the next by rounding
(a fused sum adds in another order); ``ppto.set_precision('strict')`` runs the
unfused code only. The environment variable ``PPTO_FUSION`` sets the policy where
code is generated for a function and its kinds of arguments: ``timed`` (the
default, above), ``on`` (fused code wherever fusion applies, untimed) or ``off``.
"""

from __future__ import annotations

import logging
import os
import time

from ppto.fusion.kernels import TRIALS

# fused calls before timing: each kernel warms up and times its ways (up to three)
SETTLE_CALLS = 3 * (TRIALS + 1)
TIMED_CALLS = 4  # timed calls of each code after that
# elements in the largest argument from which a first call runs fused code: a pass
# over temporaries of this size costs more than fusing (measured: 1e6 float64
# elements, 10 ms unfused against 3 ms of fusing and 5 ms fused)
FUSED_FIRST = 1 << 19

log = logging.getLogger("ppto.fusion")
POLICIES = ("timed", "on", "off")


def fusion_policy() -> str:
    """``PPTO_FUSION``'s setting (see the module docstring)."""
    setting = os.environ.get("PPTO_FUSION", "timed").strip().lower() or "timed"
    if setting not in POLICIES:
        from ppto.errors import PptoError

        raise PptoError(
            f"PPTO_FUSION={setting!r} is not a fusion policy: use one of "
            f"{', '.join(POLICIES)}"
        )
    return setting


class FusionChoice:
    """A generated function, fused or unfused, whichever measures faster (see the
    module docstring). ``make`` lowers each code (``'fused'``, ``'unfused'``) when it
    is first needed; ``first`` is the code the first call runs."""

    __slots__ = ("name", "make", "first", "functions", "chosen", "calls", "times")

    def __init__(self, name: str, make: dict, first: str) -> None:
        self.name = name
        self.make = make
        self.first = first
        self.functions: dict = {}  # way -> its function, once lowered
        self.chosen = None  # the function kept, once decided
        self.calls = 0
        self.times: dict = {"fused": [], "unfused": []}

    def __call__(self, *args, **kwargs):
        chosen = self.chosen
        if chosen is not None:
            return chosen(*args, **kwargs)
        self.calls += 1
        settling = self.calls <= 1 + SETTLE_CALLS
        times = self.times
        if self.calls == 1:
            way = self.first
        elif settling:
            way = "fused"
        else:
            way = "unfused" if len(times["unfused"]) <= len(times["fused"]) else "fused"
        function = self.functions.get(way)
        if function is None or settling:
            if function is None:  # lowered now; its first call is not timed
                function = self.functions[way] = self.make[way]()
            return function(*args, **kwargs)
        start = time.perf_counter()
        result = function(*args, **kwargs)
        times[way].append(time.perf_counter() - start)
        if min(len(seconds) for seconds in times.values()) >= TIMED_CALLS:
            self.decide()
        return result

    def decide(self) -> None:
        # the fastest call of each: other work on the machine only ever adds time,
        # and a burst of it during two of one code's four calls moved a median enough
        # to keep the slower code for the rest of the process
        fused = min(self.times["fused"])
        unfused = min(self.times["unfused"])
        way = "fused" if fused <= unfused else "unfused"
        self.chosen = self.functions[way]
        log.info(
            "%s: runs the %s code (fastest call %.3f ms fused, %.3f ms unfused)",
            self.name,
            way,
            fused * 1e3,
            unfused * 1e3,
        )

    @property
    def decision(self) -> str | None:
        """``'fused'``, ``'unfused'``, or None while still timing."""
        if self.chosen is None:
            return None
        return "fused" if self.chosen is self.functions["fused"] else "unfused"
