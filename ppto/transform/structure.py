"""Structural rewrites before renaming: a single exit, conditional expressions as
statements, and nested unpacking in steps.

``return`` in the middle of a function becomes an assignment to the result variable,
with the statements after an ``if`` that may return moved into its branches (so every
path ends by assigning the result once). ``a if c else b`` inside a statement becomes
an ``if`` statement assigning a temporary just before it. ``(a, b), c = v`` becomes
``a_b, c = v`` then ``a, b = a_b``; a tuple of targets with a subscript among
them, ``Y[0], Y[1] = Y[1] * 2.0, Y[0]``, becomes ``Y_0, Y_1 = ...`` (the value
evaluated whole first) then each target assigned its item in order, ``Y[0] = Y_0``
and ``Y[1] = Y_1``, as Python does.
"""

from __future__ import annotations

import gast

from ppto.transform import aliases, trees
from ppto.transform.names import Namer
from ppto.transform.trees import called, clone, paired, stores


def single_exit(body: list, result: str) -> list:
    """``body`` with every ``return v`` turned into ``result = v`` (see module doc)."""
    return until_exit(
        body,
        gast.Return,
        lambda node: [_assign(result, node.value or gast.Constant(None, None), node)],
    )


def until_exit(body: list, kind, replace) -> list:
    """``body`` with each ``kind`` statement (``Return`` or ``Continue``) replaced by
    ``replace(statement)`` (a list) and nothing after it: the statements after an
    ``if`` that may exit move into both of its branches."""
    out = []
    for position, statement in enumerate(body):
        if isinstance(statement, kind):
            return out + replace(statement)
        if isinstance(statement, gast.If) and _exits(statement, kind):
            rest = body[position + 1 :]
            statement.body = until_exit(statement.body + rest, kind, replace)
            # a copy: renaming (ssa.py) changes names in place, and a name read in
            # the rest may be another binding on each path
            statement.orelse = until_exit(statement.orelse + clone(rest), kind, replace)
            return out + [statement]
        out.append(statement)
    return out


def _exits(node, kind) -> bool:
    """Whether ``node`` holds a ``kind`` statement: a return anywhere, a continue
    outside nested loops (those belong to the inner loop)."""
    if kind is gast.Return:
        return any(isinstance(child, gast.Return) for child in trees.walk(node))
    return _contains(node, kind)


def _assign(name: str, value, origin) -> gast.Assign:
    assign = gast.Assign(
        targets=[gast.Name(name, gast.Store(), None, None)],
        value=value,
        type_comment=None,
    )
    return gast.copy_location(assign, origin)


class _LiftConditionals(trees.Transformer):
    """Replaces each IfExp of one statement by a temporary, collecting the ifs."""

    def __init__(self, namer: Namer, origin) -> None:
        self.namer = namer
        self.origin = origin
        self.lifted: list = []

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        name = self.namer.temporary()
        # what each branch lifts runs in that branch only, as Python evaluates it
        body, body_value = self.branch(node.body)
        orelse, orelse_value = self.branch(node.orelse)
        branch = gast.If(
            test=node.test,
            body=body + [_assign(name, body_value, self.origin)],
            orelse=orelse + [_assign(name, orelse_value, self.origin)],
        )
        self.lifted.append(gast.copy_location(branch, self.origin))
        return gast.Name(name, gast.Load(), None, None)

    def branch(self, node) -> tuple[list, object]:
        """The statements ``node`` lifts, and what is left of it."""
        inner = _LiftConditionals(self.namer, self.origin)
        value = inner.visit(node)
        return inner.lifted, value

    def visit_BoolOp(self, node):
        """``a and b`` whose operands are values, not truth tests (``x[0] and
        x[1]``): an if statement, so that the operand chosen carries its derivative
        (as a test it carried none: a zero gradient). ``a`` is evaluated once, ``b``
        only where Python does."""
        if _truth_test(node):
            self.generic_visit(node)
            return node
        name = self.namer.temporary()
        held = gast.Name(name, gast.Load(), None, None)
        self.lifted.append(_assign(name, self.visit(node.values[0]), self.origin))
        for value in node.values[1:]:
            test = held if isinstance(node.op, gast.And) else _negated(held)
            lifted, value = self.branch(value)
            body = lifted + [_assign(name, value, self.origin)]
            self.lifted.append(gast.copy_location(gast.If(test, body, []), self.origin))
        return gast.Name(name, gast.Load(), None, None)


