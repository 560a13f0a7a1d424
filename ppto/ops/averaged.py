"""``np.average(..., returned=True)``: the average and the sum of its weights, as
one operator differentiated from its body (below), so that both results have
gradients without a rule of their own; a call of ``average`` with ``returned``
True is a call of it (see ``OperatorDef.flags``)."""

from __future__ import annotations

import numpy as np

from ppto.composite import CompositeOperator
from ppto.ops import reductions, shape


def average_returned(a, axis=None, weights=None, returned=True, *, keepdims=False):
    """``(average, sum of the weights)`` as np.average(a, axis, weights,
    returned=True) gives them: the sum of the weights broadcast to a's shape over
    ``axis`` (each 1-D weight counted once per element it weighs), or, without
    weights, the count of elements averaged, in the average's shape and dtype."""
    mean = reductions.average(a, axis, weights, keepdims=keepdims)
    if weights is None:
        return mean, shape.full_like(mean, np.size(a) / np.size(mean))
    kept = reductions.weights_shape(weights, a, axis)  # (1-D weights along axis)
    spread = shape.broadcast_to(shape.reshape(weights, kept), np.shape(a))
    return mean, reductions.reduce_sum(spread, axis, keepdims)


average_returned = CompositeOperator(average_returned)
reductions.average.flags = {"returned": average_returned}
