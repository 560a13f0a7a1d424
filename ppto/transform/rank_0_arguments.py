"""A function of the user's given a rank-0 value that may be a 0-d array: its
``p += v`` writes into that array where NumPy gives it one (``np.array(0.5)``), and
rebinds ``p`` where it is a number (``0.5``, ``float(v)``, ``x[0]``, ``np.sum(x)``).
The generated code gives every assignment a new value, so a call is refused where
the caller may read the array again after the helper changed it (through any name
for it, or a view of it); a number, or an array never read again, is fine.
"""

from __future__ import annotations

import itertools

import gast

from ppto.transform import ir
from ppto.transform.analyze import indexes_every_axis, number_conversion


def maybe_zero_d(given: dict, ranks: dict, activity) -> dict:
    """Of the parameters ``given`` their operands, those of rank 0 that may be 0-d
    arrays (not numbers for sure) -> None, for ``aliases.check`` to put the first
    statement that may write into one."""
    return {
        parameter: None
        for parameter, operand in given.items()
        if ranks[parameter] == 0 and not _number(operand, activity)
    }


def refuse_write_read_again(
    call, given, written, ir_body, activity, parameters, source
):
    """Refuse ``call`` where the function it calls may write into a rank-0
    argument (``written``: parameter -> the statement, None where it writes
    into none) that the caller may read again: NumPy's caller would see the
    change, the generated code gives it a new value. ``parameters``: the
    caller's (with the names its body binds, those a view could be bound to)."""
    local = None
    for parameter, write in written.items():
        if write is None:
            continue
        if local is None:  # (only where a helper writes into one: most never do)
            local = ir.all_writes(ir_body) | set(parameters)
        names = _objects(call, given[parameter], ir_body, activity, local)
        if names and _read_again(call, names, ir_body):
            callee = call.function
            line, _ = callee.source.position(write)
            raise source.error(
                call.origin,
                f"{callee.name} may change the argument it is given for "
                f"{parameter} in place ({callee.source.statement_text(write)}, "
                f"line {line}), which is read again here: given a 0-d array, "
                "NumPy's change reaches the caller's value, but ppto's generated "
                "code gives each assignment a new value",
                f"make a new value in {callee.name} ({parameter} = {parameter} + "
                f"... instead of +=, and return it), or pass it a number: a copy "
                f"made by arithmetic (value * 1.0 is a NumPy scalar)",
            )


def _number(operand, activity) -> bool:
    """Whether ``operand``, 0-d, is a number for sure (a literal, a reduction's
    result: see ``makes_a_number``), never a 0-d array; written verbatim (it
    needs no derivative) too: a name holding a number, a conversion
    (``float(c)``), arithmetic (NumPy's operators make numbers of 0-d arrays), an
    element (``m[0, 1]``)."""
    if isinstance(operand, ir.Const):
        return type(operand.value) in (int, float, bool)
    if isinstance(operand, ir.Verbatim):
        return _number_expression(operand.expr, activity)
    return isinstance(operand, str) and activity.number(operand)


def _number_expression(expr, activity) -> bool:
    if isinstance(expr, gast.Name):
        return activity.number(expr.id)
    if isinstance(expr, gast.Constant):
        return type(expr.value) in (int, float, bool)
    if isinstance(expr, (gast.BinOp, gast.UnaryOp)):
        return True
    if number_conversion(expr) is not None:
        return True
    if isinstance(expr, gast.Subscript) and isinstance(expr.value, gast.Name):
        rank = activity.ranks.get(expr.value.id)
        return indexes_every_axis(rank, expr.slice, activity.ranks)
    return False


def _objects(call, operand, body: list, activity, local: set) -> set:
    """The names that may hold ``operand``'s object, or a view of it or an array
    it views, when ``call`` runs: the name given (``z``, ``z[...]``'s z) and,
    linked by the statements before the call, those bound to it or to a view of
    it (``kept = z``, ``c = z[...]``), or it to them (``c_1 = c`` before a loop)."""
    if isinstance(operand, str):
        names = {operand}
    elif isinstance(operand, ir.Verbatim):
        names = set(operand.reads) & local
    else:
        return set()
    before = list(itertools.takewhile(lambda s: s is not call, ir.walk(body)))
    links = [_linked(s, activity, local) for s in before]
    grown = True
    while grown:
        grown = False
        for linked in links:
            if linked & names and not linked <= names:
                names |= linked
                grown = True
    return names


def _linked(statement, activity, local: set) -> set:
    """The names ``statement`` may leave holding one object or views of one
    another: what it binds and what it reads, unless what it binds is surely
    new (an elementwise operator's result, a number)."""
    if ir.blocks(statement):  # (a compound statement: its own are linked apart)
        return set()
    bound = set(ir.writes(statement))
    if not bound or all(activity.number(name) for name in bound):
        return set()
    if isinstance(statement, ir.Apply):
        if statement.target in activity.fresh:
            return set()
        return bound | set().union(*map(ir.operand_names, statement.inputs)) & local
    return bound | (ir.reads(statement) & local)


def _read_again(call, names: set, body: list) -> bool:
    """Whether any of ``names`` (one object, as ``call`` is given it) may be read
    after ``call``: in the statements after it in its block until all those names
    are bound anew (``c = step(c)``: no), else after the statements it is in (not
    in another branch of an ``if``), or in a loop around it (its next turn,
    ``call`` itself included)."""
    path = _path_to(call, body)
    block, at = path[-1]
    names = set(names)
    for statement in block[at:]:
        if statement is not call and any(
            names & ir.reads(s) for s in ir.walk([statement])
        ):
            return True
        bound = set(ir.all_writes([statement]))
        if isinstance(statement, ir.Copy) and statement.source in names:
            bound.discard(statement.target)
            names.add(statement.target)
        if not ir.blocks(statement):  # (a branch's binding may not happen)
            names -= bound
        if not names:
            return False
    later = [s for outer, n in path[:-1] for s in ir.walk(outer[n + 1 :])]
    around = [
        s
        for outer, n in path[:-1]
        if isinstance(outer[n], ir.LOOPS)
        for s in [outer[n], *ir.walk(outer[n].body)]
    ]
    return any(names & ir.reads(s) for s in later + around)


def _path_to(call, body: list) -> list:
    """The ``(block, position)`` pairs from ``body`` down to ``call``: each
    block's statement holding the next, the last ``call`` itself."""
    for position, statement in enumerate(body):
        if statement is call:
            return [(body, position)]
        for block in ir.blocks(statement):
            inner = _path_to(call, block)
            if inner:
                return [(body, position), *inner]
    return []