def _truth_test(node) -> bool:
    """A comparison, ``not``, a constant, or ``and`` / ``or`` of those: a value that
    is True or False, with no derivative."""
    if isinstance(node, gast.BoolOp):
        return all(_truth_test(value) for value in node.values)
    return isinstance(node, (gast.Compare, gast.Constant)) or (
        isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not)
    )


def _negated(node):
    return gast.UnaryOp(gast.Not(), gast.Name(node.id, gast.Load(), None, None))


def lift_conditionals(body: list, namer: Namer) -> list:
    """Turn conditional expressions into if statements (see the module docstring)."""
    out = []
    for statement in body:
        if isinstance(statement, gast.If):
            lifter = _LiftConditionals(namer, statement)
            statement.test = lifter.visit(statement.test)
            statement.body = lift_conditionals(statement.body, namer)
            statement.orelse = lift_conditionals(statement.orelse, namer)
            out.extend(lifter.lifted)
            out.append(statement)
        elif isinstance(statement, (gast.For, gast.While)):
            lifter = _LiftConditionals(namer, statement)
            if isinstance(statement, gast.For):
                statement.iter = lifter.visit(statement.iter)
            statement.body = lift_conditionals(statement.body, namer)
            out.extend(lifter.lifted)
            out.append(statement)
        else:
            lifter = _LiftConditionals(namer, statement)
            rewritten = lifter.visit(statement)
            out.extend(lifter.lifted)
            out.append(rewritten)
    return out


def _name(identifier: str):
    return gast.Name(identifier, gast.Load(), None, None)


def _call(function: str, *arguments):
    return gast.Call(_name(function), list(arguments), [])


def _contains(node, kinds) -> bool:
    """Whether ``node`` contains one of ``kinds`` outside nested loops."""
    for child in gast.iter_child_nodes(node):
        if isinstance(child, kinds):
            return True
        if isinstance(child, (gast.For, gast.While)):
            continue
        if _contains(child, kinds):
            return True
    return False


def _else_after(body: list, namer: Namer) -> list:
    """``body`` with each loop's ``else`` written after it: ``for ...: ... else: E``
    becomes ``broke = False``, the loop with ``broke = True`` before each of its
    breaks, then ``if not broke: E`` (just ``E`` for a loop without one)."""
    out = []
    for statement in body:
        if not (isinstance(statement, (gast.For, gast.While)) and statement.orelse):
            out.append(statement)
            continue
        orelse, statement.orelse = statement.orelse, []
        flag = namer.fresh("broke")
        statement.body, broke = _flag_breaks(statement.body, flag)
        if not broke:
            out += [statement] + orelse
            continue
        unset = _assign(flag, gast.Constant(False, None), statement)
        test = gast.UnaryOp(gast.Not(), _name(flag))
        out += [
            unset,
            statement,
            gast.copy_location(gast.If(test, orelse, []), statement),
        ]
    return out


def _flag_breaks(body: list, flag: str) -> tuple[list, bool]:
    """``body`` with ``flag = True`` before each ``break`` of this loop (not of the
    loops inside it, though those of their ``else`` are its), and whether any."""
    out, found = [], False
    for statement in body:
        if isinstance(statement, gast.Break):
            out += [_assign(flag, gast.Constant(True, None), statement), statement]
            found = True
            continue
        fields = ("orelse",) if isinstance(statement, (gast.For, gast.While)) else (
            "body", "orelse")  # fmt: skip
        for field in fields:
            if isinstance(getattr(statement, field, None), list):
                inner, inner_found = _flag_breaks(getattr(statement, field), flag)
                setattr(statement, field, inner)
                found = found or inner_found
        out.append(statement)
    return out, found


def _drop_continue(body: list) -> list:
    """A loop body with ``continue`` replaced by skipping the rest of the iteration."""
    return until_exit(body, gast.Continue, lambda _: [])


