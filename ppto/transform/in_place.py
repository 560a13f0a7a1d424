"""Augmented assignments keep their target's dtype, as NumPy's in-place operators do.

``t += v`` writes into the array t, casting back to its dtype (float32 stays float32
whatever v is); normalization writes it ``t_wide = t + v`` then ``t_1 =
cast_in_place(t_wide, target=t)``, and ``x[i] += v`` casts ``x[i] + v`` so, before
the subscript write (which converts it to x's dtype anyway: there the cast only
checks). Once the analysis knows the dtypes, ``settle`` removes each cast that
changes nothing (the dtypes agree, or t is a number made by the code, which ``+=``
rebinds; a subscript's always), so that generated code shows one only where it matters;
refuses at the user's line what NumPy refuses in place (floats into an integer
array, an array broadcast to another shape); and gives a cast that may be refused
when it runs the user's file and line to name (a subscript write, which checks
``x[i] += v`` itself where x's dtype is not known here). Casts in generated code
differentiated again are left as they are.
"""

from __future__ import annotations

import os

import gast

from ppto.errors import DTypeError, ShapeError
from ppto.ops.shape import IN_PLACE_ADVICE, in_place_refusal
from ppto.transform import ir
from ppto.transform.analyze import Activity, expression_dtype, expression_rank


def settle(body: list, activity: Activity, source) -> bool:
    """Remove the casts of ``body``'s augmented assignments that change nothing,
    refuse those NumPy refuses and locate those a run may refuse (see the module
    doc). Returns whether the caller must analyze the body again: a cast removed
    whose result the analysis knew otherwise than the sum (see ``_takes_over``)."""
    stale = False
    for block in list(_blocks(body)):
        position = 0
        while position < len(block):
            statement = block[position]
            # (only the casts of augmented assignments: one in generated code
            # differentiated again has a value the backward code reads as well)
            if isinstance(statement, ir.Apply) and statement.augmented:
                if _changes_nothing(statement, activity, source):
                    if statement.augmented == "check" and _may_be_refused(
                        statement, activity
                    ):
                        _check_in_the_write(block, position, source)
                    lost, retargeted = _remove(block, position)
                    stale |= not (retargeted and _takes_over(statement, activity))
                    position -= lost
                elif _may_be_refused(statement, activity):
                    _name_the_line(statement, source)
            position += 1
    return stale


def _takes_over(cast: ir.Apply, activity: Activity) -> bool:
    """Whether the sum, written into the cast's target once the cast is removed,
    has what the analysis knows of the target (its shape, rank and dtype: the
    other facts follow from the cast's one differentiated input), made so; else
    the analysis must run again."""
    value, target = cast.inputs[0], cast.target
    if cast in activity.blocked:
        return False
    shapes, ranks, dtypes = activity.shapes, activity.ranks, activity.dtypes
    if shapes.get(value) is None or shapes[value] != shapes.get(target):
        return False
    if ranks.get(value) != ranks.get(target):
        return False
    value_dtype, target_dtype = dtypes.get(value), dtypes.get(target)
    if (value_dtype is None) != (target_dtype is None) or value_dtype != target_dtype:
        return False  # (None apart: NumPy reads it as float64, equal to that)
    # (an elementwise sum makes a new array, the cast not: see Activity.fresh)
    for made in (activity.made_new, activity.made_otherwise):
        if value in made:
            made.add(target)
        else:
            made.discard(target)
    return True


def _blocks(body: list):
    yield body
    for statement in ir.walk(body):
        yield from ir.blocks(statement)


def _dtypes(statement: ir.Apply, activity: Activity) -> tuple:
    """(the value's dtype, the target's, the target's rank), None where unknown."""
    value, target = statement.inputs[0], statement.params["target"]
    if isinstance(value, ir.Verbatim):  # (k[1:] * 1.5, k not differentiated)
        value_dtype = expression_dtype(value.expr, activity.dtypes)
    else:
        value_dtype = activity.dtypes.get(value) if isinstance(value, str) else None
    if isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name):
        # x[i] written out (x is not differentiated): x's dtype
        base = target.value.id
        rank = expression_rank(target, activity.ranks)
        if rank is None and _sliced(target):
            rank = 1  # (at least: a slice of an array is an array, never a number)
        return value_dtype, activity.dtypes.get(base), rank
    name = getattr(target, "id", None)
    return value_dtype, activity.dtypes.get(name), activity.ranks.get(name)


def _sliced(target: gast.Subscript) -> bool:
    """Whether the index of ``target`` has a slice (``k[1:]``, ``m[0, :]``)."""
    index = target.slice
    parts = index.elts if isinstance(index, gast.Tuple) else [index]
    return any(isinstance(part, gast.Slice) for part in parts)


