"""Operator-table rows of np.linalg's decompositions (eigh, eigvalsh, svd, svdvals,
qr) and the quotients their rules divide by: one matrix, stacks, tall and wide
matrices, NumPy's keywords. Eigenvectors and singular vectors are checked through
what does not depend on their signs (their elements squared): each may come back
as its negative, and only such functions of them have a derivative."""

import ppto
from tests.optable import Distinct, Normal, Row, Uniform


def eigh_squared(A, **params):
    w, V = ppto.eigh(A, **params)
    return w, V * V


def svd_squared(A, **params):
    U, s, Vh = ppto.svd(A, full_matrices=False, **params)
    return U * U, s, Vh * Vh


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
]
