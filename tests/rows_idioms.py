"""Operator table rows of the operators behind NumPy idioms (tests/optable.py):
Python's max and min of numbers, float() and .item(), np.einsum of one operand,
np.column_stack, np.array_split, np.partition and order='F' reshapes."""

import ppto
from tests.optable import Distinct, Row, binary, unary
from tests.optable import Normal as N

ROWS = [
    binary("larger", N(()), N(())),
    binary("larger", N(()), 0.3, "number", wrt=(0,)),
    binary("smaller", N(()), N(())),
    binary("smaller", -0.2, N(()), "number", wrt=(1,)),
    unary("to_float", N(())),
    unary("item", N(())),
    unary("item", N((1, 1)), "one-element"),
    unary("unary_einsum", N((3, 3)), "trace", subscripts="ii->"),
    unary("unary_einsum", N((3, 3)), "diagonal", subscripts="ii->i"),
    unary("unary_einsum", N((3, 4)), "transpose", subscripts="ij->ji"),
    unary("unary_einsum", N((3, 4)), "implicit", subscripts="ji"),
    unary("unary_einsum", N((2, 3, 4)), "sum", subscripts="ijk->ik"),
    unary("unary_einsum", N((2, 3, 4)), "ellipsis", subscripts="...ij->...ji"),
    unary("unary_einsum", N((2, 2, 3)), "diagonal-sum", subscripts="iij->j"),
    Row(
        "column_stack",
        (N((3,)), N((3, 2))),
        wrt=(0, 1),
        call=lambda a, b: ppto.column_stack([a, b]),
    ),
    Row(
        "array_split",
        (N((5, 3)),),
        call=lambda x: ppto.array_split(x, 3, axis=0),
    ),
    Row("vecdot", (N((3, 4)), N((4,))), wrt=(0, 1)),
    Row("vecdot", (N((2, 3, 4)), N((3, 1))), {"axis": 1}, wrt=(0, 1), label="axis"),
    Row(
        "select",
        (N((3, 4)), N((4,)), N((3, 1))),
        wrt=(0, 1, 2),
        call=lambda a, b, c: ppto.select([a > 0.5, a < -0.5], [a * a, b], c),
    ),
    unary("rot90", N((3, 4))),
    unary("rot90", N((2, 3, 4)), "k-axes", k=-1, axes=(2, 0)),
    unary("at_least", N((4,)), ndim=2),
    unary("at_least", N((3, 4)), "3d", ndim=3),
    Row("rule_gradient", (N((2, 3)), N((2, 3))), {"rule": "op", "input": "x"}),
    Row("append", (N((2, 3)), N((4,))), wrt=(0, 1)),
    Row("append", (N((2, 3)), N((1, 3))), {"axis": 0}, wrt=(0, 1), label="axis"),
    Row("split_by", (N((3, 4)),), call=lambda x: ppto.split_by(x, [1, 3], "h")),
    Row("split_by", (N((5,)),), call=lambda x: ppto.split_by(x, [2], "h"), label="1-d"),
    Row("split_by", (N((4, 3)),), call=lambda x: ppto.split_by(x, 2, "v"), label="v"),
    Row(
        "split_by",
        (N((2, 3, 4)),),
        call=lambda x: ppto.split_by(x, [1], "d"),
        label="d",
    ),
    unary("partition", Distinct((3, 4)), kth=1),
    unary("partition", Distinct((3, 4)), "axis", kth=1, axis=0),
    unary("partition", Distinct((3, 4)), "flattened", kth=[2, 5], axis=None),
    unary("reshape", N((2, 6)), "fortran", shape=(3, 4), order="F"),
    unary("flatten", N((2, 3)), "fortran", order="F"),
]
