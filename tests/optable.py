"""The operator table: one row per operator with its input domain, shapes (including
broadcasting and ``axis``/``keepdims`` variants) and which inputs are differentiated.

Rows are data; ``tests/test_operator_table.py`` runs each one through the gradient
checker in float64 and float32 (with the dot-product identity between the forward and
reverse rules), on every available device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ppto


@dataclass(frozen=True)
class Normal:
    """Standard normal floats."""

    shape: tuple

    def make(self, rng, dtype):
        return rng.standard_normal(self.shape).astype(dtype)


@dataclass(frozen=True)
class Uniform:
    """Floats drawn uniformly from [low, high): positive domains, |x| < 1, ..."""

    shape: tuple
    low: float
    high: float

    def make(self, rng, dtype):
        return rng.uniform(self.low, self.high, self.shape).astype(dtype)


@dataclass(frozen=True)
class AwayFromZero:
    """Normal floats with |x| >= 0.3, for functions with a kink at 0."""

    shape: tuple

    def make(self, rng, dtype):
        x = rng.standard_normal(self.shape)
        return (np.sign(x) * (np.abs(x) + 0.3)).astype(dtype)


@dataclass(frozen=True)
class Distinct:
    """Floats at least 0.1 apart (a shuffled grid), so max/min have no ties."""

    shape: tuple

    def make(self, rng, dtype):
        size = int(np.prod(self.shape))
        values = (rng.permutation(size) - size / 2) * 0.25 + rng.uniform(0, 0.1, size)
        return values.reshape(self.shape).astype(dtype)


@dataclass(frozen=True)
class WithNaN:
    """Normal floats with every third entry NaN (the entries np.nansum and its kin
    skip: their gradient is 0, as central differences of a NaN moved find)."""

    shape: tuple

    def make(self, rng, dtype):
        values = rng.standard_normal(self.shape)
        values.reshape(-1)[::3] = np.nan
        return values.astype(dtype)


@dataclass(frozen=True)
class Increasing:
    """Increasing floats at least 0.2 apart, from ``start`` (an interpolation
    table's points)."""

    shape: tuple
    start: float = -1.0

    def make(self, rng, dtype):
        steps = rng.uniform(0.2, 0.6, self.shape)
        return (self.start + np.cumsum(steps, axis=-1)).astype(dtype)


@dataclass(frozen=True)
class Invertible:
    """Square matrices (or stacks of them) well away from singular: normal
    entries plus a multiple of the identity."""

    shape: tuple

    def make(self, rng, dtype):
        size = self.shape[-1]
        matrices = rng.standard_normal(self.shape) + size * np.eye(size)
        return matrices.astype(dtype)


@dataclass(frozen=True)
class PositiveDefinite:
    """Symmetric positive definite matrices (or stacks of them): M @ M.T + I."""

    shape: tuple

    def make(self, rng, dtype):
        M = rng.standard_normal(self.shape)
        return (M @ np.swapaxes(M, -1, -2) + np.eye(self.shape[-1])).astype(dtype)


@dataclass(frozen=True)
class Integers:
    """Integer indices in [0, high) (not differentiated)."""

    shape: tuple
    high: int

    def make(self, rng, dtype):
        return rng.integers(0, self.high, self.shape)


@dataclass(frozen=True)
class Mask:
    """Booleans (not differentiated)."""

    shape: tuple

    def make(self, rng, dtype):
        return rng.random(self.shape) < 0.5


@dataclass(frozen=True)
class Row:
    """One operator case: ``call(*args)`` is checked with respect to ``wrt``."""

    op: str
    args: tuple
    params: dict = field(default_factory=dict)
    wrt: tuple = (0,)
    call: Callable | None = None
    label: str = ""

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}" if self.label else self.op

    def function(self) -> Callable:
        if self.call is not None:
            return self.call
        # the inputs in the operator's order (ppto.average's positional order is
        # NumPy's: a, axis, weights)
        op = getattr(ppto, self.op)
        return lambda *args: op.call_with_inputs(args, self.params)

    def inputs(self, rng, dtype, device) -> list[Any]:
        values = []
        for spec in self.args:
            if hasattr(spec, "make"):
                values.append(ppto.tensor(spec.make(rng, dtype), device=device))
            else:
                values.append(spec)
        return values


def unary(op, spec, label="", **params):
    return Row(op, (spec,), params, label=label)


def binary(op, a, b, label="", wrt=(0, 1), **params):
    return Row(op, (a, b), params, wrt=wrt, label=label)


N, U = Normal, Uniform

