"""Softmax cross-entropy over integer labels, its backward pass
(``ppto.fusion.label_cross_entropy``) as CuPy kernels.

The rule's pattern scatters the gathered entries' gradient ``g`` into a matrix of
zeros (``index_add``), which no kernel is derived from. Written out (see that
module's docstring) the gradient is ``exps * (-r / total)`` (or ``exp(log_probs) *
-r``) with ``g`` added at each (row, label), ``r`` being the sum of the ``g``
gathered from each row. On CUDA that is: ``r`` scattered into a column of zeros
(``cupy.add.at`` over the rows: one small launch and the column, the only
temporary), one ``cupy.ElementwiseKernel`` writing the softmax part over the
logits' shape (the softmax is never stored), and ``g`` scattered into it by
``cupy.add.at`` at the (row, label) pairs. The scatters are the ones the unfused
code makes, so repeated rows and pairs add up, and indices out of bounds are
refused (``refuse_wrapped_indices``), as there. Where the entries were summed or
averaged, ``g`` is the loss's number, scattered as it is. Four launches where the
statements one by one fill a matrix of zeros, scatter into it, sum its rows and
make another pass; other index forms, types and shapes run the pattern's
operators on CuPy.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion import cuda
from ppto.fusion.cuda import CudaElementwise
from ppto.fusion.kernels import Node
from ppto.fusion.label_cross_entropy import (
    _fits,
    _number,
    _plain,
    _plain_log_softmax,
    _rows_and_labels,
    _spread,
)
from ppto.ops.indexing import refuse_wrapped_indices
from ppto.ops.reductions import unreduce


def _on_device(xp, index):
    """A pair of integer subscripts with host arrays and lists copied to the device
    (the rows ``np.arange(n)`` generated code makes on the host; CuPy copies them
    where it indexes with them too); anything else as it is."""
    if type(index) is not tuple or len(index) != 2:
        return index
    parts = []
    for part in index:
        if type(part) in (list, np.ndarray):
            host = np.asarray(part)
            part = xp.asarray(host) if host.dtype.kind in "iu" else part
        parts.append(part)
    return tuple(parts)


class CudaLabelCrossEntropy:
    """The kernels of one label cross-entropy rule, called with its arguments:
    ``(g, index, like, axis, total, exps)``, ``(g, index, like, axis,
    log_probs)``, or either with ``(loss, picked)`` in ``g``'s place where
    ``reduced``."""

    def __init__(self, name: str, reduced: bool, from_log_probs: bool) -> None:
        self.name = name
        self.reduced = reduced
        self.from_log_probs = from_log_probs
        sums, matrix = Node(leaf=0), Node(leaf=1)
        if from_log_probs:  # exp(log_probs) * -r
            tree = Node("mul", [Node("exp", [matrix]), Node("neg", [sums])])
            self.kernel = CudaElementwise(f"{name}_softmax", tree, 2)
        else:  # (-r / total) * exps
            scale = Node("div", [Node("neg", [sums]), Node(leaf=2)])
            tree = Node("mul", [scale, matrix])
            self.kernel = CudaElementwise(f"{name}_softmax", tree, 3)

    def __call__(self, *arguments):
        xp = cuda.cupy_module()
        if self.reduced:
            loss, picked, index, like, axis, *rest = arguments
        else:
            g, index, like, axis, *rest = arguments
        total, matrix = (None, rest[0]) if self.from_log_probs else rest
        pairs = _rows_and_labels(_on_device(xp, index), xp.ndarray)
        fits = pairs is not None and _fits(
            like, axis, matrix, *pairs, total, xp.ndarray
        )
        if self.reduced:
            fits = fits and _number(loss, picked, *pairs, matrix, xp.ndarray)
            g = loss if fits else unreduce.impl(xp, loss, picked)
        else:
            fits = fits and _spread(g, pairs[0], matrix, xp.ndarray)
        if not fits:
            return self.plain(xp, g, index, like, axis, total, matrix)
        rows, labels = pairs
        refuse_wrapped_indices(xp, pairs, matrix.shape)  # (as index_add does)
        sums = xp.zeros(len(matrix), matrix.dtype)
        xp.add.at(sums, rows, g)
        column = sums.reshape(len(matrix), 1)
        operands = (column, matrix) if self.from_log_probs else (column, matrix, total)
        out = self.kernel(*operands)
        xp.add.at(out, (rows, labels), g)
        return out

    def plain(self, xp, g, index, like, axis, total, matrix):
        """The pattern's operators, one CuPy call each."""
        if self.from_log_probs:
            return _plain_log_softmax(g, index, like, axis, matrix, xp)
        return _plain(g, index, like, axis, total, matrix, xp)

    def parts(self) -> list[CudaElementwise]:
        """The elementwise CUDA C it runs."""
        return [self.kernel]

    def listing(self) -> str:
        """The steps and the kernel, to read."""
        given = "the loss's number" if self.reduced else "g"
        matrix = "log_probs" if self.from_log_probs else "exps, total"
        return (
            f"// {self.name}: r = cupy.add.at(zeros(rows), rows, {given}) (a column);\n"
            f"// out = the softmax part, of r, {matrix}:\n"
            f"{self.kernel.listing().split(chr(10), 1)[1]}"
            f"// then cupy.add.at(out, (rows, labels), {given})\n"
        )
