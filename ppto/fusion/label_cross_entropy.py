"""Softmax cross-entropy over integer labels, ``-mean(log_probs[rows, labels])``: its
backward pass as ppto's rules write it, fused on the CPU, for log-softmax written
out (``shifted - log(sum(exp(shifted), axis, keepdims=True))``) and for
``ppto.log_softmax``.

The gather's gradient is ``index_add(zeros_like(log_probs), g, (rows, labels))``
(``g`` the gathered entries' gradient: ``-1/n`` each for a mean). Written out,
log-softmax's adds ``-sum(that, axis) / total * exps`` (``exps = exp(shifted)``,
``total`` their sum); ``ppto.log_softmax``'s rule subtracts ``exp(log_probs) *
sum(that, axis)``. With ``r`` the sum of the ``g`` gathered from each row, both are

    dlogits = exps * (-r / total)   (or exp(log_probs) * -r),  then g added at
    each (row, label)

one pass over the logits' shape and two scatters of ``len(rows)`` numbers, where the
statements one by one fill a matrix of zeros, scatter into it, sum its rows and make
two or three more passes. Where a row is gathered twice the scatters add
(``np.add.at``), so that it and a (row, label) pair gathered twice get both
gradients, as the unfused code's ``index_add`` does; rows each gathered once are
scattered by subscripts, and the result is the unfused one bit for bit. Where the
gathered entries were summed or averaged, ``g`` is the loss's gradient broadcast
(``unreduce``): those rules take the number and scatter it as it is. Other index
forms, types and shapes run the patterns' operators in NumPy.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion.cnn_patterns import FIRST
from ppto.fusion.patterns import BACKWARD, rule
from ppto.ops import elementwise, indexing, reductions, shape
from ppto.ops.shape import target_shape


def backward_pattern(g, index, like, axis, total, exps):
    """Log-softmax's input gradient, written out, given the gather's ``g`` at
    ``index``, as the generated code computes it (``dlog_probs`` read twice)."""
    gathered = indexing.index_add(shape.zeros_like(like), g, index)
    return gathered + -reductions.reduce_sum(gathered, axis, True) / total * exps


def log_softmax_backward_pattern(g, index, like, axis, log_probs):
    """``ppto.log_softmax``'s input gradient given the gather's ``g`` at ``index``."""
    gathered = indexing.index_add(shape.zeros_like(like), g, index)
    return gathered - elementwise.exp(log_probs) * reductions.reduce_sum(
        gathered, axis, True
    )


def reduced_backward_pattern(loss, picked, index, like, axis, total, exps):
    """``backward_pattern`` where the gathered entries were summed or averaged:
    their gradient is the loss's (a number) broadcast to the gather's shape
    (``picked``: the gathered values or their shape)."""
    g = reductions.unreduce(loss, picked)
    return backward_pattern(g, index, like, axis, total, exps)


def reduced_log_softmax_backward_pattern(loss, picked, index, like, axis, log_probs):
    """``log_softmax_backward_pattern`` where the gathered entries were summed or
    averaged (see ``reduced_backward_pattern``)."""
    g = reductions.unreduce(loss, picked)
    return log_softmax_backward_pattern(g, index, like, axis, log_probs)


def _backward(g, index, like, axis, total, exps):
    """``backward_pattern``'s value: one pass over ``exps`` where the arguments are
    the rows and labels of a matrix (see the module docstring), else the pattern's
    operators."""
    pairs = _rows_and_labels(index)
    if pairs is None or not (
        _fits(like, axis, exps, *pairs, total) and _spread(g, pairs[0], exps)
    ):
        return _plain(g, index, like, axis, total, exps)
    return _written_out(g, pairs, total, exps)


def _reduced_backward(loss, picked, index, like, axis, total, exps):
    """``reduced_backward_pattern``'s value: ``_backward``'s, the loss's number
    scattered as it is."""
    pairs = _rows_and_labels(index)
    if pairs is None or not (
        _fits(like, axis, exps, *pairs, total) and _number(loss, picked, *pairs, exps)
    ):
        g = reductions.unreduce.impl(np, loss, picked)
        return _plain(g, index, like, axis, total, exps)
    return _written_out(loss, pairs, total, exps)


def _log_softmax_backward(g, index, like, axis, log_probs):
    """``log_softmax_backward_pattern``'s value, as ``_backward``'s."""
    pairs = _rows_and_labels(index)
    if pairs is None or not (
        _fits(like, axis, log_probs, *pairs) and _spread(g, pairs[0], log_probs)
    ):
        return _plain_log_softmax(g, index, like, axis, log_probs)
    return _from_log_probs(g, pairs, log_probs)


def _reduced_log_softmax_backward(loss, picked, index, like, axis, log_probs):
    """``reduced_log_softmax_backward_pattern``'s value, as ``_reduced_backward``'s."""
    pairs = _rows_and_labels(index)
    if pairs is None or not (
        _fits(like, axis, log_probs, *pairs)
        and _number(loss, picked, *pairs, log_probs)
    ):
        g = reductions.unreduce.impl(np, loss, picked)
        return _plain_log_softmax(g, index, like, axis, log_probs)
    return _from_log_probs(loss, pairs, log_probs)


def _written_out(g, pairs, total, exps) -> np.ndarray:
    """``exps * (-r / total)``, then ``g`` scattered (see the module docstring)."""
    once = _each_row_once(pairs[0], len(exps))
    if _every_row_one_number(g, pairs[0], exps, once):
        scale = np.divide(-g, total)
    else:
        scale = _row_sums(g, pairs[0], exps, once)
        np.negative(scale, out=scale)
        scale /= total
    return _scattered(np.multiply(scale, exps), g, *pairs, once)


def _from_log_probs(g, pairs, log_probs) -> np.ndarray:
    """``exp(log_probs) * -r``, then ``g`` scattered."""
    once = _each_row_once(pairs[0], len(log_probs))
    if _every_row_one_number(g, pairs[0], log_probs, once):
        scale = -g
    else:
        scale = _row_sums(g, pairs[0], log_probs, once)
        np.negative(scale, out=scale)
    out = np.exp(log_probs)
    return _scattered(np.multiply(out, scale, out=out), g, *pairs, once)


def _every_row_one_number(g, rows, matrix, once: bool) -> bool:
    """Whether every row of ``matrix`` is gathered once and ``g`` is one number
    (a mean's or sum's gradient, over every row: a batch's loss): then each
    row's sum ``r`` is ``g`` itself, and no column of sums is made."""
    return once and len(rows) == len(matrix) and getattr(g, "ndim", 0) == 0


def _each_row_once(rows, count: int) -> bool:
    """Whether ``rows`` (of a matrix of ``count`` rows) names no row twice (``-1``
    and ``count - 1`` are one row): then no (row, label) pair repeats either, and
    NumPy's subscripts (the gather's own, warm in the caches) scatter the
    gradients; else ``np.add.at``, whose code in place (the caches cold from the
    matrix products around it) took 40-60 us more than the subscripts."""
    marks = np.zeros(count, bool)
    marks[rows] = True
    return np.count_nonzero(marks) == len(rows)


def _row_sums(g, rows, matrix, once: bool) -> np.ndarray:
    """Per row of ``matrix``, the sum of the gradients ``g`` (one per gathered
    entry, or one number for all) gathered from it, a column of ``matrix``'s
    dtype (``once``: each row gathered at most once)."""
    sums = np.zeros((len(matrix), 1), matrix.dtype)
    if once:
        sums[rows, 0] = g
    else:
        np.add.at(sums.reshape(-1), rows, g)
    return sums


def _scattered(out, g, rows, labels, once: bool) -> np.ndarray:
    """``out`` with ``g`` added at each ``(row, label)``, repeated pairs each."""
    if once:  # (no pair twice: a subscript's += adds each)
        out[rows, labels] += g
        return out
    try:  # (by flat position: a third of the time of add.at's pairs of indices)
        flat = np.ravel_multi_index((rows, labels), out.shape)
    except ValueError:  # a negative index (or one out of bounds: add.at says so)
        np.add.at(out, (rows, labels), g)
    else:
        np.add.at(out.reshape(-1), flat, g)
    return out


def _rows_and_labels(index, array=np.ndarray) -> tuple | None:
    """``index`` as two integer arrays (lists made arrays, as NumPy indexes with
    them, on the CPU), or None where it is not a pair of them. ``array``: the
    arrays' type (CuPy's, for its kernels)."""
    if type(index) is not tuple or len(index) != 2:
        return None
    parts = []
    for part in index:
        if type(part) is list and array is np.ndarray:
            part = np.asarray(part)
        if type(part) is not array or part.dtype.kind not in "iu":
            return None
        parts.append(part)
    return tuple(parts)


def _fits(like, axis, matrix, rows, labels, total=None, array=np.ndarray) -> bool:
    """Whether the arguments are the kernels' case: a ``matrix`` (exponentials or
    log-probabilities) of a floating dtype, reduced along its last axis (their
    sums ``total``, dims kept, where given), a ``like`` of its shape and dtype and
    one vector each of rows and labels (else NumPy's promotion and broadcasting:
    the pattern's operators). ``array``: the arrays' type."""
    if type(matrix) is not array or matrix.ndim != 2 or matrix.dtype.kind != "f":
        return False
    if type(axis) is not int or axis not in (1, -1):
        return False
    if total is not None and not (
        type(total) is array
        and total.shape == (len(matrix), 1)
        and total.dtype == matrix.dtype
    ):
        return False
    return (
        type(like) is array
        and like.shape == matrix.shape
        and like.dtype == matrix.dtype
        and rows.ndim == 1
        and labels.shape == rows.shape
    )


def _spread(g, rows, matrix, array=np.ndarray) -> bool:
    """Whether ``g`` is one gradient per gathered entry, of ``matrix``'s dtype."""
    return type(g) is array and g.dtype == matrix.dtype and g.shape == rows.shape


def _number(loss, picked, rows, labels, matrix, array=np.ndarray) -> bool:
    """Whether ``loss`` is one number of ``matrix``'s dtype (0-d) and ``picked``
    (the gathered values or their shape) has the gather's shape."""
    if not (type(loss) is array or isinstance(loss, np.generic)):
        return False
    if loss.shape != () or loss.dtype != matrix.dtype:
        return False
    return target_shape(picked) == rows.shape


def _gathered(g, index, like, xp=np):
    """``index_add(zeros_like(like), g, index)`` (any index it takes), added into
    the new zeros."""
    return indexing.index_add.into(xp, xp.zeros_like(like), g, index)


def _plain(g, index, like, axis, total, exps, xp=np):
    """``backward_pattern``'s operators in NumPy (or ``xp``: CuPy's kernels')."""
    gathered = _gathered(g, index, like, xp)
    sums = xp.sum(gathered, axis=axis, keepdims=True)
    return gathered + -sums / total * exps


def _plain_log_softmax(g, index, like, axis, log_probs, xp=np):
    """``log_softmax_backward_pattern``'s operators in NumPy (or ``xp``)."""
    gathered = _gathered(g, index, like, xp)
    sums = xp.sum(gathered, axis=axis, keepdims=True)
    return gathered - xp.exp(log_probs) * sums


def _cuda_kernel(reduced: bool, from_log_probs: bool):
    """A function of a rule making its CuPy kernel (``ppto.fusion.
    cuda_label_cross_entropy``), which the registry calls on first use."""

    def make(rule):
        from ppto.fusion.cuda_label_cross_entropy import CudaLabelCrossEntropy

        return CudaLabelCrossEntropy(rule.kernel_name, reduced, from_log_probs)

    return make


# (before regions: a region would take their elementwise statements apart)
for name, implementation, pattern in (
    ("label_cross_entropy_backward", _backward, backward_pattern),
    ("label_cross_entropy_reduced_backward", _reduced_backward,
     reduced_backward_pattern),
    ("label_cross_entropy_log_softmax_backward", _log_softmax_backward,
     log_softmax_backward_pattern),
    ("label_cross_entropy_reduced_log_softmax_backward",
     _reduced_log_softmax_backward, reduced_log_softmax_backward_pattern),
):  # fmt: skip
    reduced, from_log_probs = "reduced" in name, "log_softmax" in name
    rule(name, None, BACKWARD, implementation, FIRST,
         cuda=_cuda_kernel(reduced, from_log_probs))(pattern)  # fmt: skip
