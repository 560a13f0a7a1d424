"""Augmented assignments keep their target's dtype, as NumPy's in-place operators do.

``t += v`` writes into the array t, casting back to its dtype (float32 stays float32
whatever v is); normalization writes it ``t2 = t + v`` then ``t_1 =
cast_in_place(t2, target=t)``. Once the analysis knows the dtypes, ``settle``
removes each cast that changes nothing (the dtypes agree, or t is a number, which
``+=`` rebinds), so that generated code shows one only where it matters, and
refuses at the user's line a cast NumPy refuses (floats into an integer array), for
``x[i] += v`` too.
"""

from __future__ import annotations

from ppto.errors import DTypeError
from ppto.ops.shape import IN_PLACE_ADVICE, cast_in_place, in_place_refusal
from ppto.transform import ir
from ppto.transform.analyze import Activity, index_rank


def settle(body: list, activity: Activity, source) -> bool:
    """Remove the casts of ``body``'s augmented assignments that change nothing and
    refuse those NumPy refuses (see the module doc). Returns whether any was
    removed: the caller analyzes the body again."""
    removed = False
    for block in list(_blocks(body)):
        position = 0
        while position < len(block):
            statement = block[position]
            if isinstance(statement, ir.Apply) and statement.op is cast_in_place:
                if _changes_nothing(statement, activity, source):
                    position -= _remove(block, position)
                    removed = True
            elif isinstance(statement, ir.Apply) and statement.in_place:
                _check_subscript_write(statement, activity, source)
            position += 1
    return removed


def _blocks(body: list):
    yield body
    for statement in ir.walk(body):
        yield from ir.blocks(statement)


def _changes_nothing(statement: ir.Apply, activity: Activity, source) -> bool:
    value = statement.inputs[0]
    target = getattr(statement.params["target"], "id", None)
    value_dtype = activity.dtypes.get(value) if isinstance(value, str) else None
    target_dtype = activity.dtypes.get(target)
    target_rank = activity.ranks.get(target)
    if value_dtype is not None and target_dtype is not None:
        if value_dtype == target_dtype:
            return True
        if target_rank is not None and target_rank > 0:  # an array (numbers: 0-d)
            _refuse(value_dtype, target_dtype, statement, source)
        return False
    # a number (Python's, or NumPy's from a reduction): += rebinds it. (An array
    # has a known dtype, the arguments' and what operators make of them, but for
    # an explicit 0-d array made of unknown values.)
    return target_dtype is None and target_rank == 0


def _check_subscript_write(statement: ir.Apply, activity: Activity, source) -> None:
    """``x[i] += v`` writes into the part x[i] where it is an array (a slice), which
    NumPy refuses for a value of another kind; an element (x[0] of a vector) is
    a number, replaced by the sum, which the write converts."""
    base, value = statement.inputs[:2]
    dtypes, ranks = activity.dtypes, activity.ranks
    if not (isinstance(base, str) and isinstance(value, str)):
        return
    if dtypes.get(base) is None or dtypes.get(value) is None:
        return
    rank = ranks.get(base)
    part = None if rank is None else index_rank(rank, statement.params["index"], ranks)
    if part is not None and part > 0:
        _refuse(dtypes[value], dtypes[base], statement, source)


def _refuse(value_dtype, target_dtype, statement: ir.Apply, source) -> None:
    refusal = in_place_refusal(value_dtype, target_dtype)
    if refusal is not None:
        where = statement.origin if statement.origin is not None else statement
        raise DTypeError(str(source.error(where, refusal, IN_PLACE_ADVICE)))


def _remove(block: list, position: int) -> int:
    """Remove the cast at ``position``: the statement computing its value (just
    before it) writes the cast's target instead, else a copy replaces the cast.
    Returns how many statements the block lost before ``position``'s next one."""
    cast = block[position]
    value, target = cast.inputs[0], cast.target
    before = block[position - 1] if position > 0 else None
    if (
        isinstance(value, str)
        and before is not None
        and _retarget(before, value, target)
    ):
        del block[position]
        return 1
    block[position] = ir.Copy(target, value, origin=cast.origin)
    return 0


def _retarget(statement, old: str, new: str) -> bool:
    """Make ``statement``, which writes ``old`` only, write ``new`` instead."""
    if tuple(ir.writes(statement)) != (old,):
        return False
    if type(statement) is ir.Passive:
        assigned = getattr(statement.node, "targets", [])
        if len(assigned) != 1 or getattr(assigned[0], "id", None) != old:
            return False
        assigned[0].id = new
        statement.targets = (new,)
        return True
    if isinstance(statement, ir.CallFunction):
        statement.targets = [new]
        return True
    if hasattr(statement, "target"):
        statement.target = new
        return True
    return False
