"""How a corpus entry declares its inputs: ``Case(fn, *inputs, wrt=...)``.

Inputs are specs, built into concrete arguments by ``Case.arguments()`` with a
generator seeded from the case's id (so every run sees the same values):

- ``F(*shape, lo=-1, hi=1)``: a float64 NumPy array drawn uniformly from [lo, hi);
- ``T(*shape, lo=-1, hi=1)``: the same as a ``ppto.tensor``;
- ``S(lo=-1, hi=1)``: a Python float;
- ``V(values, tensor=False)``: given float values (where the domain must avoid ties);
- ``K(value)``: a constant argument, never differentiated (ints, index arrays, shapes).

``wrt`` lists the differentiable positions; by default every float input (``F``,
``T``, ``S``, ``V``). ``vjp=True`` marks functions with non-scalar results: they are
checked through ``ppto.vjp`` with a random cotangent instead of ``ppto.grad``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ppto


@dataclass(frozen=True)
class F:
    shape: tuple
    lo: float = -1.0
    hi: float = 1.0
    tensor: bool = False

    def __init__(self, *shape, lo=-1.0, hi=1.0, tensor=False):
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "tensor", tensor)

    def build(self, rng):
        value = rng.uniform(self.lo, self.hi, size=self.shape).astype(np.float64)
        return ppto.tensor(value) if self.tensor else value


def T(*shape, lo=-1.0, hi=1.0) -> F:
    return F(*shape, lo=lo, hi=hi, tensor=True)


@dataclass(frozen=True)
class S:
    lo: float = -1.0
    hi: float = 1.0

    def build(self, rng):
        return float(rng.uniform(self.lo, self.hi))


@dataclass(frozen=True)
class V:
    values: Any
    tensor: bool = False

    def build(self, rng):
        value = np.array(self.values, dtype=np.float64)
        return ppto.tensor(value) if self.tensor else value


@dataclass(frozen=True)
class K:
    value: Any

    def build(self, rng):
        return self.value


DIFFERENTIABLE = (F, S, V)


@dataclass
class Case:
    fn: Callable
    inputs: tuple
    wrt: tuple
    id: str
    vjp: bool = False
    note: str = field(default="", repr=False)

    def __init__(self, fn, *inputs, wrt=None, id=None, vjp=False, note=""):
        self.fn = fn
        self.inputs = inputs
        if wrt is None:
            wrt = tuple(
                i for i, spec in enumerate(inputs) if isinstance(spec, DIFFERENTIABLE)
            )
        self.wrt = tuple(wrt)
        self.id = id or getattr(fn, "__name__", "case")
        self.vjp = vjp
        self.note = note

    def arguments(self) -> tuple:
        """The arguments as the corpus passes them (NumPy arrays and tensors mixed)."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return tuple(spec.build(rng) for spec in self.inputs)

    def integer_positions(self) -> tuple:
        """Positions holding a Python int or an integer array (no gradient)."""
        found = []
        for i, spec in enumerate(self.inputs):
            if isinstance(spec, K):
                value = spec.value
                kind = getattr(getattr(value, "dtype", None), "kind", None)
                if (isinstance(value, int) and not isinstance(value, bool)) or kind in (
                    "i",
                    "u",
                ):
                    found.append(i)
        return tuple(found)


def numpy_arguments(arguments: tuple) -> tuple:
    """Tensors as NumPy arrays (for evaluating the plain function)."""
    return tuple(
        np.asarray(a).copy() if isinstance(a, ppto.Tensor) else _copy(a)
        for a in arguments
    )


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value
