"""Operator-table rows of the nn family: softmax, log_softmax, conv2d, pooling and
their backward primitives, in NCHW and NHWC, with stride 2 and padding 1.

Shapes are small (N=2, C=2, H=W=5, O=3, 3x3 kernels) so every element is checked by
central differences. Table inputs carry no layout hint, so NHWC rows pass
``layout="nhwc"``; max pooling uses ``Distinct`` inputs so no window has a tie.
"""

import numpy as np

from tests.optable import Distinct, Normal, Row

N = Normal

NCHW = (2, 2, 5, 5)
NHWC = (2, 5, 5, 2)
WEIGHTS = (3, 2, 3, 3)
# conv2d outputs: 3x3 either way (5 - 3 + 1, or (5 + 2 - 3) // 2 + 1).
NCHW_OUT = (2, 3, 3, 3)
NHWC_OUT = (2, 3, 3, 3)

STRIDED = {"stride": 2, "padding": 1}
STRIDED_NHWC = {"stride": 2, "padding": 1, "layout": "nhwc"}

SOFTMAX = [
    Row("softmax", (N((3, 4)),)),
    Row("softmax", (N((2, 3, 4)),), {"axis": 1}, label="axis"),
    Row("log_softmax", (N((3, 4)),)),
    Row("log_softmax", (N((2, 3, 4)),), {"axis": 0}, label="axis"),
]

CONV = [
    Row("conv2d", (N(NCHW), N(WEIGHTS)), wrt=(0, 1), label="nchw"),
    Row("conv2d", (N(NCHW), N(WEIGHTS)), STRIDED, wrt=(0, 1), label="nchw-s2-p1"),
    Row("conv2d", (N(NHWC), N(WEIGHTS)), {"layout": "nhwc"}, (0, 1), label="nhwc"),
    Row("conv2d", (N(NHWC), N(WEIGHTS)), STRIDED_NHWC, (0, 1), label="nhwc-s2-p1"),
    Row(
        "conv2d",
        (N((1, 2, 5, 4)), N((2, 2, 3, 2))),
        {"stride": (2, 1), "padding": (1, 0)},
        wrt=(0, 1),
        label="pairs",
    ),
    Row(
        "conv2d",
        (N(NHWC), N((3, 2, 1, 1))),
        {"stride": 2, "layout": "nhwc"},
        wrt=(0, 1),
        label="nhwc-1x1-s2",
    ),
    Row(
        "conv2d",
        (N((2, 2, 4, 6)), N((3, 2, 2, 2))),
        {"stride": 2},
        wrt=(0, 1),
        label="nchw-tiled-2x2-s2",
    ),
    Row(
        "conv2d_backward_input",
        (N(NCHW_OUT), N(WEIGHTS)),
        {"like": np.zeros(NCHW)},
        wrt=(0, 1),
        label="nchw",
    ),
    Row(
        "conv2d_backward_input",
        (N(NHWC_OUT), N(WEIGHTS)),
        {"like": np.zeros(NHWC), **STRIDED_NHWC},
        wrt=(0, 1),
        label="nhwc-s2-p1",
    ),
    Row(
        "conv2d_backward_weight",
        (N(NCHW), N(NCHW_OUT)),
        {"like": np.zeros(WEIGHTS), **STRIDED},
        wrt=(0, 1),
        label="nchw-s2-p1",
    ),
    Row(
        "conv2d_backward_weight",
        (N(NHWC), N(NHWC_OUT)),
        {"like": np.zeros(WEIGHTS), "layout": "nhwc"},
        wrt=(0, 1),
        label="nhwc",
    ),
]

POOL = [
    Row("max_pool2d", (Distinct((2, 2, 4, 4)),), {"kernel_size": 2}, label="nchw"),
    Row(
        "max_pool2d",
        (Distinct(NHWC),),
        {"kernel_size": 3, "stride": 2, "layout": "nhwc"},
        label="nhwc-overlapping",
    ),
    Row(
        "max_pool2d_backward",
        (N((2, 2, 2, 2)), Distinct((2, 2, 4, 4))),
        {"kernel_size": 2},
        label="nchw",
    ),
    Row(
        "max_pool2d_backward",
        (N((2, 2, 2, 2)), Distinct(NHWC)),
        {"kernel_size": 3, "stride": 2, "layout": "nhwc"},
        label="nhwc-overlapping",
    ),
    Row(
        "max_pool2d_tangent",
        (N(NCHW), Distinct(NCHW)),
        {"kernel_size": 3, "stride": 2},
        label="overlapping",
    ),
    Row("avg_pool2d", (N((2, 2, 4, 4)),), {"kernel_size": 2}, label="nchw"),
    Row(
        "avg_pool2d",
        (N(NHWC),),
        {"kernel_size": 3, "stride": 2, "layout": "nhwc"},
        label="nhwc-overlapping",
    ),
    Row(
        "avg_pool2d_backward",
        (N((2, 2, 2, 2)),),
        {"like": np.zeros(NHWC), "kernel_size": 3, "stride": 2, "layout": "nhwc"},
        label="nhwc-overlapping",
    ),
    Row(
        "avg_pool2d_backward",
        (N((2, 2, 2, 2)),),
        {"like": np.zeros((2, 2, 5, 4)), "kernel_size": (2, 3), "stride": (2, 1)},
        label="pairs-remainder",
    ),
]

ROWS = SOFTMAX + CONV + POOL
