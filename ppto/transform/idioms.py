"""Idioms rewritten before differentiation, so that the backward pass is the one a
person writes.

A sort of a differentiated value becomes the permutation that sorts it and a
gather along it (``order = argsort(x); y = take_along_axis(x, order)``): the
gradient scatters back along the permutation the forward pass made, where the sort's
own rule would sort x again in the backward pass to find it.

Shifted-softmax idioms: a maximum subtracted only so that ``exp`` cannot overflow
gets no gradient.

With ``m = max(x, axis, keepdims=True)`` and ``s = sum(exp(x - m), axis)``, the
values ``log(s) + m`` (logsumexp), ``(x - m) - log(s)`` (log-softmax) and
``exp(x - m) / s`` (softmax) do not depend on ``m`` at all: their derivative through
``m`` is exactly zero. Differentiating it anyway costs passes over ``x`` (the
maximum's mask, a sum of the adjoint) to add rounding noise. Where ``m`` and every
intermediate are used only inside such a pattern, ``m`` is wrapped in
``stop_gradient``, so the backward pass is the one a person writes (the softmax from
the saved exponentials). A value used outside the pattern keeps its gradient.
"""

from __future__ import annotations

from ppto.ops import elementwise as ew
from ppto.ops import reductions
from ppto.transform import ir
from ppto.transform.analyze import literal
from ppto.transform.trees import clone


def stop_shift_gradients(body: list, namer) -> list:
    """``body`` with the maximum of every shifted-softmax idiom under
    ``stop_gradient`` (see the module docstring)."""
    uses: dict[str, int] = {}
    _count_uses(body, uses)
    return _block(body, uses, namer)


def sort_by_permutation(body: list, namer) -> list:
    """``body`` with each sort (of a differentiated value: others are passive
    statements, not ``Apply``) as its permutation and a gather (module docstring)."""
    from ppto.ops.arrange import argsort, sort
    from ppto.ops.indexing import take_along_axis

    out = []
    for statement in body:
        for block in ir.blocks(statement):
            block[:] = sort_by_permutation(block, namer)
        if not _is(statement, sort):
            out.append(statement)
            continue
        order = namer.fresh("order")
        params = statement.params
        out.append(
            ir.Apply(
                order,
                argsort,
                list(statement.inputs),
                {key: clone(value) for key, value in params.items()},
                given=statement.given,
                origin=statement.origin,
            )
        )
        out.append(
            ir.Apply(
                statement.target,
                take_along_axis,
                [statement.inputs[0], order],
                {"axis": clone(params["axis"])},
                given=tuple(name for name in statement.given if name == "axis"),
                origin=statement.origin,
            )
        )
    return out


def _count_uses(body: list, uses: dict) -> None:
    for statement in body:
        for name in ir.reads(statement):
            uses[name] = uses.get(name, 0) + 1
        for block in ir.blocks(statement):
            _count_uses(block, uses)


def _block(body: list, uses: dict, namer) -> list:
    for statement in body:
        if isinstance(statement, ir.If):
            statement.body = _block(statement.body, uses, namer)
            statement.orelse = _block(statement.orelse, uses, namer)
        elif isinstance(statement, ir.LOOPS):
            statement.body = _block(statement.body, uses, namer)
    definitions = {
        s.target: s for s in body if isinstance(s, ir.Apply) and s.op is not None
    }
    out = []
    for statement in body:
        shifts = _shifts(statement, definitions, uses)
        if not shifts:
            out.append(statement)
            continue
        maximum = statement.target
        statement.target = namer.fresh(maximum)
        stopped = ir.Apply(
            maximum, ew.stop_gradient, [statement.target], {}, origin=statement.origin
        )
        out.extend([statement, stopped])
    return out


def _shifts(statement, definitions: dict, uses: dict) -> bool:
    """Whether ``statement`` is ``m = max(x, axis, keepdims=True)`` whose every use is
    the shift of a pattern in the module docstring."""
    if (
        not _is(statement, reductions.reduce_max)
        or _param(statement, "keepdims") is not True
    ):
        return False
    x, maximum = statement.inputs[0], statement.target
    axis = _param(statement, "axis")
    readers = _readers(definitions)
    shifted = [
        d
        for d in readers.get(maximum, [])
        if _is(d, ew.sub) and d.inputs == [x, maximum]
    ]
    if len(shifted) != 1 or not isinstance(x, str):
        return False
    d = shifted[0].target
    exps = [e for e in readers.get(d, []) if _is(e, ew.exp)]
    if len(exps) != 1:
        return False
    e = exps[0].target
    sums = [
        s
        for s in readers.get(e, [])
        if _is(s, reductions.reduce_sum) and _param(s, "axis") == axis
    ]
    if len(sums) != 1:
        return False
    s = sums[0]
    inside = {d: 1, e: 1, s.target: 1}
    keepdims = _param(s, "keepdims")
    logs = [lg for lg in readers.get(s.target, []) if _is(lg, ew.log)]
    if keepdims is True:
        quotients = [
            q
            for q in readers.get(e, [])
            if _is(q, ew.div) and q.inputs == [e, s.target]
        ]
        if quotients and not logs:  # softmax: exp(x - m) / sum(exp(x - m))
            inside.update({e: 2, s.target: 1})
            return _only_inside(inside, uses, maximum, 1)
    if len(logs) != 1:
        return False
    log = logs[0].target
    inside[log] = 1
    after = readers.get(log, [])
    if keepdims is True and any(_is(r, ew.sub) and r.inputs == [d, log] for r in after):
        inside[d] = 2  # log-softmax: (x - m) - log(sum(exp(x - m)))
        return _only_inside(inside, uses, maximum, 1)
    if keepdims is True and any(
        _is(r, ew.add) and set(r.inputs) == {log, maximum} for r in after
    ):
        return _only_inside(inside, uses, maximum, 2)  # logsumexp: log(...) + m
    return False


def _only_inside(inside: dict, uses: dict, maximum: str, maximum_uses: int) -> bool:
    if uses.get(maximum) != maximum_uses:
        return False
    return all(uses.get(name) == count for name, count in inside.items())


def _readers(definitions: dict) -> dict:
    found: dict = {}
    for statement in definitions.values():
        for operand in statement.inputs:
            if isinstance(operand, str):
                found.setdefault(operand, []).append(statement)
    return found


def _is(statement, op) -> bool:
    return isinstance(statement, ir.Apply) and statement.op is op


def _param(statement: ir.Apply, name: str):
    value = statement.params.get(name)
    return None if value is None else literal(value)
