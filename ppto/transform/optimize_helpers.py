"""Rule helpers made where the code is made: a call of a ``shape_helper`` whose
arrays' shapes are known when the code is specialised is replaced by its result
(``order = diff_order(x, None, None, 1, -1)`` -> ``1``, read where ``order`` was),
so the generated code holds the numbers a person would write.
"""

from __future__ import annotations

import gast
import numpy as np

from ppto.errors import PptoError
from ppto.ops.shape import dtype_of
from ppto.transform import trees
from ppto.transform.analyze import NOT_LITERAL, literal
from ppto.transform.inline import _literal
from ppto.transform.optimize import fold_constants
from ppto.transform.resolve import hashable
from ppto.transform.trees import name_counts, single_target


def fold_shape_helpers(
    body: list, namespace: dict, shapes: dict, dtypes: dict, temporaries: set
) -> list:
    """Replace calls of shape helpers by their results where every argument is a
    literal, a temporary assigned one once, or a floating-point array of known
    shape (a helper reads only its shape: an integer array may be an index, whose
    values a helper may read, and is not replaced); then the arithmetic and
    conditional expressions they decide."""
    assigned_once = {
        n for n, count in name_counts(body, "Store").items() if count == 1
    } & set(temporaries)
    folder = _Folder(namespace, shapes, dtypes, assigned_once)
    folder.block(body)
    return fold_constants(body) if folder.folded else body


class _Folder(trees.Transformer):
    def __init__(self, namespace, shapes, dtypes, assigned_once):
        self.namespace = namespace
        self.shapes = shapes
        self.dtypes = dtypes
        self.assigned_once = assigned_once
        self.known: dict = {}  # temporaries assigned a literal: name -> value
        self.folded = False

    def block(self, body: list) -> None:
        for position, statement in enumerate(body):
            body[position] = statement = self.visit(statement)
            for _, inner in trees.nested_blocks(statement):
                self.block(inner)
            target = single_target(statement)
            if target in self.assigned_once:
                value = literal(statement.value)
                if value is not NOT_LITERAL and _immutable(value):
                    self.known[target] = value

    def visit_If(self, node):
        node.test = self.visit(node.test)
        return node  # (its blocks: in ``block``, in order)

    def visit_For(self, node):
        node.iter = self.visit(node.iter)
        return node

    def visit_While(self, node):
        node.test = self.visit(node.test)
        return node

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load) and node.id in self.known:
            written = _literal(self.known[node.id])
            if written is not None:
                self.folded = True
                return written
        return node

    def visit_Compare(self, node):
        """``x is None`` (``is not``) of an array of known shape and dtype: a
        rule's test of an optional input given (diff's ``prepend``)."""
        self.generic_visit(node)
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (gast.Is, gast.IsNot))
            and isinstance(node.left, gast.Name)
            and isinstance(self.shapes.get(node.left.id), tuple)
            and self.dtypes.get(node.left.id) is not None
            and isinstance(node.comparators[0], gast.Constant)
            and node.comparators[0].value is None
        ):
            self.folded = True
            return gast.Constant(isinstance(node.ops[0], gast.IsNot), None)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        helper = trees.called_value(node, self.namespace)
        if not getattr(helper, "reads_metadata_only", False) or node.keywords:
            return node
        if helper is dtype_of:
            return self.dtype_attribute(node)
        if getattr(helper, "reads_dtype_only", False):
            return self.dtype_decided(helper, node)
        arguments = [self.stand_in(argument) for argument in node.args]
        if any(argument is NOT_LITERAL for argument in arguments):
            return node
        try:
            result = helper(*arguments)
        except (PptoError, TypeError, ValueError, IndexError):
            return node  # (raised where the code runs)
        written = _literal(result) if _finite(result) else None
        if written is None:
            return node
        self.folded = True
        return written

    def dtype_attribute(self, node):
        """``dtype_of(x)`` written ``x.dtype`` where x is known to be an array (its
        dtype is known): the helper is for a value that may be a differentiated
        Python float, which has none (see ``ppto.ops.shape.dtype_of``)."""
        (argument,) = node.args
        if not (
            isinstance(argument, gast.Name) and self.dtypes.get(argument.id) is not None
        ):
            return node
        self.folded = True
        return gast.Attribute(
            gast.Name(argument.id, gast.Load(), None, None), "dtype", gast.Load()
        )

    def dtype_decided(self, helper, node):
        """A ``dtype_helper``'s result where its argument's dtype is known (its
        shape need not be)."""
        (argument,) = node.args
        dtype = (
            self.dtypes.get(argument.id) if isinstance(argument, gast.Name) else None
        )
        if dtype is None:
            return node
        self.folded = True
        return _literal(helper(np.zeros((), dtype)))

    def stand_in(self, argument):
        """What the helper may be called with for ``argument``: its literal value,
        or a floating-point array of its shape (broadcast from one zero: no
        memory); NOT_LITERAL where neither is known."""
        value = literal(argument)
        if value is not NOT_LITERAL or not isinstance(argument, gast.Name):
            return value
        shape, dtype = self.shapes.get(argument.id), self.dtypes.get(argument.id)
        if not (
            isinstance(shape, tuple)
            and all(type(size) is int for size in shape)
            and dtype is not None
            and np.dtype(dtype).kind in "fc"
        ):
            return NOT_LITERAL
        return np.broadcast_to(np.zeros((), dtype), shape)


def _immutable(value) -> bool:
    """A number, string, None or tuple of them: a value that reads the same
    wherever it is written out (a list written out twice is two lists: a tape)."""
    return hashable(value)


def _finite(value) -> bool:
    """No infinity or nan in ``value`` (they have no literal to be written as)."""
    if isinstance(value, (tuple, list)):
        return all(_finite(item) for item in value)
    return not isinstance(value, float) or bool(np.isfinite(value))