ELEMENTWISE = [
    binary("add", N((3, 4)), N((3, 4))),
    binary("add", N((3, 4)), N((4,)), "broadcast-row"),
    binary("add", N((3, 1)), N((1, 4)), "broadcast-both"),
    binary("add", N((3, 4)), 2.5, "scalar", wrt=(0,)),
    binary("sub", N((2, 3, 4)), N((3, 1))),
    binary("mul", N((3, 4)), N((3, 4))),
    binary("mul", N((2, 3, 4)), N((4,)), "broadcast"),
    binary("div", N((3, 4)), U((3, 4), 0.5, 2.0)),
    binary("div", N((3, 4)), U((3, 1), 0.5, 2.0), "broadcast"),
    unary("neg", N((3, 4))),
    binary("pow", U((3, 4), 0.5, 2.0), N((3, 4))),
    binary("pow", U((3, 4), 0.5, 2.0), 3.0, "scalar-exponent", wrt=(0,)),
    binary("pow", 2.0, N((3, 4)), "scalar-base", wrt=(1,)),
    unary("square", N((3, 4))),
    unary("reciprocal", AwayFromZero((3, 4))),
    unary("cbrt", AwayFromZero((3, 4))),
    unary("sqrt", U((3, 4), 0.5, 3.0)),
    unary("abs", AwayFromZero((3, 4))),
    unary("exp", N((3, 4))),
    unary("log", U((3, 4), 0.5, 3.0)),
    unary("log1p", U((3, 4), -0.5, 2.0)),
    unary("expm1", N((3, 4))),
    unary("exp2", N((3, 4))),
    unary("log2", U((3, 4), 0.5, 3.0)),
    unary("log10", U((3, 4), 0.5, 3.0)),
    unary("sin", N((3, 4))),
    unary("cos", N((3, 4))),
    unary("tan", U((3, 4), -1.2, 1.2)),
    unary("tanh", N((3, 4))),
    unary("sinh", N((3, 4))),
    unary("cosh", N((3, 4))),
    unary("arcsin", U((3, 4), -0.8, 0.8)),
    unary("arccos", U((3, 4), -0.8, 0.8)),
    unary("arctan", N((3, 4))),
    unary("arcsinh", N((3, 4))),
    unary("arccosh", U((3, 4), 1.2, 3.0)),
    unary("arctanh", U((3, 4), -0.8, 0.8)),
    unary("deg2rad", N((3, 4))),
    unary("nan_to_num", WithNaN((3, 4))),
    *(
        binary("ufunc_outer", N((3,)), N((2, 4)), ufunc, ufunc=ufunc)
        for ufunc in ("add", "subtract", "multiply", "maximum", "minimum")
    ),
    binary("ufunc_outer", N((2, 3)), U((4,), 0.5, 2.0), "divide", ufunc="divide"),
    binary("ufunc_outer", N(()), N((3,)), "number", ufunc="multiply"),
    unary("rad2deg", N((3, 4))),
    binary("arctan2", N((3, 4)), AwayFromZero((3, 4))),
    binary("arctan2", N((3, 4)), AwayFromZero((4,)), "broadcast"),
    binary("arctan2", 1.5, AwayFromZero((3, 4)), "scalar", wrt=(1,)),
    binary("hypot", N((3, 4)), N((3, 4))),
    binary("hypot", N((3, 4)), N((3, 1)), "broadcast"),
    binary("hypot", AwayFromZero((3, 4)), 0.0, "scalar", wrt=(0,)),
    unary("sigmoid", N((3, 4))),
    unary("relu", AwayFromZero((3, 4))),
    unary("leaky_relu", AwayFromZero((3, 4)), negative_slope=0.1),
    unary("elu", AwayFromZero((3, 4)), alpha=0.7),
    unary("softplus", N((3, 4))),
    unary("gelu", N((3, 4))),
    binary("maximum", Distinct((3, 4)), Distinct((3, 4))),
    binary("maximum", Distinct((3, 4)), 0.05, "scalar", wrt=(0,)),
    binary("minimum", Distinct((3, 4)), Distinct((4,)), "broadcast"),
    binary("fmax", Distinct((3, 4)), Distinct((3, 4))),
    binary("fmax", Distinct((3, 4)), 0.05, "scalar", wrt=(0,)),
    binary("fmin", Distinct((3, 4)), Distinct((4,)), "broadcast"),
    binary("logaddexp", N((3, 4)), N((3, 4))),
    binary("logaddexp", N((3, 4)), N((4,)), "broadcast"),
    binary("logaddexp", 0.0, N((3, 4)), "scalar", wrt=(1,)),
    binary("logaddexp2", N((3, 4)), N((3, 4))),
    binary("logaddexp2", N((3, 1)), N((4,)), "broadcast"),
    binary("logaddexp2", N((3, 4)), -1.0, "scalar", wrt=(0,)),
    Row("where", (Mask((3, 4)), N((3, 4)), N((4,))), wrt=(1, 2)),
    # a / b kept away from whole numbers, where a % b jumps
    binary("remainder", U((3, 4), 0.1, 0.6), U((4,), 0.7, 1.0), "broadcast"),
    binary("remainder", U((3, 4), -0.6, -0.1), U((3, 4), 0.7, 1.0), "negative"),
    binary("remainder", U((3, 4), 2.2, 2.7), 0.7, "scalar", wrt=(0,)),
    # fmod takes a's sign where remainder takes b's
    binary("fmod", U((3, 4), 0.1, 0.6), U((4,), 0.7, 1.0), "broadcast"),
    binary("fmod", U((3, 4), -2.0, -1.6), U((3, 4), 0.7, 0.75), "negative"),
    binary("fmod", U((3, 4), 2.2, 2.7), -0.7, "scalar", wrt=(0,)),
    unary("clip", Distinct((3, 4)), lo=-0.55, hi=0.6),
    unary("clip", Distinct((3, 4)), "lower-only", lo=-0.55),
    # bounds per column and per row (constants), kept away from x's values
    unary(
        "clip",
        Distinct((3, 4)),
        "array-bounds",
        lo=np.array([-0.55, -1.05, 0.2, -2.05]),
        hi=np.array([[0.6], [1.1], [0.35]]),
    ),
]

