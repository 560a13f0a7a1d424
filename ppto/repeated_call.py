"""A grad object's cheapest path: a call whose arguments have the kinds, dtypes,
shapes and layouts of the last CPU call that ran generated code runs that code again
after a check of each argument by identity and shape, without building, hashing and
looking up a specialisation key.

Why: this Python work runs on every call, and between two calls of generated code
that sweep megabytes of arrays it runs with cold caches (the MLP gradient's 25-64 us
over its generated code alone, timed by the thread's CPU clock). The keyed path
cost 4.9-6.8 us a call timed in a loop, this one 4.3 us; a 10-element gradient
(benchmark row f) went from 1.66-1.71x to 1.51-1.55x hand-written NumPy.
"""

from __future__ import annotations

import weakref

import numpy as np

from ppto.fusion.tuning import FusionChoice
from ppto.ops.primitive import registrations
from ppto.runtime.device import CPU
from ppto.runtime.precision import get_precision
from ppto.runtime.tensor import Tensor
from ppto.shared_arguments import check_call, writing
from ppto.straight_call import written_out

_NUMBERS = (float, int, bool)


class RepeatedCall:
    """What a call like the last one needs: per argument its type and, for an
    array, its dtype (by identity: an equal dtype that is another object takes
    the keyed path), shape and layout; the generated function and what its result
    is finished with. Made once, when a call's code is kept under its
    specialisation key: a keyed call runs it and keeps it as the last call."""

    __slots__ = (
        "kinds",
        "unwrap",
        "precision",
        "entry",
        "program",
        "registered",
        "dtypes",
        "layouts",
        "function",
    )

    def __init__(
        self, kinds, unwrap, entry, program, registered, dtypes, layouts, function
    ):
        self.kinds = kinds
        self.unwrap = unwrap
        self.precision = get_precision()
        self.entry = entry
        self.program = program
        self.registered = registered
        self.dtypes = dtypes
        self.layouts = layouts
        # the differentiated function, for its defaults, held weakly: a repeated
        # call is kept in the state shared under that function (a weak key),
        # which a strong reference from here would keep alive for ever
        self.function = _weakly(function)

    @classmethod
    def of(
        cls, args: tuple, entry, dtypes, program, layouts, registered: int, function
    ) -> RepeatedCall:
        """The repeated call of ``args`` (positional arguments with a
        specialisation key), run by ``entry``. Its ``kinds`` are None where an
        argument cannot be described so: it is then only run by the keyed path."""
        kinds = []
        for value in args:
            kind = type(value)
            if kind is np.ndarray:
                kinds.append((kind, value.dtype, value.shape, None))
            elif (
                kind is Tensor
                and type(value.data) is np.ndarray
                and value.device is CPU
            ):
                data = value.data
                kinds.append((kind, data.dtype, data.shape, value.layout))
            elif kind in _NUMBERS:
                kinds.append((kind, None, None, None))
            else:  # (a callable: equal by more than identity, see api._Passed)
                kinds = None
                break
        unwrap = any(type(value) is Tensor for value in args)
        kinds = None if kinds is None else tuple(kinds)
        if writing(program):  # (code writing into a parameter: see below)
            cls = CheckedRepeatedCall
        return cls(kinds, unwrap, entry, program, registered, dtypes, layouts, function)

    def matches(self, args: tuple) -> bool:
        """Whether ``args`` are of the kinds recorded, and the code still current
        (nothing it read rebound, no registration since, the same precision)."""
        kinds = self.kinds
        if len(args) != len(kinds):
            return False
        for value, (kind, dtype, shape, layout) in zip(args, kinds):
            if type(value) is not kind:
                return False
            if kind is np.ndarray:
                if value.dtype is not dtype or value.shape != shape:
                    return False
            elif kind is Tensor:
                data = value.data
                if (
                    type(data) is not np.ndarray
                    or value.device is not CPU
                    or value.layout != layout
                    or data.dtype is not dtype
                    or data.shape != shape
                ):
                    return False
        return (
            get_precision() == self.precision
            and registrations() == self.registered
            and self.program.still_current()
        )

    def chosen(self):
        """The generated function to run, None while fusion still times its fused
        and unfused code (``FusionChoice``)."""
        entry = self.entry
        return entry.chosen if type(entry) is FusionChoice else entry

    def written_out(self, transformed):
        """This call written out as one function (see ``ppto.straight_call``) for
        ``transformed`` (the ppto.grad or value_and_grad object calling it: the
        results it gives), once fusion has chosen the code to run; else None."""
        entry = self.chosen()
        if entry is None or not self.kinds:
            return None
        return written_out(self, entry, transformed)

    def run(self, args: tuple):
        """The generated code's ``(value, gradients)`` for ``args``."""
        # (decided: no timing wrapper in between)
        entry = self.chosen() or self.entry
        if self.unwrap:
            args = [a.data if type(a) is Tensor else a for a in args]
        return entry(*args)


class CheckedRepeatedCall(RepeatedCall):
    """The repeated call of a program whose code writes into a parameter: each
    call first refuses one array passed for that parameter and another (see
    ``ppto.shared_arguments``); made only for such programs, so the others' calls
    pay nothing for the check."""

    __slots__ = ()

    def run(self, args: tuple):
        check_call(self.function(), writing(self.program), args)
        return RepeatedCall.run(self, args)

    def written_out(self, transformed):
        return None  # (each call checks its arguments first: ``run``)


def _weakly(function):
    """A callable giving ``function``: a weak reference where it takes one."""
    try:
        return weakref.ref(function)
    except TypeError:  # (not weakly referenceable: never a weak key either)
        return lambda: function
