"""Run many random programs by hand: ``python -m tests.fuzz --seeds 0:5000``.

Prints each failure (the program and what went wrong), then how many programs were
checked, refused (with the refusals' messages counted), unstable, invalid and
failed. Exits 1 where any failed or was invalid."""

import argparse
import collections
import os
import signal
import sys

os.environ.setdefault("PPTO_FUSION", "on")  # fused code, as the test suite runs it

from tests.fuzz.checks import Outcome, check  # noqa: E402
from tests.fuzz.generator import source  # noqa: E402


def seed_range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if stop else range(int(start), int(start) + 1)


def timed_out(signum, frame):
    raise TimeoutError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seeds", type=seed_range, default=range(0, 200))
    parser.add_argument("--seconds", type=int, default=120, help="per program")
    parser.add_argument("--quiet", action="store_true", help="no program text")
    options = parser.parse_args(argv)
    counts: collections.Counter = collections.Counter()
    refusals: collections.Counter = collections.Counter()
    signal.signal(signal.SIGALRM, timed_out)
    for seed in options.seeds:
        signal.alarm(options.seconds)
        try:
            outcome = check(seed)
        except TimeoutError:
            outcome = Outcome(seed, "failed", f"over {options.seconds} s: a loop?")
        signal.alarm(0)
        counts[outcome.kind] += 1
        if outcome.kind == "refused":
            refusals[outcome.detail.split(": ", 1)[1].splitlines()[0]] += 1
        if outcome.kind in ("failed", "invalid"):
            print(f"=== seed {seed}: {outcome.kind}")
            if not options.quiet:
                print(source(seed))
            print(outcome.detail, flush=True)
    print(dict(counts))
    for message, count in refusals.most_common():
        print(f"{count:5d} refused: {message}")
    return 1 if counts["failed"] or counts["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
