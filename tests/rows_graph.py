"""Operator-table rows of the graph family (segment reductions): 1-D, 2-D and 3-D
data, ids that repeat (more rows than segments), and empty segments (``num_segments``
beyond the largest possible id). Only the data is differentiated, never the ids;
np.bincount's weights likewise, never its numbers."""

from tests.optable import Distinct, Integers, Normal, Row


def segment_rows(op, data):
    """Three cases of one segment operator; ``data(shape)`` makes its input spec."""
    return [
        Row(op, (data((6,)), Integers((6,), 3)), label="1d-repeats"),
        Row(
            op,
            (data((7, 3)), Integers((7,), 3)),
            {"num_segments": 5},
            label="2d-empty-segments",
        ),
        Row(op, (data((5, 2, 3)), Integers((5,), 2)), label="3d"),
    ]


ROWS = (
    segment_rows("segment_sum", Normal)
    + segment_rows("segment_mean", Normal)
    + segment_rows("segment_max", Distinct)
    + [
        # np.bincount's weights (its numbers are whole, never differentiated)
        Row("bincount", (Integers((6,), 3), Normal((6,))), wrt=(1,)),
        Row(
            "bincount",
            (Integers((7,), 4), Normal((7,))),
            {"minlength": 6},
            wrt=(1,),
            label="minlength",
        ),
    ]
)