def _lift_break(body: list, flag: str, origin) -> list:
    """A loop body whose ``break`` sets ``flag`` and skips the rest of the iteration;
    the caller adds ``if flag: break`` at the end."""
    out = []
    for position, statement in enumerate(body):
        if isinstance(statement, gast.Break):
            out.append(_assign(flag, gast.Constant(True, None), statement))
            return out
        if isinstance(statement, gast.If) and _contains(statement, gast.Break):
            rest = body[position + 1 :]
            statement.body = _lift_break(statement.body + rest, flag, origin)
            # a copy, as in until_exit: renaming changes names in place
            statement.orelse = _lift_break(statement.orelse + clone(rest), flag, origin)
            out.append(statement)
            return out
        out.append(statement)
    return out


def loops(
    body: list,
    namer: Namer,
    source,
    ranges: set | None = None,
    sequences: set | None = None,
    tuples: set | None = None,
    keyed: set = frozenset(),
) -> list:
    """Loops in the one form later stages handle: ``for`` over a variable holding a
    range or sequence of indices, no ``continue``, and ``break`` only as the last
    statement ``if <flag>: break``. ``ranges`` collects variables known to hold
    ranges (generated code loops over them), ``sequences`` variables known to hold
    something else (the parameters, and names bound to other values); ``tuples``
    variables bound to a tuple written out, on every path; ``keyed`` variables
    that may hold a dict (until rebound), iterated as ``list(d)``, its keys; a
    loop's ``else`` runs after it where no ``break`` was taken (see
    ``_else_after``)."""
    ranges = set() if ranges is None else ranges
    sequences = set() if sequences is None else sequences
    tuples = set() if tuples is None else tuples
    keyed = set(keyed)
    out = []
    for statement in _else_after(body, namer):
        if not isinstance(statement, gast.For):  # (a for loop's, after its iter)
            keyed -= stores(statement)  # (rebound: no longer the dict it was given)
        for name, value in _bound(statement):
            ranges.discard(name)  # (a name that held a range may be rebound)
            sequences.discard(name)
            tuples.discard(name)
            if value is not None:  # (None: unknown, as a part of what is unpacked)
                (ranges if _range_like(value, ranges) else sequences).add(name)
            if isinstance(value, gast.Tuple):
                tuples.add(name)
        if isinstance(statement, gast.If):  # a tuple after it if one after both
            in_body, in_orelse = set(tuples), set(tuples)
            statement.body = loops(
                statement.body, namer, source, ranges, sequences, in_body, keyed
            )
            statement.orelse = loops(
                statement.orelse, namer, source, ranges, sequences, in_orelse, keyed
            )
            tuples.clear()
            tuples.update(in_body & in_orelse)
            out.append(statement)
            continue
        if not isinstance(statement, (gast.For, gast.While)):
            out.append(statement)
            continue
        tuples -= stores(statement)  # (a name bound inside: on the next turn)
        after = []
        inner = [
            node for node in trees.walk(statement) if isinstance(node, gast.Return)
        ]
        if inner:
            # (the loops below see breaks, and the single exit the return after)
            returned, value = namer.fresh("returned"), namer.fresh("returned_value")
            out.append(_assign(returned, gast.Constant(False, None), statement))
            # bound on every path (the loop's turns read it where they do not
            # return): a number, as a constant has no derivative
            out.append(_assign(value, gast.Constant(0.0, None), statement))
            statement.body = _returns_as_breaks(statement.body, returned, value)
            exit_ = gast.copy_location(gast.Return(_name(value)), inner[0])
            after = [
                gast.copy_location(gast.If(_name(returned), [exit_], []), statement)
            ]
        prelude = []
        if isinstance(statement, gast.For) and _is_checkpoint_call(statement.iter):
            statement.iter = statement.iter.args[
                0
            ]  # for t in ppto.checkpoint(range(n))
            statement.checkpoint = True
            _refuse_lists_read_and_changed(statement, source)
        if isinstance(statement, gast.For) and not (
            isinstance(statement.iter, gast.Name)
            and statement.iter.id in ranges
            and isinstance(statement.target, gast.Name)
        ):
            prelude, statement = _index_loop(
                statement, namer, source, ranges, sequences, tuples, keyed
            )
            ranges.update(
                t.id for s in prelude for t in s.targets if _range_like(s.value, ranges)
            )
        keyed -= stores(statement)  # (bound in the loop: on the next turn)
        statement.body = loops(
            statement.body, namer, source, ranges, sequences, tuples, keyed
        )
        tuples -= stores(statement)
        statement.body = _drop_continue(statement.body)
        if _contains(statement, gast.Break):
            flag = namer.fresh("stop")
            prelude.append(_assign(flag, gast.Constant(False, None), statement))
            statement.body = _lift_break(statement.body, flag, statement)
            statement.body.append(
                gast.copy_location(gast.If(_name(flag), [gast.Break()], []), statement)
            )
        out.extend(prelude)
        out.append(statement)
        out.extend(after)
    return out


