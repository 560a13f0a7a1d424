"""Operator-table rows of np.linalg's decompositions (eigh, eigvalsh, svd, svdvals,
qr), the quotients their rules divide by, the pseudo-inverse and least squares,
the products
(matrix_power, multi_dot) and np.linalg.norm's orders beyond the 2-norm (those
of vectors and matrices): one matrix, stacks, tall and wide matrices, NumPy's
keywords. Inputs stay away from the kinks of the norms (ties, zeros).
Eigenvectors and singular vectors are checked through what does not depend on
their signs (their elements squared): each may come back as its negative, and
only such functions of them have a derivative."""

import numpy as np

import ppto
from tests.optable import AwayFromZero, Distinct, Invertible, Normal, Row, Uniform


def eigh_squared(A, **params):
    w, V = ppto.eigh(A, **params)
    return w, V * V


def svd_squared(A, **params):
    U, s, Vh = ppto.svd(A, full_matrices=False, **params)
    return U * U, s, Vh * Vh


def least_squares(a, b):
    # every part but the rank (a whole number)
    x, residuals, rank, s = ppto.lstsq(a, b)
    return x, residuals, s


def svd_rebuilt(A):
    # the factors with full_matrices=True of a square matrix (NumPy's default)
    U, s, Vh = ppto.svd(A)
    return (U * ppto.expand_dims(s, -2)) @ Vh + U * U


ROWS = [
    Row("eigh", (Normal((4, 4)),), call=eigh_squared),
    Row("eigh", (Normal((2, 3, 3)),), call=eigh_squared, label="batched"),
    Row(
        "eigh",
        (Normal((3, 3)),),
        call=lambda A: eigh_squared(A, UPLO="U"),
        label="upper",
    ),
    Row("eigvalsh", (Normal((4, 4)),)),
    Row("eigvalsh", (Normal((2, 3, 3)),), {"UPLO": "U"}, label="batched-upper"),
    Row("svd", (Normal((4, 3)),), call=svd_squared, label="tall"),
    Row("svd", (Normal((3, 5)),), call=svd_squared, label="wide"),
    Row("svd", (Normal((2, 3, 3)),), call=svd_squared, label="batched"),
    Row("svd", (Normal((3, 3)),), call=svd_rebuilt, label="full-square"),
    Row("svd", (Normal((2, 4, 3)),), {"compute_uv": False}, label="values"),
    Row("svdvals", (Normal((3, 4)),)),
    Row("svdvals", (Normal((2, 4, 3)),), label="batched"),
    Row("qr", (Normal((4, 3)),)),
    Row("qr", (Normal((2, 3, 3)),), label="batched"),
    Row(
        "divide_by_gaps",
        (Normal((2, 3, 3)), Distinct((2, 3)), Uniform((2, 3), 0.5, 1.0)),
        wrt=(0, 1),
    ),
    Row(
        "divide_by_values",
        (Normal((4, 3)), Uniform((3,), 0.5, 2.0), Uniform((3,), 0.5, 1.0)),
        wrt=(0, 1),
    ),
    Row("pinv", (Normal((4, 3)),), label="tall"),
    Row("pinv", (Normal((3, 5)),), {"rcond": 1e-10}, label="wide-rcond"),
    Row("pinv", (Invertible((2, 3, 3)),), {"rtol": 1e-12}, label="batched-rtol"),
    Row(
        "kept_values_checked",
        (Normal((3, 4)), Normal((4, 3))),
        {"ratio": 1e-10},
        label="a pinv cutoff that drops nothing",
    ),
    Row("matrix_power", (Normal((3, 3)),), {"n": 3}),
    Row("matrix_power", (Invertible((2, 3, 3)),), {"n": -2}, label="batched-inverse"),
    Row("matrix_power", (Normal((3, 3)),), {"n": 0}, label="identity"),
    Row(
        "multi_dot",
        (Normal((3, 4)), Normal((4, 2)), Normal((2, 5))),
        wrt=(0, 1, 2),
        call=lambda a, b, c: ppto.multi_dot([a, b, c]),
    ),
    Row(
        "multi_dot",
        (Normal((3,)), Normal((3, 4)), Normal((4,))),
        wrt=(0, 1, 2),
        call=lambda a, b, c: ppto.multi_dot([a, b, c]),
        label="vector-ends",
    ),
    Row("norm", (AwayFromZero((5,)),), {"ord": 1}, label="vector-1"),
    Row("norm", (Distinct((3, 4)),), {"ord": np.inf, "axis": 1}, label="vector-inf"),
    Row("norm", (Distinct((4,)),), {"ord": -np.inf}, label="vector-minus-inf"),
    Row(
        "norm",
        (AwayFromZero((3, 4)),),
        {"ord": 3, "axis": 0, "keepdims": True},
        label="vector-p",
    ),
    Row("norm", (AwayFromZero((4,)),), {"ord": -1.5}, label="vector-negative-p"),
    Row(
        "norm",
        (AwayFromZero((4,)),),
        call=lambda x: ppto.norm(x, 0) + ppto.norm(x),
        label="vector-count",
    ),
    Row("norm", (Normal((3, 4)),), {"ord": "nuc"}, label="nuclear"),
    Row("norm", (Normal((2, 3, 3)),), {"ord": 2, "axis": (1, 2)}, label="spectral"),
    Row("norm", (Normal((4, 3)),), {"ord": -2}, label="smallest-singular"),
    Row("norm", (Distinct((3, 4)),), {"ord": 1}, label="columns"),
    Row("norm", (Distinct((3, 4)),), {"ord": -1}, label="columns-smallest"),
    Row(
        "norm",
        (Distinct((2, 3, 4)),),
        {"ord": np.inf, "axis": (2, 1)},
        label="rows-stack",
    ),
    Row(
        "norm",
        (Distinct((3, 4)),),
        {"ord": -np.inf, "keepdims": True},
        label="rows-smallest",
    ),
    Row("lstsq", (Normal((5, 3)), Normal((5,))), wrt=(0, 1), call=least_squares),
    Row(
        "lstsq",
        (Normal((5, 3)), Normal((5, 2))),
        wrt=(0, 1),
        call=least_squares,
        label="columns",
    ),
    Row(
        "lstsq",
        (Normal((3, 5)), Normal((3,))),
        wrt=(0, 1),
        call=least_squares,
        label="wide",
    ),
]
