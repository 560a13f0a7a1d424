"""The operator library: every primitive, grouped by family, plus NumPy aliases.

Importing this package registers the operators and installs Tensor's arithmetic and
methods.
"""

from ppto.ops import (
    arrange,
    calculus,
    decompositions,
    elementwise,
    graph,
    indexing,
    least_squares,
    linalg,
    logic,
    matrix_products,
    methods,
    nn,
    norms,
    numbers,
    order,
    reductions,
    shape,
    signal,
    statistics,
    unary_einsum,
)
from ppto.ops.primitive import OPERATORS

FAMILIES = (
    elementwise,
    numbers,
    logic,
    reductions,
    statistics,
    order,
    signal,
    calculus,
    linalg,
    unary_einsum,
    decompositions,
    least_squares,
    matrix_products,
    norms,
    shape,
    arrange,
    indexing,
    graph,
    nn,
)

ALIASES = {
    "sum": "reduce_sum",
    "mean": "reduce_mean",
    "max": "reduce_max",
    "amax": "reduce_max",
    "min": "reduce_min",
    "amin": "reduce_min",
    "prod": "reduce_prod",
    "var": "reduce_var",
    "std": "reduce_std",
    "ravel": "flatten",
    "matmul": "dot",
    "concatenate": "concat",
    "multiply": "mul",
    "subtract": "sub",
    "divide": "div",
    "true_divide": "div",
    "negative": "neg",
    "power": "pow",
    "absolute": "abs",
    "permute_dims": "transpose",
    "astype": "cast",
}

methods.install()


def all_operators() -> dict:
    """Every registered operator by name (aliases not included)."""
    return dict(OPERATORS)