def _returns_as_breaks(body: list, returned: str, value: str) -> list:
    """A loop body whose ``return v`` sets ``value`` and the flag ``returned`` and
    breaks out of every loop it is in (after a nested loop that may return, ``if
    returned: break``); the caller returns ``value`` after the loop if ``returned``.
    A return inside a loop is then a break, which later stages handle."""
    out = []
    for statement in body:
        if isinstance(statement, gast.Return):
            result = statement.value or gast.Constant(None, None)
            out += [
                _assign(value, result, statement),
                _assign(returned, gast.Constant(True, None), statement),
                gast.copy_location(gast.Break(), statement),
            ]
            return out  # (nothing after a return runs)
        out.append(statement)
        if not any(isinstance(node, gast.Return) for node in trees.walk(statement)):
            continue
        if isinstance(statement, gast.If):
            statement.body = _returns_as_breaks(statement.body, returned, value)
            statement.orelse = _returns_as_breaks(statement.orelse, returned, value)
        elif isinstance(statement, (gast.For, gast.While)):
            statement.body = _returns_as_breaks(statement.body, returned, value)
            stop = gast.If(_name(returned), [gast.Break()], [])
            out.append(gast.copy_location(stop, statement))
    return out


def _refuse_lists_read_and_changed(loop, source) -> None:
    """A checkpointed loop's backward pass runs each turn again from what it read
    then; a list the loop changes and reads (``hs.append(f(hs[-1]))``) has changed by
    then (appending alone is fine: the turns are recomputed, not the list)."""
    receivers = {
        id(node.func.value): node.func.value.id
        for node in trees.walk(loop)
        if isinstance(node, gast.Call)
        and isinstance(node.func, gast.Attribute)
        and isinstance(node.func.value, gast.Name)
        and node.func.attr in aliases.LIST_CHANGES
    }
    fresh = {  # (a list made anew inside each turn is the turn's own)
        target.id
        for node in trees.walk(loop)
        if isinstance(node, gast.Assign)
        for target in node.targets
        if isinstance(target, gast.Name)
    }
    changed = set(receivers.values()) - fresh
    for node in trees.walk(loop):
        if (
            isinstance(node, gast.Name)
            and isinstance(node.ctx, gast.Load)
            and node.id in changed
            and id(node) not in receivers
        ):
            raise source.error(
                node,
                f"ppto.checkpoint cannot recompute this loop: it reads the list "
                f"{node.id} it changes, which has changed again by the time the "
                "backward pass recomputes a turn",
                f"carry the value in a variable of its own (h = ...; "
                f"{node.id}.append(h)), or drop ppto.checkpoint for this loop",
            )


def _is_checkpoint_call(node) -> bool:
    function = getattr(node, "func", None)
    named = getattr(function, "attr", None) or getattr(function, "id", None)
    return isinstance(node, gast.Call) and named == "checkpoint" and len(node.args) == 1


def _bound(statement) -> list:
    """``(name, its value or None where unknown)`` for the names an assignment binds:
    ``a = b = v``, ``a, b = v, w`` pairwise, ``a: T = v``."""
    if isinstance(statement, gast.AnnAssign):
        targets = [statement.target]
    elif isinstance(statement, gast.Assign):
        targets = statement.targets
    else:
        return []
    return [
        (name, value if whole else None)
        for target in targets
        for name, value, whole in paired(target, statement.value)
    ]


