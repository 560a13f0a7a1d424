"""Python's own functions of numbers: ``max(a, b)`` and ``min(a, b)`` of two numbers
(``larger``, ``smaller``; more arguments and ``max(items)`` are chains of them), and
``float(x)`` of a 0-d array and ``x.item()`` of a one-element one (``to_float``,
``item``).

Each returns what Python does, the very object for max and min: ``max(a, b)`` is a
unless b > a, so a tie (and a NaN a) keeps the first, which takes the whole
gradient, as Python returns it (np.maximum's convention too). A number made of an
array passes its gradient back to the array's one element.
"""

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.elementwise import where
from ppto.ops.logic import greater, less
from ppto.ops.primitive import primitive
from ppto.ops.shape import cast, dtype_of, reshape

NUMBERS = "(Tensor[], Tensor[]) -> Tensor[]"


@primitive(NUMBERS)
def larger(xp, a, b):
    """Python's ``max(a, b)`` of two numbers: b if b > a, else a (the first of
    equal ones)."""
    return b if b > a else a


@larger.grad_rule
def _(a, b):
    def backward(dY):
        taken = greater(b, a)
        return where(taken, 0.0, dY), where(taken, dY, 0.0)

    return backward


@larger.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(greater(b, a), db, da)

    return tangent


@primitive(NUMBERS)
def smaller(xp, a, b):
    """Python's ``min(a, b)`` of two numbers: b if b < a, else a (the first of
    equal ones)."""
    return b if b < a else a


@smaller.grad_rule
def _(a, b):
    def backward(dY):
        taken = less(b, a)
        return where(taken, 0.0, dY), where(taken, dY, 0.0)

    return backward


@smaller.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(less(b, a), db, da)

    return tangent


ONE_ELEMENT = "(Tensor[...]) -> Tensor[]"


@primitive(ONE_ELEMENT, tangent="linear")
def to_float(xp, x):
    """Python's ``float(x)`` of a number or a 0-d array: a Python float (NumPy 2
    refuses an array of more axes, and so does this)."""
    try:
        return float(x)
    except TypeError as error:  # (NumPy's own words, as a ppto error at the line)
        raise ShapeError(
            f"float() of an array of shape {np.shape(x)}: {error}; take its "
            "element first, float(x[0]), or write x.item()"
        ) from error


@primitive(ONE_ELEMENT, tangent="linear")
def item(xp, x):
    """``x.item()`` of a one-element array: its element as a Python number (a
    float of a floating array)."""
    return x.item() if hasattr(x, "item") else x


def _one_element_rule(op):
    @op.grad_rule
    def _(x):
        def backward(dY):
            # (the number's gradient, back in x's shape and dtype)
            return reshape(cast(dY, dtype_of(x)), np.shape(x))

        return backward


_one_element_rule(to_float)
_one_element_rule(item)