REDUCTIONS = [
    unary("reduce_sum", N((3, 4))),
    unary("reduce_sum", N((2, 3, 4)), "axis", axis=1),
    unary("reduce_sum", N((2, 3, 4)), "axes-keepdims", axis=(0, 2), keepdims=True),
    unary("reduce_mean", N((3, 4))),
    unary("reduce_mean", N((2, 3, 4)), "axis-keepdims", axis=-1, keepdims=True),
    unary("reduce_max", Distinct((3, 4))),
    unary("reduce_max", Distinct((2, 3, 4)), "axis", axis=1),
    unary("reduce_min", Distinct((3, 4)), "axis-keepdims", axis=0, keepdims=True),
    unary("reduce_prod", U((3, 4), 0.5, 1.5)),
    unary("reduce_prod", U((3, 4), 0.5, 1.5), "axis", axis=1),
    unary("reduce_var", N((3, 4))),
    unary("reduce_var", N((2, 3, 4)), "axis-keepdims", axis=1, keepdims=True),
    unary("reduce_var", N((3, 4)), "ddof", axis=0, ddof=1),
    unary("reduce_std", N((3, 4))),
    unary("reduce_std", N((2, 3, 4)), "axes", axis=(0, 2)),
    unary("reduce_std", N((3, 4)), "ddof-keepdims", axis=1, keepdims=True, ddof=1),
    Row("average", (N((3, 4)), U((3, 4), 0.5, 1.5)), wrt=(0, 1)),
    Row(
        "average",
        (N((2, 3, 4)), U((3,), 0.5, 1.5)),
        {"axis": 1, "keepdims": True},
        wrt=(0, 1),
        label="axis-1d-weights",
    ),
    Row(
        "average",
        (N((3, 4)), U((3, 4), -0.5, 1.5)),
        {"axis": -1},
        wrt=(0, 1),
        label="signed-weights",
    ),
    Row(
        "average",
        (N((2, 3, 4)), U((2, 4), 0.5, 1.5)),
        {"axis": (0, -1)},
        wrt=(0, 1),
        label="tuple-axis-weights",
    ),
    unary("average", N((3, 4)), "unweighted", axis=0),
    unary("logsumexp", N((3, 4))),
    unary("logsumexp", N((2, 3, 4)), "axis-keepdims", axis=1, keepdims=True),
    Row("unreduce", (N((3,)),), {"like": np.zeros((3, 4)), "axis": 1}),
    Row("divide_by_count", (N((3, 4)),), {"count": 70000}),
    unary("nansum", WithNaN((3, 4))),
    unary("nansum", WithNaN((2, 3, 4)), "axes-keepdims", axis=(0, 2), keepdims=True),
    unary("nanmean", WithNaN((3, 4)), "axis", axis=1),
    unary("nanmean", N((2, 3)), "no-nan"),
    unary("nanmax", WithNaN((3, 4)), "axis", axis=0),
    unary("nanmin", WithNaN((3, 4)), "axis-keepdims", axis=1, keepdims=True),
    unary("nanvar", WithNaN((3, 5)), "axis", axis=1),
    unary("nanvar", WithNaN((3, 4)), "ddof", ddof=1),
    unary("nanstd", WithNaN((3, 4)), "axis-keepdims", axis=0, keepdims=True),
    unary("nanstd", WithNaN((3, 4)), "ddof", axis=-1, ddof=1),
    unary("ptp", Distinct((3, 4))),
    unary("ptp", Distinct((2, 3, 4)), "axis", axis=1),
    unary("ptp", Distinct((3, 4)), "axes-keepdims", axis=(0, 1), keepdims=True),
    unary("median", Distinct((3, 4))),
    unary("median", Distinct((3, 5)), "odd-axis", axis=1),
    unary("median", Distinct((4, 3, 2)), "axes-keepdims", axis=(0, 2), keepdims=True),
    unary("quantile", Distinct((3, 4)), q=0.3),
    unary("quantile", Distinct((4, 5)), "q-array-axis", q=[0.1, 0.5, 0.95], axis=0),
    unary("quantile", Distinct((3, 4)), "keepdims", q=0.6, axis=-1, keepdims=True),
    unary("quantile", Distinct((6,)), "midpoint", q=0.3, method="midpoint"),
    unary("quantile", Distinct((6,)), "hazen", q=[0.05, 0.7], method="hazen"),
    unary("quantile", Distinct((3, 4)), "lower", q=0.4, axis=1, method="lower"),
    unary("quantile", Distinct((3, 4)), "nearest", q=0.7, axis=0, method="nearest"),
    unary("percentile", Distinct((3, 4)), q=35.0),
    unary("percentile", Distinct((3, 4)), "axis", q=[10, 90], axis=1),
    unary("nanmedian", WithNaN((3, 4)), "axis", axis=1),
    unary("nanmedian", WithNaN((3, 5))),
    unary("nanquantile", WithNaN((4, 3)), "q-array", q=[0.2, 0.7], axis=1),
    unary("nanquantile", WithNaN((3, 4)), "hazen", q=0.4, method="hazen"),
    unary("nanpercentile", WithNaN((3, 4)), "keepdims", q=65, axis=0, keepdims=True),
    unary("cov", N((3, 5))),
    unary("cov", N((6,)), "one-variable", bias=True),
    unary("cov", N((5, 3)), "rowvar", rowvar=False),
    Row("cov", (N((5, 2)), N((5, 3))), {"rowvar": False}, (0, 1), label="rowvar-y"),
    Row("cov", (N((2, 5)), N((5,))), {"ddof": 2}, (0, 1), label="vector-y-ddof"),
    unary("corrcoef", N((3, 6))),
    Row("corrcoef", (N((6, 2)), N((1, 6))), {"rowvar": False}, (0, 1), label="y"),
    Row("variables", (N((4, 2)), N((4,))), {"rowvar": False}, (0, 1)),
    unary("variables", N((5,)), "one-vector"),
    Row(
        "split_variables",
        (N((3, 4)),),
        call=lambda r: ppto.split_variables(
            r, (((2, 4), 0, 2, (0, 1)), ((4,), 2, 3, (0,)))
        ),
    ),
]