def _not_a_range(reversal, ranges: set, sequences: set) -> bool:
    """Whether ``reversed(...)``'s argument is known to be no range: a list or tuple
    written out, a variable bound to something else, an expression that is not one,
    or in a user's code any variable not known to hold a range (in generated code a
    variable of unknown value is a range unpacked from a tape: see
    ``UNKNOWN_IS_SEQUENCE``)."""
    if len(reversal.args) != 1 or _range_like(reversal.args[0], ranges):
        return False
    argument = reversal.args[0]
    return (
        not isinstance(argument, gast.Name)
        or argument.id in sequences
        or UNKNOWN_IS_SEQUENCE in sequences
    )


# in ``sequences``: the code is a user's, where a variable of unknown value (bound by
# unpacking, an annotation) may be anything, so it is reversed as a sequence (right
# for a range too); ppto's own backward passes unpack the ranges they loop over from
# their tapes, so there a variable of unknown value is such a range
UNKNOWN_IS_SEQUENCE = "<a user's code>"


def _range_like(node, ranges: set) -> bool:
    """A ``range(...)``, a variable holding one, or a slice of either."""
    if called(node, "range"):
        return True
    if isinstance(node, gast.Name):
        return node.id in ranges
    if isinstance(node, gast.Subscript):
        return _range_like(node.value, ranges)
    if called(node, "reversed") and node.args:
        return _range_like(node.args[0], ranges)
    return False


def _index_loop(
    statement: gast.For,
    namer: Namer,
    source,
    ranges: set,
    sequences: set,
    tuples: set = frozenset(),
    keyed: set = frozenset(),
):
    """Every ``for`` as ``for i in steps`` with ``steps`` a variable holding a range
    (or a reversed one): ``for x in seq`` becomes ``for i in range(len(seq))`` with
    ``x = seq[i]`` first in the body; ``enumerate`` and ``zip`` likewise;
    ``reversed(seq)`` of anything but a range is ``seq[::-1]``, items differentiated
    (it was taken for a range: a zero gradient)."""
    iterable, target = statement.iter, statement.target
    prelude = []
    if called(iterable, "reversed") and _not_a_range(iterable, ranges, sequences):
        statement.iter = iterable = _unreversed(iterable)
    if isinstance(target, gast.Name) and (
        called(iterable, "range") or called(iterable, "reversed")
    ):
        iterable = _unreversed(iterable)  # (a reversed range: a range backwards)
        steps = namer.fresh("steps")
        prelude.append(_assign(steps, iterable, statement))
        statement.iter = _name(steps)
        return prelude, statement
    index_name, pairs, first, prelude, packed = _sequence_targets(
        statement, namer, source
    )
    pairs, unpacked = _named_elements(pairs, namer, statement)
    steps = namer.fresh("steps")
    sequences = []
    for element_target, sequence_expr in pairs:
        sequence = namer.fresh("sequence")
        if isinstance(sequence_expr, gast.Tuple):  # items written out: as a list,
            # which may hold arrays and numbers alike (a tuple is stacked)
            sequence_expr = gast.List(sequence_expr.elts, gast.Load())
        elif isinstance(sequence_expr, gast.Name) and sequence_expr.id in tuples:
            sequence_expr = _call("list", sequence_expr)  # (the same: ``t = (x, 2.0)``)
        elif isinstance(sequence_expr, gast.Name) and sequence_expr.id in keyed:
            sequence_expr = _call("list", sequence_expr)  # (a dict's keys, in order)
        elif _dict_view(sequence_expr):  # (a view has a length but no ``view[i]``)
            sequence_expr = _call("list", sequence_expr)
        prelude.append(_assign(sequence, sequence_expr, statement))
        sequences.append((element_target, sequence))
    lengths = [_call("len", _name(sequence)) for _, sequence in sequences]
    length = lengths[0] if len(lengths) == 1 else _call("min", *lengths)  # (zip)
    prelude.append(_assign(steps, _call("range", length), statement))
    for element_target, sequence in sequences:
        element = gast.Subscript(_name(sequence), _name(index_name), gast.Load())
        first.append(_assign(element_target, element, statement))
    first += unpacked + packed
    statement.target = gast.Name(index_name, gast.Store(), None, None)
    statement.iter = _name(steps)
    statement.body = first + statement.body
    return prelude, statement


