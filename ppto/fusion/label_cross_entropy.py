"""Softmax cross-entropy over integer labels, ``-mean(log_probs[rows, labels])`` with
``log_probs = shifted - log(sum(exp(shifted), axis, keepdims=True))``: its backward
pass as ppto's rules write it, fused on the CPU.

The gather's gradient is ``index_add(zeros_like(log_probs), g, (rows, labels))``
(``g`` the gathered entries' gradient: ``-1/n`` each for a mean), and log-softmax's
adds ``-sum(that, axis) / total * exps`` (``exps = exp(shifted)``, ``total`` their
sum). Written out, with ``r`` the sum of the ``g`` gathered from each row:

    dlogits = exps * (-r / total),  then g added at each (row, label)

one pass over the logits' shape and two scatters of ``len(rows)`` numbers, where the
statements one by one fill a matrix of zeros, scatter into it, sum its rows and make
three more passes. The scatters add (``np.add.at``), so a row or a (row, label)
pair gathered twice gets both gradients, as the unfused code's ``index_add`` does;
for rows each gathered once the result is the unfused one bit for bit. Other index
forms, types and shapes run the pattern's operators in NumPy.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion.cnn_patterns import FIRST
from ppto.fusion.patterns import BACKWARD, rule
from ppto.ops import indexing, reductions, shape


def backward_pattern(g, index, like, axis, total, exps):
    """The log-softmax's input gradient given the gather's ``g`` at ``index``, as
    the generated code computes it (``dlog_probs`` read twice)."""
    gathered = indexing.index_add(shape.zeros_like(like), g, index)
    return gathered + -reductions.reduce_sum(gathered, axis, True) / total * exps


def _backward(g, index, like, axis, total, exps):
    """``backward_pattern``'s value: one pass over ``exps`` where the arguments are
    the rows and labels of a matrix (see the module docstring), else the pattern's
    operators."""
    pairs = _rows_and_labels(index)
    if pairs is None or not _fits(g, like, axis, total, exps, *pairs):
        return _plain(g, index, like, axis, total, exps)
    rows, labels = pairs
    sums = np.zeros(len(exps), exps.dtype)  # per row, the gradient gathered there
    np.add.at(sums, rows, g)
    scale = np.negative(sums, out=sums).reshape(-1, 1)
    scale /= total
    out = np.multiply(scale, exps)
    try:  # (by flat position: a third of the time of add.at's pairs of indices)
        flat = np.ravel_multi_index((rows, labels), out.shape)
    except ValueError:  # a negative index (or one out of bounds: add.at says so)
        np.add.at(out, (rows, labels), g)
    else:
        np.add.at(out.reshape(-1), flat, g)
    return out


def _rows_and_labels(index) -> tuple | None:
    """``index`` as two integer arrays (lists made arrays, as NumPy indexes with
    them), or None where it is not a pair of them."""
    if type(index) is not tuple or len(index) != 2:
        return None
    parts = []
    for part in index:
        if type(part) is list:
            part = np.asarray(part)
        if type(part) is not np.ndarray or part.dtype.kind not in "iu":
            return None
        parts.append(part)
    return tuple(parts)


def _fits(g, like, axis, total, exps, rows, labels) -> bool:
    """Whether the arguments are the kernel's case: a matrix of exponentials of a
    floating dtype, reduced along its last axis (``total``, dims kept), a
    ``like`` of its shape and dtype, one vector each of rows and labels and a
    gradient ``g`` of that vector's length and the matrix's dtype (else NumPy's
    promotion and broadcasting: the pattern's operators)."""
    if type(exps) is not np.ndarray or exps.ndim != 2 or exps.dtype.kind != "f":
        return False
    if type(axis) is not int or axis not in (1, -1):
        return False
    dtype, length = exps.dtype, rows.shape
    return (
        type(total) is np.ndarray
        and total.shape == (len(exps), 1)
        and type(like) is np.ndarray
        and like.shape == exps.shape
        and type(g) is np.ndarray
        and {total.dtype, like.dtype, g.dtype} == {dtype}
        and rows.ndim == 1
        and labels.shape == length
        and g.shape == length
    )


def _plain(g, index, like, axis, total, exps):
    """The pattern's operators in NumPy (any index ``index_add`` takes)."""
    gathered = indexing.index_add.impl(np, np.zeros_like(like), g, index)
    sums = np.sum(gathered, axis=axis, keepdims=True)
    return gathered + -sums / total * exps


# (before regions: a region would take its elementwise statements apart)
rule("label_cross_entropy_backward", None, BACKWARD, _backward, FIRST)(backward_pattern)
