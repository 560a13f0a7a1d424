"""Checks of a program's ``f_vector`` (an array or a tuple of arrays; generator.py),
in float64 against central differences of the plain function:

- ``vjp`` with a random cotangent: the value is NumPy's, the pullback matches
  differences of ``sum(cotangent * f_vector)``;
- ``jvp`` with random tangents matches differences along them, and the identity
  ``cotangent . jvp == pullback . tangents`` holds;
- whole Jacobians, ``jacrev`` and ``jacfwd`` (where no argument is a pytree: ppto
  refuses those), match the differences' Jacobian column by column.
"""

from __future__ import annotations

import numpy as np

import ppto
from tests.corpus.checks import as_float, central_differences, moved
from tests.fuzz import checks
from tests.fuzz.trees import leaves, rebuild_arguments

EPS = 1e-6


def check_vector_function(g, args: tuple, seed: int) -> None:
    reference = as_tuple(plain_vector(g)(*args))
    if any(
        not np.all(np.isfinite(o)) or np.max(np.abs(o), initial=0.0) > 1e4
        for o in reference
    ):
        return  # differences are no reference (the scalar f was one)
    flat_args = tuple(leaves(args))
    out, pullback = ppto.vjp(g, *args)
    for got, wanted in zip(as_tuple(out), reference, strict=True):
        checks.assert_close(got, wanted, "f_vector's value", 1e-12)
    rng = np.random.default_rng(seed + 1)
    cotangent = [rng.standard_normal(np.shape(o)) for o in reference]
    pulled = leaves(
        pullback(tuple(cotangent) if isinstance(out, tuple) else cotangent[0])
    )
    contracted = contraction(g, args, cotangent)
    for position, gradient in enumerate(pulled):
        expected = central_differences(contracted, flat_args, position)
        try:
            checks.assert_close(gradient, expected, f"vjp d/d arg {position}", 1e-6)
        except AssertionError:
            checks._confirm(contracted, flat_args, position, f"vjp d/d arg {position}")
            raise
    tangents = checks.random_tangents(args, seed + 2)
    value, pushed = ppto.jvp(g, args, tangents)
    pushed = as_tuple(pushed)
    flat_tangents = leaves(tangents)
    left = sum(float(np.sum(c * np.asarray(p))) for c, p in zip(cotangent, pushed))
    right = sum(float(np.sum(np.asarray(p) * t)) for p, t in zip(pulled, flat_tangents))
    checks.assert_close(left, right, "cotangent . jvp against vjp . tangent", 1e-9)
    along = along_direction(g, args, dict(enumerate(flat_tangents)))
    for number, (got, wanted) in enumerate(zip(pushed, along(EPS))):
        try:
            checks.assert_close(got, wanted, f"f_vector jvp output {number}", 1e-6)
        except AssertionError:
            _confirm_steps(along, number, "f_vector jvp")
            raise
    if len(flat_args) == len(args):
        for mode in ("reverse", "forward"):
            check_jacobian(g, args, mode)


def check_jacobian(g, args: tuple, mode: str) -> None:
    wrt = tuple(range(len(args)))
    blocks = ppto.jacobian(g, wrt=wrt, mode=mode)(*args)
    blocks = blocks if isinstance(blocks[0], tuple) else (blocks,)
    for position in wrt:
        wanted = jacobian_differences(g, args, position, EPS)
        for number, (block, expected) in enumerate(zip(blocks, wanted, strict=True)):
            what = f"jacobian ({mode}) of output {number} d/d arg {position}"
            try:
                checks.assert_close(block[position], expected, what, 1e-6)
            except AssertionError:
                coarse = jacobian_differences(g, args, position, 1e-5)[number]
                fine = jacobian_differences(g, args, position, 1e-7)[number]
                scale = max(float(np.max(np.abs(coarse), initial=0.0)), 1e-2)
                if float(np.max(np.abs(coarse - fine), initial=0.0)) > 1e-4 * scale:
                    raise checks.Unstable(
                        f"{what}: differences depend on the step"
                    ) from None
                raise


def plain_vector(g):
    return lambda *a: as_float(g(*checks.writable(a)))


def as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def contraction(g, args: tuple, cotangent: list):
    """sum(cotangent * f_vector) as a function of the arguments' leaves."""

    def function(*flat_args):
        outs = as_tuple(plain_vector(g)(*rebuild_arguments(args, flat_args)))
        return sum(float(np.sum(c * o)) for c, o in zip(cotangent, outs))

    return function


def along_direction(g, args: tuple, direction: dict):
    """eps -> the outputs' central differences along ``direction`` (of leaves)."""
    flat_args = tuple(leaves(args))

    def of(eps):
        def at(step):
            return as_tuple(
                plain_vector(g)(
                    *rebuild_arguments(args, moved(flat_args, direction, step))
                )
            )

        return tuple((a - b) / (2 * eps) for a, b in zip(at(eps), at(-eps)))

    return of


def _confirm_steps(along, number: int, what: str) -> None:
    coarse, fine = along(1e-4)[number], along(1e-6)[number]
    scale = max(float(np.max(np.abs(coarse), initial=0.0)), 1e-2)
    if float(np.max(np.abs(coarse - fine), initial=0.0)) > 1e-3 * scale:
        raise checks.Unstable(f"{what}: differences depend on the step")


def jacobian_differences(g, args: tuple, position: int, eps: float) -> list:
    """Per output, d output / d args[position] by central differences, of shape
    ``output.shape + argument.shape``."""
    point = np.asarray(args[position], dtype=np.float64)
    outputs = as_tuple(plain_vector(g)(*args))
    blocks = [np.zeros(np.shape(o) + point.shape) for o in outputs]
    for index in np.ndindex(point.shape):
        unit = np.zeros(point.shape)
        unit[index] = 1.0
        direction = {
            position: float(unit) if isinstance(args[position], float) else unit
        }
        ahead = as_tuple(plain_vector(g)(*moved(args, direction, eps)))
        behind = as_tuple(plain_vector(g)(*moved(args, direction, -eps)))
        for block, a, b in zip(blocks, ahead, behind):
            block[(...,) + index] = (a - b) / (2 * eps)
    return blocks