def _dict_view(node) -> bool:
    """``d.items()``, ``d.values()`` or ``d.keys()``: a dict read as a sequence (a
    pytree argument not differentiated stays a dict in the generated code)."""
    return (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Attribute)
        and node.func.attr in ("items", "values", "keys")
        and not node.args
        and not node.keywords
    )


def _named_elements(pairs: list, namer: Namer, origin) -> tuple[list, list]:
    """``pairs`` with each element target that unpacks (``for a, (b, c) in
    pairs``) replaced by a fresh name, and the assignments, one level each, that
    unpack those names at the start of each turn."""
    named, unpacked = [], []
    for target, sequence in pairs:
        if isinstance(target, str):
            named.append((target, sequence))
            continue
        names = [n.id for n in trees.walk(target) if isinstance(n, gast.Name)]
        item = namer.fresh("_".join(names) or "item")
        named.append((item, sequence))
        unpacking = gast.Assign([target], _name(item), None)
        unpacked += _unpack_steps(gast.copy_location(unpacking, origin), namer)
    return named, unpacked


def _sequence_targets(statement: gast.For, namer: Namer, source):
    """The index variable, (element target, sequence) pairs, the statements that
    start each turn, those to run before the loop, and those that follow reading
    the elements, of a ``for`` loop; a target is a name, or the tuple or list of
    names it unpacks into."""
    iterable, target = statement.iter, statement.target
    unsupported = source.error(
        statement,
        "ppto cannot differentiate this form of for loop",
        "loop over range(...), a tensor or list, enumerate(...) or zip(...), with "
        "names or tuples of names as targets",
    )
    if not _names_only(target):
        raise unsupported  # (for x[0] in ..., for obj.attribute in ...)
    if called(iterable, "enumerate"):
        if not (isinstance(target, gast.Tuple) and len(target.elts) == 2):
            raise unsupported
        index, element = target.elts
        if not isinstance(index, gast.Name):
            raise unsupported
        start = _enumerate_start(iterable, unsupported)
        items, packed = _enumerated(element, iterable.args[0], namer, statement)
        if items is None:
            raise unsupported
        if start is not None:
            # the items run from 0, the count from ``start``, read once before the
            # loop (as Python does): index = counter + start at each turn
            counter, held = namer.fresh("i"), namer.fresh("start")
            offset = gast.BinOp(_name(counter), gast.Add(), _name(held))
            first = _assign(index.id, offset, statement)
            return counter, items, [first], [_assign(held, start, statement)], packed
        return index.id, items, [], [], packed
    if called(iterable, "zip"):
        if not (
            isinstance(target, gast.Tuple) and len(target.elts) == len(iterable.args)
        ):
            raise unsupported
        pairs = zip(target.elts, iterable.args)
        items = [(_target(t), _unreversed(a)) for t, a in pairs]
        return namer.fresh("i"), items, [], [], []
    return namer.fresh("i"), [(_target(target), iterable)], [], [], []


def _enumerated(element, sequence, namer: Namer, origin):
    """``enumerate(sequence)``'s (element target, sequence) pairs, and the
    statements that make the element from them: ``enumerate(zip(a, b))`` is read as
    ``zip(a, b)`` (a zip has no length to index by), its items ``(a_i, b_i)`` made
    into the element where it is one name. (None, ...) where the targets do not fit
    the zip."""
    if not called(sequence, "zip") or sequence.keywords:
        return [(_target(element), _unreversed(sequence))], []
    parts = sequence.args
    if isinstance(element, (gast.Tuple, gast.List)):
        if len(element.elts) != len(parts):
            return None, []
        return [(_target(t), _unreversed(a)) for t, a in zip(element.elts, parts)], []
    names = [namer.fresh(f"{element.id}_item") for _ in parts]
    items = gast.Tuple([_name(n) for n in names], gast.Load())
    packed = [_assign(element.id, items, origin)]
    return [(n, _unreversed(a)) for n, a in zip(names, parts)], packed


def _target(node):
    """A loop target as ``_sequence_targets`` gives it: a name's identifier, else
    the tuple or list itself."""
    return node.id if isinstance(node, gast.Name) else node


def _names_only(target) -> bool:
    """Whether ``target`` is a name, or a tuple or list of such targets."""
    if isinstance(target, gast.Name):
        return True
    if isinstance(target, (gast.Tuple, gast.List)):
        return all(_names_only(element) for element in target.elts)
    return False