LINALG = [
    binary("dot", N((3, 4)), N((4, 5))),
    binary("dot", N((2, 3, 4)), N((4, 5)), "batched-broadcast"),
    binary("dot", N((2, 3, 4)), N((2, 4, 2)), "batched"),
    binary("dot", N((4,)), N((4, 5)), "vector-matrix"),
    binary("dot", N((3, 4)), N((4,)), "matrix-vector"),
    binary("dot", N((4,)), N((4,)), "vector-vector"),
    binary("numpy_dot", N((3, 4)), N((4, 5))),
    binary("numpy_dot", N((4,)), N((2, 4, 2)), "vector-stack"),
    binary("vdot", N((6,)), N((6,))),
    binary("vdot", N((2, 3)), N((3, 2)), "flattened"),
    binary("einsum", N((2, 3)), N((3, 4)), subscripts="ij,jk->ik"),
    binary(
        "einsum", N((2, 3, 2)), N((2, 4, 2)), "attention", subscripts="bqd,bkd->bqk"
    ),
    binary("einsum", N((2, 3)), N((3, 4)), "implicit", subscripts="ij,jk"),
    binary("einsum", N((2, 1, 3)), N((3, 2)), "ellipsis", subscripts="...ij,jk->...ik"),
    binary("einsum", N((2, 3)), N((4,)), "index-of-one", subscripts="ij,k->ik"),
    binary("einsum", N((2, 3)), N((2, 3)), "full", subscripts="ij,ij->"),
    unary("inv", Invertible((3, 3))),
    unary("inv", Invertible((2, 3, 3)), "batched"),
    binary("solve", Invertible((3, 3)), N((3,)), "vector"),
    binary("solve", Invertible((3, 3)), N((3, 2)), "columns"),
    binary("solve", Invertible((2, 3, 3)), N((3,)), "batched-vector"),
    binary("solve", Invertible((2, 3, 3)), N((4, 1, 3, 2)), "batched-broadcast"),
    binary("solve", Invertible((3, 3)), N((2, 3, 1)), "stacked-columns"),
    unary("det", Invertible((3, 3))),
    unary("det", Invertible((2, 3, 3)), "batched"),
    unary("cofactors", Invertible((3, 3))),
    unary("cofactors", Invertible((2, 3, 3)), "batched"),
    Row("slogdet", (Invertible((3, 3)),), call=lambda A: ppto.slogdet(A)[1]),
    Row(
        "slogdet",
        (N((2, 3, 3)),),
        call=lambda A: ppto.slogdet(A)[1],
        label="batched-signed",
    ),
    unary("cholesky", PositiveDefinite((3, 3))),
    unary("cholesky", PositiveDefinite((2, 4, 4)), "batched"),
    unary("cholesky", PositiveDefinite((2, 3, 3)), "upper", upper=True),
    binary("cross", N((4, 3)), N((4, 3))),
    binary("cross", N((2, 1, 3)), N((4, 3)), "broadcast"),
    binary("cross", N((3, 2)), N((3, 2)), "axis-0", axis=0),
    # (each operand's own axis 0 holds its vectors, as NumPy reads axis=)
    binary("cross", N((3, 4)), N((3,)), "axis-0-one-vector", axis=0),
    binary("cross", N((3,)), N((3, 2)), "axis-0-vector-first", axis=0),
    binary("cross", N((2, 3, 4)), N((3, 4)), "axis-1-stack", axis=-2),
    binary("cross", N((3, 4)), N((4, 3)), "axisa-axisb-axisc", axisa=0, axisc=0),
    binary("cross", N((3, 2)), N((3, 2)), "axis-over-axisa", axisa=1, axis=0),
    binary("tensordot", N((2, 3, 4)), N((3, 4, 5))),
    binary("tensordot", N((2, 3)), N((3, 4)), "one-axis", axes=1),
    binary("tensordot", N((2, 3, 4)), N((4, 2, 5)), "pairs", axes=([0, 2], [1, 0])),
    binary("tensordot", N((2,)), N((3,)), "outer", axes=0),
    binary("inner", N((2, 3)), N((4, 3))),
    binary("inner", N((3,)), N((3,)), "vectors"),
    binary("inner", N(()), N((2, 3)), "number"),
    unary("diag", N((3,))),
    unary("diag", N((3,)), "offset", k=-2),
    unary("diag", N((3, 3))),
    unary("diag", N((3, 5)), "wide-offset", k=1),
    unary("diag", N((5, 2)), "tall-negative", k=-1),
    unary("diag", N((2, 3)), "tall-offset", k=2),
    unary("diagonal", N((3, 4))),
    unary("diagonal", N((3, 4)), "above", offset=2),
    unary("diagonal", N((4, 3)), "below", offset=-1),
    unary("diagonal", N((2, 3, 4)), "axes", offset=1, axis1=2, axis2=0),
    unary("diagonal", N((2, 4, 3)), "axes-below", offset=-2, axis1=-2, axis2=-1),
    unary("trace", N((3, 3))),
    unary("trace", N((3, 4)), "offset", offset=1),
    unary("trace", N((2, 3, 4)), "axes", offset=-1, axis1=2, axis2=0),
    unary("tril", N((3, 4))),
    unary("tril", N((2, 3, 3)), "stack-offset", k=-1),
    unary("triu", N((3, 4)), k=1),
    # (a vector: each row of a square matrix, as np.tril reads it)
    unary("tril", N((4,)), "vector", k=-1),
    unary("triu", N((3,)), "vector"),
    binary("outer", N((3,)), N((4,))),
    binary("outer", N((2, 3)), N((4,)), "flattened"),
    binary("kron", N((2, 3)), N((3, 2))),
    binary("kron", N((3,)), N((2, 2)), "vector-matrix"),
    binary("kron", N((2, 1, 2)), N((2, 3)), "ranks-differ"),
    binary("kron", N(()), N((3,)), "number"),
    binary("convolve", N((5,)), N((3,))),
    binary("convolve", N((3,)), N((6,)), "same-shorter-first", mode="same"),
    binary("convolve", N((6,)), N((4,)), "same", mode="same"),
    binary("convolve", N((4,)), N((6,)), "valid", mode="valid"),
    binary("correlate", N((6,)), N((3,))),
    binary("correlate", N((2,)), N((5,)), "same-shorter-first", mode="same"),
    binary("correlate", N((5,)), N((4,)), "full", mode="full"),
    # x from -1.2 to 1.8 over knots from about -0.6 to 1.8: inside and beyond both
    Row("interp", (U((3, 4), -1.2, 1.8), Increasing((5,)), N((5,))), wrt=(0, 1, 2)),
    Row(
        "interp",
        (U((7,), -1.2, 1.8), Increasing((5,)), N((5,))),
        {"left": 0.5, "right": -1.0},
        wrt=(0, 1, 2),
        label="left-right",
    ),
    unary("trapezoid", N((3, 4))),
    unary("trapezoid", N((3, 4)), "axis-spacing", axis=0, spacing=0.5),
    Row("trapezoid", (N((3, 4)), Increasing((4,))), wrt=(0, 1), label="points"),
    Row(
        "trapezoid",
        (N((2, 3, 4)), N((1, 3, 1))),
        {"axis": 1},
        wrt=(0, 1),
        label="points-broadcast",
    ),
    unary("gradient", N((6,))),
    unary("gradient", N((2,)), "two-samples"),
    unary("gradient", N((3, 5)), "axis-edge-2", spacing=0.5, axis=1, edge_order=2),
    unary("gradients", N((3, 4))),
    unary(
        "gradients",
        N((3, 4, 3)),
        "axes-spacings-edge-2",
        spacing=(0.5, 2.0),
        axis=(2, 0),
        edge_order=2,
    ),
    unary("gradient_adjoint", N((5, 3))),
    unary("gradient_adjoint", N((2, 4)), "edge-2", spacing=0.3, axis=1, edge_order=2),
    Row("polyval", (N((4,)), N((3, 4))), wrt=(0, 1)),
    Row("polyval", (N((1,)), N((5,))), wrt=(0, 1), label="constant"),
]

