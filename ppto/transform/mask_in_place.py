"""Masked gradients written into their dying input in the code that runs on the CPU.

The backward pass of ``relu``, ``maximum``, ``clip`` or ``where`` is ``dx =
where(mask, dy, 0.0)``, and ``dy`` is most often dead right after it (the release
pass puts ``dy = None`` on the next line). Made anew, ``dx`` costs an allocation
and a pass writing every element; written into ``dy``'s own memory it is one
pass ANDing the mask's bits into ``dy``'s (as the backend's ``where`` does into a
new array): the same values, NaN and infinities in ``dy`` kept where the mask
holds, ``+0.0`` where not. (NumPy's masked writes, ``np.copyto(dy, 0, where=~m)``
or ``np.putmask``, branch per element: ten times slower on a random mask.)
(Measured on the benchmark MLP's 256x256 relu gradient, in instructions: see the
commit that added this.)

Statically the pass only needs ``dy`` dead after the statement; whether its
array is seen by anything else (another name bound to it, a view of it, the
caller's array) is decided when the code runs by ``where_into_dead``: an array
owning its memory that nothing but the generated code's local refers to.
"""

from __future__ import annotations

import sys

import gast
import numpy as np

from ppto.runtime.backends import mask_in_place, select_in_place, where_into


def where_into_dead(condition, a, b, dying=None):
    """``where(condition, a, b)`` where one of ``a``, ``b`` is ``+0`` (a Python
    number) and the other an array the caller no longer reads, or (``dying``: 0
    for ``a``, 1 for ``b``) both are arrays and that one is no longer read: written
    into that array when nothing else can see it (see the module docstring), else
    made as the backend's ``where`` makes it."""
    # (counted first: the loop's tuples and names add references of their own)
    alone = (
        sys.getrefcount(a) <= _ONLY_THE_CALLERS and dying != 1,
        sys.getrefcount(b) <= _ONLY_THE_CALLERS and dying != 0,
    )
    for values, zero, keep, unshared in (
        (a, b, True, alone[0]),
        (b, a, False, alone[1]),
    ):
        if (
            unshared
            and type(values) is np.ndarray
            and values.base is None  # (owns its memory: no view of another array)
            and (
                mask_in_place(condition, values, zero, keep)
                or (dying is not None and select_in_place(condition, a, b, values))
            )
        ):
            return values
    return where_into(condition, a, b)


def _references_of_an_unshared_local() -> int:
    """What ``sys.getrefcount`` says in ``where_into_dead`` of an array that only
    the calling function's local name holds (measured, not assumed: the count of
    a call's own references differs between Python versions)."""

    def probe(condition, a, b):
        return sys.getrefcount(a)

    def caller():
        values = np.empty(1)
        return probe(None, values, 0.0)

    return caller()


_ONLY_THE_CALLERS = _references_of_an_unshared_local()


def write_masks_in_place(definition, is_where, bind) -> None:
    """Rewrite, in ``definition`` (lowered, its dead values released), each ``x =
    where(c, v, 0.0)`` (or ``where(c, 0.0, v)``) followed by the release of ``v``
    to call ``where_into_dead``. ``is_where(name)``: whether the code calls the
    backend's ``where`` by that name; ``bind(function, name)``: the name the code
    calls ``function`` by."""
    parameters = {argument.id for argument in definition.args.args}
    _block(definition.body, parameters, is_where, bind)


def _block(body: list, parameters: set, is_where, bind) -> None:
    for position, statement in enumerate(body):
        if isinstance(statement, gast.If):  # (the only blocks releases are put in)
            _block(statement.body, parameters, is_where, bind)
            _block(statement.orelse, parameters, is_where, bind)
            continue
        dying = _released(body[position + 1]) if position + 1 < len(body) else set()
        call = _masked_call(statement, is_where)
        if call is None:
            continue
        arrays = [a.id if isinstance(a, gast.Name) else None for a in call.args[1:]]
        dead = [name in dying and name not in parameters for name in arrays]
        if not any(dead):
            continue
        call.func = gast.Name(
            bind(where_into_dead, "where_into_dead"), gast.Load(), None, None
        )
        if None not in arrays:  # two arrays: the one no longer read is written
            call.args.append(gast.Constant(dead.index(True), None))


def _masked_call(statement, is_where):
    """The ``where(c, a, b)`` call ``statement`` assigns to one name, ``a`` and
    ``b`` two names, or a name and a number, or None."""
    if not (
        isinstance(statement, gast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], gast.Name)
    ):
        return None
    call = statement.value
    if not (
        isinstance(call, gast.Call)
        and isinstance(call.func, gast.Name)
        and is_where(call.func.id)
        and len(call.args) == 3
        and not call.keywords
    ):
        return None
    kinds = {type(a) for a in call.args[1:]}
    if kinds not in ({gast.Name, gast.Constant}, {gast.Name}):
        return None
    target = statement.targets[0].id
    if any(isinstance(a, gast.Name) and a.id == target for a in call.args):
        return None
    return call


def _released(statement) -> set:
    """The names ``statement`` releases (``a = b = None``), else none."""
    if not (
        isinstance(statement, gast.Assign)
        and isinstance(statement.value, gast.Constant)
        and statement.value.value is None
    ):
        return set()
    return {t.id for t in statement.targets if isinstance(t, gast.Name)}