def _changes_nothing(statement: ir.Apply, activity: Activity, source) -> bool:
    value_dtype, target_dtype, rank = _dtypes(statement, activity)
    known = value_dtype is not None and target_dtype is not None
    refusal = in_place_refusal(value_dtype, target_dtype) if known else None
    where = statement.origin if statement.origin is not None else statement
    if refusal is not None and rank is not None and rank > 0:  # into an array
        raise DTypeError(str(source.error(where, refusal, IN_PLACE_ADVICE)))
    broadened = _broadened(statement, activity)
    if broadened is not None:
        raise ShapeError(str(source.error(where, broadened, "t = t + v")))
    if statement.augmented == "check":
        # the subscript write converts the value to x's dtype: the cast would only
        # check it, and is not kept (what the analysis cannot tell, floats written
        # into a slice of an integer array made of unknown values, the write
        # checks when it runs: see _check_in_the_write; a cast kept would tape
        # its value for every buffer filled in a loop)
        return True
    # rank 0: a number, which += rebinds (the cast gives the sum itself), or a 0-d
    # array, which it writes into: the cast stays even where the dtypes agree, as
    # the sum is a number (a later t += v would rebind it, v's dtype taking over);
    # so too where the rank is not known, unless t is a number wherever 0-d
    number = activity.number(getattr(statement.params["target"], "id", None))
    if rank == 0 or (rank is None and not number):
        return number
    return known and value_dtype == target_dtype


def _broadened(statement: ir.Apply, activity: Activity) -> str | None:
    """Why NumPy refuses ``t += v`` where v broadcasts the array t to another
    shape (it writes into t), if the shapes show it; else None."""
    value, target = statement.inputs[0], statement.params["target"]
    shapes = activity.shapes
    value_shape = shapes.get(value) if isinstance(value, str) else None
    target_shape = shapes.get(getattr(target, "id", None))
    if statement.augmented == "check" or not target_shape or value_shape is None:
        return None  # (a number, or x[i], which the subscript write checks)
    if tuple(value_shape) == tuple(target_shape):
        return None
    return (
        f"an in-place operator (+=, -=, *=, /=, ...) cannot broadcast an array of "
        f"shape {tuple(target_shape)} to {tuple(value_shape)}: NumPy refuses it"
    )


def _floating(dtype) -> bool:
    return dtype is not None and dtype.kind == "f"


def _may_be_refused(statement: ir.Apply, activity: Activity) -> bool:
    """Whether the cast may be one NumPy refuses, which only a run tells: into an
    array of whole numbers or of a dtype not known here (a float array takes any
    float: ppto has no complex numbers)."""
    value_dtype, target_dtype, _ = _dtypes(statement, activity)
    if target_dtype is None:
        return True
    if value_dtype is None:
        return not _floating(target_dtype)
    return in_place_refusal(value_dtype, target_dtype) is not None


def _check_in_the_write(block: list, position: int, source) -> None:
    """Have the subscript write after the check at ``position`` (``x[i] += v``,
    x's dtype not known here) check what the cast would have, when it runs: it
    has the value in hand, so nothing is kept for it (see ops.indexing.setitem)."""
    cast = block[position]
    for statement in block[position + 1 :]:
        if (
            isinstance(statement, ir.Apply)
            and statement.op.name == "setitem"
            and cast.target in statement.inputs
        ):
            _name_the_line(statement, source, cast.origin)
            return


def _name_the_line(statement: ir.Apply, source, origin=None) -> None:
    """Give the cast (or the subscript write) the user's file and line, for the
    error it may raise when it runs (generated code's own lines are not the
    user's); ``origin``: the statement whose line that is, if not its own."""
    line, _ = source.position(origin or statement.origin)
    at = f"{os.path.basename(source.filename)}, line {line}"
    statement.params["at"] = gast.Constant(at, None)
    statement.given = (*statement.given, "at")


def _remove(block: list, position: int) -> tuple:
    """Remove the cast at ``position``: the statement computing its value (just
    before it) writes the cast's target instead; a value written out (read by
    nothing differentiated) goes where the cast's target is read (the subscript
    write just after it); else a copy replaces the cast. Returns how many
    statements the block lost before ``position``'s next one, and whether the
    statement before writes the cast's target now."""
    cast = block[position]
    value, target = cast.inputs[0], cast.target
    before = block[position - 1] if position > 0 else None
    after = block[position + 1] if position + 1 < len(block) else None
    if (
        isinstance(value, str)
        and before is not None
        and _retarget(before, value, target)
    ):
        del block[position]
        return 1, True
    if not isinstance(value, str) and isinstance(after, ir.Apply):
        if target in after.inputs:
            after.inputs = [value if x == target else x for x in after.inputs]
            del block[position]
            return 1, False
    block[position] = ir.Copy(target, value, origin=cast.origin)
    return 0, False


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