SHAPE = [
    unary("transpose", N((2, 3, 4))),
    unary("transpose", N((2, 3, 4)), "axes", axes=(1, 2, 0)),
    unary("transpose", N((3, 3, 3)), "negative-axes", axes=(-1, 0, 1)),
    unary("matrix_transpose", N((2, 3, 4))),
    unary("swapaxes", N((2, 3, 4)), axis1=0, axis2=2),
    unary("swapaxes", N((2, 3, 4)), "negative-axes", axis1=-1, axis2=-2),
    unary("flip", N((2, 3, 4)), axis=1),
    unary("flip", N((2, 3)), "every-axis"),
    unary("cumsum", N((3, 4)), axis=1),
    unary("cumsum", N((3, 4)), "flattened"),
    unary("cumprod", N((3, 4)), axis=1),
    unary("cumprod", U((3, 4), 0.5, 1.5), "flattened"),
    unary("cumprod", N((2, 3, 2)), "negative-axis", axis=-2),
    unary("roll", N((3, 4)), shift=1),
    unary("roll", N((3, 4)), "axes", shift=(2, -1), axis=(0, 1)),
    # (an array of shifts, or a 0-d one, as np.roll takes them)
    unary("roll", N((3, 4)), "array-shifts", shift=np.array([1, -2]), axis=(0, 1)),
    unary("roll", N((3, 4)), "0-d-array-shift", shift=np.array(2), axis=0),
    unary("tile", N((2, 3)), reps=(2, 1, 3)),
    unary("tile", N((3,)), "number", reps=2),
    unary("repeat", N((2, 3)), repeats=2, axis=1),
    unary("repeat", N((2, 3)), "flattened", repeats=3),
    unary("repeat", N((3, 2)), "counts", repeats=[2, 0, 1], axis=-2),
    unary("repeat", N((2, 2)), "counts-flattened", repeats=[1, 3, 0, 2]),
    unary("repeat", N((2, 3, 2)), "negative-axis", repeats=2, axis=-2),
    unary("repeat", N((2, 3)), "float-count", repeats=2.0, axis=1),  # (NumPy 2's)
    unary("repeat", N((3, 2)), "float-counts", repeats=[2.0, 0.0, 1.0], axis=0),
    unary("pad", N((2, 3)), pad_width=((1, 0), (2, 1))),
    unary("pad", N((2, 3)), "constant-values", pad_width=1, constant_values=0.5),
    Row(
        "pad",
        (N((2, 3)), N((2, 2))),
        {"pad_width": ((1, 0), (2, 1))},
        wrt=(0, 1),
        label="differentiated-values",
    ),
    Row("pad", (N(()), N(())), {"pad_width": 2}, wrt=(0, 1), label="0-d"),
    # (the modes copying x's own elements: wider than x too, NumPy's reflections)
    unary("pad", N((3, 4)), "edge", pad_width=((1, 2), (2, 0)), mode="edge"),
    unary("pad", N((3, 4)), "reflect", pad_width=((4, 1), (0, 5)), mode="reflect"),
    unary("pad", N((3, 4)), "symmetric", pad_width=((2, 3), (1, 1)), mode="symmetric"),
    unary("pad", N((2, 3)), "wrap", pad_width=((3, 1), (4, 2)), mode="wrap"),
    unary("pad", N((5,)), "reflect-1d", pad_width=2, mode="reflect"),
    Row(
        "pad_folded",
        (N((6, 5)),),
        {"like": np.zeros((3, 2)), "pad_width": ((1, 2), (2, 1)), "mode": "reflect"},
    ),
    unary("sliding_window_view", N((4, 5)), window_shape=(2, 3)),
    unary("sliding_window_view", N((6,)), "1d", window_shape=4),
    unary(
        "sliding_window_view", N((2, 5, 4)), "axes", window_shape=(3, 2), axis=(2, 1)
    ),
    unary("sliding_window_view", N((3, 4)), "negative-axis", window_shape=2, axis=-2),
    Row(
        "windows_folded",
        (N((3, 3, 2, 3)),),
        {"like": np.zeros((4, 5)), "window_shape": (2, 3)},
    ),
    Row(
        "windows_folded",
        (N((2, 4, 2, 3, 2)),),
        {"like": np.zeros((2, 5, 4)), "window_shape": (3, 2), "axis": (2, 1)},
        label="axes",
    ),
    Row(
        "pad_folded",
        (N((9, 4)),),
        {"like": np.zeros((2, 3)), "pad_width": ((3, 4), (0, 1)), "mode": "wrap"},
        label="wrap",
    ),
    unary("diff", N((3, 5))),
    unary("diff", N((4, 3)), "n-axis", n=2, axis=0),
    unary("diff", N((2, 3)), "n-beyond-length", n=4),
    Row(
        "diff",
        (N((2, 3)), N(()), N((2, 2))),
        {"n": 2},
        wrt=(0, 1, 2),
        label="prepend-append",
    ),
    unary("sort", Distinct((3, 4))),
    unary("sort", Distinct((3, 4)), "axis", axis=0),
    unary("sort", Distinct((3, 4)), "flattened", axis=None),
    unary("sort", Distinct((3, 4)), "stable", axis=0, kind="stable"),
    unary("sort", Distinct((2, 5)), "stable-keyword", stable=True),
    unary("moveaxis", N((2, 3, 4)), source=0, destination=-1),
    unary("moveaxis", N((2, 3, 4)), "axes", source=(0, 1), destination=(2, 0)),
    Row(
        "vstack",
        (N((2, 3)), N((1, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.vstack([a, b]),
    ),
    Row(
        "vstack",
        (N((3,)), N((3,))),
        wrt=(0, 1),
        call=lambda a, b: ppto.vstack([a, b]),
        label="vectors",
    ),
    Row(
        "hstack",
        (N((2, 3)), N((2, 1))),
        wrt=(0, 1),
        call=lambda a, b: ppto.hstack([a, b]),
    ),
    Row(
        "hstack",
        (N((3,)), N((2,))),
        wrt=(0, 1),
        call=lambda a, b: ppto.hstack([a, b]),
        label="vectors",
    ),
    Row(
        "vstack",
        (N(()), N(())),
        wrt=(0, 1),
        call=lambda a, b: ppto.vstack([a, b]),
        label="numbers",
    ),
    Row(
        "vstack",
        (N((3,)), N((2, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.vstack([a, b]),
        label="vector-and-matrix",
    ),
    Row(
        "hstack",
        (N(()), N((3,))),
        wrt=(0, 1),
        call=lambda a, b: ppto.hstack([a, b]),
        label="number-and-vector",
    ),
    unary("reshape", N((2, 6)), shape=(3, 4)),
    unary("reshape", N((2, 6)), "infer", shape=(-1,)),
    unary("flatten", N((2, 3, 2))),
    unary("norm", N((3, 4))),
    unary("norm", N((3, 4)), "axis-keepdims", axis=1, keepdims=True),
    unary("norm", N((2, 3, 4)), "frobenius", ord="fro", axis=(0, 2)),
    unary("norm", N((5,)), "ord-2", ord=2),
    unary("broadcast_to", N((3, 1)), shape=(2, 3, 4)),
    Row("unbroadcast", (N((2, 3, 4)),), {"like": np.zeros((3, 1))}),
    unary("expand_dims", N((3, 4)), axis=1),
    unary("squeeze", N((3, 1, 4))),
    unary("squeeze", N((3, 1, 1)), "axis", axis=2),
    Row(
        "concat",
        (N((2, 3)), N((4, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.concat([a, b], axis=0),
    ),
    Row(
        "stack",
        (N((2, 3)), N((2, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.stack([a, b], axis=1),
    ),
    Row("split", (N((5, 3)),), call=lambda x: ppto.split(x, [1, 3], axis=0)),
    Row(
        "meshgrid",
        (N((3,)), N((4,))),
        wrt=(0, 1),
        call=lambda a, b: ppto.meshgrid([a, b]),
    ),
    Row(
        "meshgrid",
        (N((2,)), N((3,)), N((2, 2))),
        wrt=(0, 1, 2),
        call=lambda a, b, c: ppto.meshgrid([a, b, c], indexing="ij", sparse=True),
        label="ij-sparse-three",
    ),
    Row(
        "grid_sums",
        (N((4, 3)), N((4, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.grid_sums([a, b], ((3,), (4,))),
    ),
    Row(
        "grid_sums",
        (N((2, 1)), N((1, 3))),
        wrt=(0, 1),
        call=lambda a, b: ppto.grid_sums([a, b], ((2,), (3,)), "ij", True),
        label="ij-sparse",
    ),
    Row("unstack", (N((3, 2)),), call=lambda x: ppto.unstack(x, axis=1)),
    Row(
        "split_joined",
        (N((3, 3)),),
        call=lambda x: ppto.split_joined(x, ((3,), (2, 3)), "vstack"),
    ),
    Row(
        "split_joined",
        (N((2, 5)),),
        call=lambda x: ppto.split_joined(x, ((2, 3), (2, 2)), "hstack"),
        label="hstack",
    ),
    Row(
        "split_joined",
        (N((2, 3, 4)),),
        call=lambda x: ppto.split_joined(x, ((2, 3), (2, 3, 3)), "dstack"),
        label="dstack",
    ),
    Row(
        "dstack",
        (N((2, 3)), N((2, 3, 2)), N(())),
        wrt=(0, 1),
        call=lambda a, b, c: ppto.dstack([a, b, c * np.ones((2, 3))]),
    ),
    Row(
        "dstack",
        (N((4,)), N((4,))),
        wrt=(0, 1),
        call=lambda a, b: ppto.dstack([a, b]),
        label="vectors",
    ),
    unary("cast", N((3, 4)), dtype="float64"),
    Row("cast_in_place", (N((3, 4)),), {"target": np.zeros((3, 4))}),
    Row("cast_in_place", (N((3, 4)),), {"target": 1.0}, label="number-target"),
    unary("copy", N((3, 4))),
    unary("asarray", N((3, 4))),
    unary("asarray", N((3, 4)), "dtype", dtype="float64"),
    unary("array", N((3, 4))),
    unary("array", N((2, 3)), "no-copy", copy=False),
    Row("full_like", (N((3, 4)), N((4,))), wrt=(1,)),
    Row("full_like", (N((3, 4)), N(())), wrt=(1,), label="scalar-fill"),
]

INDEXING = [
    unary("getitem", N((4, 5)), "int", index=1),
    unary("getitem", N((4, 5)), "negative", index=-1),
    unary("getitem", N((4, 5)), "slice", index=(slice(1, 3), slice(None, None, 2))),
    unary("getitem", N((4, 5)), "row-col", index=(2, slice(None))),
    unary("getitem", N((4, 5)), "int-array-repeats", index=np.array([0, 2, 2, 3])),
    unary("getitem", N((4, 5)), "mask", index=np.array([True, False, True, True])),
    Row("index_add", (N((4, 3)), N((3,))), {"index": np.array([0, 0, 2])}, wrt=(0, 1)),
    Row("setitem", (N((4, 3)), N((3,))), {"index": 1}, wrt=(0, 1)),
    Row("take", (N((4, 3)), Integers((5,), 4)), {"axis": 0}),
    Row("take", (N((4, 3)), Integers((5,), 12)), label="flat"),
    Row("gather", (N((4, 3)), Integers((6,), 4))),
    # repeated indices along the axis, each row its own (labels picked per row)
    Row("take_along_axis", (N((4, 3)), Integers((4, 5), 3)), {"axis": 1}),
    Row(
        "take_along_axis",
        (N((4, 3)), Integers((6, 3), 4)),
        {"axis": 0},
        label="rows-axis",
    ),
    Row(
        "take_along_axis",
        (N((4, 3)), Integers((1, 2), 3)),
        {"axis": -1},
        label="broadcast",
    ),
    Row(
        "take_along_axis", (N((4, 3)), Integers((7,), 12)), {"axis": None}, label="flat"
    ),
    Row("scatter_add", (N((4, 3)), Integers((6,), 4), N((6, 3))), wrt=(0, 2)),
    Row("choose", (Integers((3, 4), 3), N((3, 3, 4))), wrt=(1,)),
    Row(
        "choose",
        (Integers((2, 1, 4), 5), N((3, 4))),
        {"mode": "wrap"},
        wrt=(1,),
        label="broadcast-wrap",
    ),
    Row(
        "choose",
        (Integers((4,), 6), N((4, 1))),
        {"mode": "clip"},
        wrt=(1,),
        label="clip",
    ),
    # choices written out as a list: they broadcast together, numbers too
    Row(
        "choose_among",
        (Integers((3, 4), 3), N((3, 4)), N((4,))),
        wrt=(1, 2),
        call=lambda a, x, y: ppto.choose_among(a, [x, 0.5, y]),
    ),
    Row(
        "choose_among",
        (Integers((2, 1), 4), N((3,)), N((2, 1))),
        wrt=(1, 2),
        call=lambda a, x, y: ppto.choose_among(a, (x, y), mode="wrap"),
        label="wrap",
    ),
]

# Operators whose gradients are deliberately refused (not differentiable).
NON_DIFFERENTIABLE = [
    "floor_divide",
    "heaviside",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "isfinite",
    "isnan",
    "sign",
    "floor",
    "ceil",
    "round",
    "argmax",
    "argmin",
    "argsort",
    "quantile_weights",
    "interp_segments",
    "interp_covered",
    "one_hot",
    "diagonal_mask",
    "partition_sources",
    "chosen_mask",
    "chosen_among",
]
# Parameters without defaults that the refusal test must pass.
REFUSAL_PARAMS = {
    "one_hot": {"num_classes": 3},
    "quantile_weights": {"q": 0.5},
    "diagonal_mask": {"subscripts": "ii->"},
}
# Second inputs of the right shape for the refusal test (else a * 2): the points
# of an interpolation table are a vector.
REFUSAL_SECOND = {
    "chosen_mask": lambda a: ppto.tensor([[0, 1], [1, 0]]),
    "interp_segments": lambda a: ppto.flatten(a),
    "interp_covered": lambda a: ppto.flatten(a),
}
# Constants: differentiable, with zero gradient (checked separately).
# The refusal test's call of an operator taking a list first: its choices
REFUSAL_CALLS = {
    "chosen_among": lambda op: lambda a: op([a, a * 2.0], ppto.tensor([[0, 1]])),
}

CONSTANT = ["zeros_like", "ones_like", "stop_gradient"]


def all_rows() -> list[Row]:
    rows = ELEMENTWISE + REDUCTIONS + LINALG + SHAPE + INDEXING
    for module in ("rows_nn", "rows_graph", "rows_decompositions", "rows_idioms"):
        try:
            extra = __import__(f"tests.{module}", fromlist=["ROWS"])
        except ModuleNotFoundError:
            continue
        rows = rows + list(extra.ROWS)
    return rows