def _enumerate_start(call: gast.Call, unsupported):
    """``enumerate(seq, start)``'s start (by position or keyword), or None."""
    starts = call.args[1:] + [k.value for k in call.keywords if k.arg == "start"]
    if len(call.args) < 1 or len(starts) > 1:
        raise unsupported
    if any(k.arg != "start" for k in call.keywords):
        raise unsupported
    return starts[0] if starts else None


def _unreversed(sequence):
    """``reversed(s)`` as the sequence ``s[::-1]`` (or its items written out
    backwards), which has a length and items to index (a reversed iterator has
    neither); anything else as it is."""
    if not (called(sequence, "reversed") and len(sequence.args) == 1):
        return sequence
    items = sequence.args[0]
    if isinstance(items, (gast.Tuple, gast.List)):
        return gast.List(items.elts[::-1], gast.Load())
    backwards = gast.Slice(None, None, gast.Constant(-1, None))
    return gast.Subscript(items, backwards, gast.Load())


def _stores_into_items(target) -> bool:
    """Whether the tuple ``target`` (no item starred) has a subscript among its
    items (``Y[0], Y[1]``), nested ones included."""
    items = list(trees.walk(target))
    return not any(isinstance(n, gast.Starred) for n in items) and any(
        isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) for n in items
    )


def _items_in_order(statement, namer: Namer) -> list:
    """``t1, t2 = value`` then ``target1 = t1``, ``target2 = t2`` for ``target1,
    target2 = value``: the value first, then each store in turn (a subscript's
    index evaluated then, after the stores before it: Python's order)."""
    targets = statement.targets[0].elts
    held = [namer.fresh(_item_name(target)) for target in targets]
    statement.targets[0].elts = [gast.Name(n, gast.Store(), None, None) for n in held]
    out = [statement]
    for target, name in zip(targets, held):
        step = gast.Assign([target], gast.Name(name, gast.Load(), None, None), None)
        gast.copy_location(step, statement)
        step.split_from = getattr(statement, "split_from", statement)
        out.extend(_unpack_steps(step, namer))
    return out


def _item_name(target) -> str:
    """A name for the value stored into ``target``: ``Y_at_0`` for ``Y[0]``
    (apart from the numbered versions of Y itself, ``Y_1``), ``a`` for ``a``."""
    parts = [
        str(n.id if isinstance(n, gast.Name) else n.value)
        for n in trees.walk(target)
        if isinstance(n, (gast.Name, gast.Constant))
    ]
    parts = [part for part in parts if part.isidentifier() or part.isdigit()]
    if not parts or not parts[0].isidentifier():
        return "part"
    return "_at_".join([parts[0], "_".join(parts[1:])]) if parts[1:] else parts[0]


def unpack_in_steps(body: list, namer: Namer) -> list:
    """Split nested tuple targets into one level per statement (see module doc)."""
    out = []
    for statement in body:
        for field in ("body", "orelse"):
            if isinstance(getattr(statement, field, None), list):
                setattr(
                    statement, field, unpack_in_steps(getattr(statement, field), namer)
                )
        out.extend(_unpack_steps(statement, namer))
    return out


def _unpack_steps(statement, namer: Namer) -> list:
    if not (
        isinstance(statement, gast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], (gast.Tuple, gast.List))
    ):
        return [statement]
    if _stores_into_items(statement.targets[0]):
        return _items_in_order(statement, namer)
    later = []
    elements = []
    for element in statement.targets[0].elts:
        if isinstance(element, (gast.Tuple, gast.List)):
            names = [n.id for n in trees.walk(element) if isinstance(n, gast.Name)]
            whole = namer.fresh("_".join(names) or "part")
            elements.append(gast.Name(whole, gast.Store(), None, None))
            inner = gast.Assign(
                targets=[element],
                value=gast.Name(whole, gast.Load(), None, None),
                type_comment=None,
            )
            gast.copy_location(inner, statement)
            inner.split_from = getattr(statement, "split_from", statement)
            later.extend(_unpack_steps(inner, namer))
        else:
            elements.append(element)
    statement.targets[0].elts = elements
    return [statement] + later
