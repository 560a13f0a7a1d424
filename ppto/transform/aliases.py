"""Writes through a second name for an array: ``r = y[1:]; r *= 2.0`` changes ``y`` in
NumPy (``r`` is a view of it), and ``z = y; z += 1.0`` changes ``y`` (the same array).
The generated code gives every assignment a value of its own (``r = r * 2.0``), so
``y`` would keep its old value, and its gradient would follow the code, not NumPy:
silently wrong. Such a write raises ``TransformError`` where the other name is read
after it; a write nothing else sees (into a fresh array, or a view never read again
through its base) is fine.

Which names may share memory is decided from how each was bound: a plain copy of
another name, a subscript of it, ``.T``, or a reshaping call (``x.reshape``,
``np.transpose``, ...). This is deliberately cautious: a subscript with an index
array makes a copy in NumPy, but is treated as a possible view, unless the index is
a list written out (``y[[0, 2]]``, ``y[:, np.array([1, 3])]``). An item of a
tuple or list of numbers (an argument the specialisation key says is one,
``size = (2, 3)``, or ``x.shape``) is a number: ``h, w = size`` shares nothing.
"""

from __future__ import annotations

import inspect
import types
from contextvars import ContextVar
from dataclasses import dataclass, field

import gast
import numpy as np

from ppto.ops import ALIASES
from ppto.ops.primitive import OPERATORS
from ppto.runtime.tensor import Tensor
from ppto.transform import trees
from ppto.transform.analyze import literal, number_sequence
from ppto.transform.containers import Containers, containers
from ppto.transform.objects import read_value
from ppto.transform.source import ParsedFunction
from ppto.transform.trees import (
    bound_arguments,
    loads,
    paired,
    positions_known,
    single_target,
    stores,
)

VIEW_ATTRIBUTES = {"T", "mT", "real", "imag", "flat"}
# calls that may return their (first) argument or a view of it: NumPy's views, and
# the conversions that return the array itself where it is already as asked
# (``np.asarray(y)``, ``np.require(y)``, ``np.ascontiguousarray(y)``): which one
# happens depends on the argument, so each is taken for a view
VIEW_CALLS = {
    "reshape", "transpose", "ravel", "squeeze", "view", "swapaxes", "moveaxis",
    "rollaxis", "permute_dims", "matrix_transpose", "expand_dims", "broadcast_to",
    "diagonal", "diag",  # (np.diag of a matrix: a view of its diagonal)
    "flip", "fliplr", "flipud", "rot90", "real", "imag", "trim_zeros",
    "sliding_window_view",  # (a read-only view of its argument)
    "as_strided", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
    "asarray_chkfinite", "require", "real_if_close", "asmatrix",
    # a list or tuple of views of it (``a, b = np.split(y, 2)``)
    "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack",
}  # fmt: skip
# calls that may return any of their arrays (or views of them): ``np.atleast_2d(a,
# b)``, ``np.broadcast_arrays(a, b)``
VIEW_OF_EACH_CALLS = {"atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays"}
MODULES = {"np", "numpy", "ppto"}


@dataclass
class _Sharing:
    """What may share memory at one point of the function, over every path there."""

    bases: dict = field(default_factory=dict)  # name -> names whose array it may be in
    views: dict = field(default_factory=dict)  # the same, through views only
    # name -> the fewest axes it has, for a name that is an array on some path
    # here (one that is a number on every path is not here)
    arrays: dict = field(default_factory=dict)
    exact: dict = field(default_factory=dict)  # name -> its number of axes, if known
    # name -> the other names bound to the very same object (``gs = hs``): a list
    # changed through one (``gs.append(y)``) is changed for the others
    same: dict = field(default_factory=dict)
    # name -> for each position of the list or tuple written out it is bound to
    # (``params = [y, b]``), what that item's array may be in (its own ``ITEM``
    # marker, which the list's bases hold too), while the list is unchanged: the
    # names unpacked from it (``y, b = params``) are apart from each other
    items: dict = field(default_factory=dict)
    # name -> the statement that handed the list to a function of the user's
    # (``swap(params)``), which may have moved its items: what an item read
    # afterwards shares is not known, only what it may share
    handed: dict = field(default_factory=dict)
    moved: dict = field(default_factory=dict)  # such an item's name -> the list's
    # names bound to a tuple or list of Python numbers (an argument described so,
    # ``t = size``, ``size[1:]``), while not rebound: each item of one is a
    # number, which shares no memory (``h, w = size``, ``for s in size``)
    numbers: set = field(default_factory=set)
    # name -> {position: what the item there may be in} for such a list whose
    # items at those positions (whole numbers, from the start) were replaced
    # (``size[0] = y``): its other items are numbers still (``h, w = size``: w
    # shares nothing, h y's array)
    numbered: dict = field(default_factory=dict)

    def copy(self) -> _Sharing:
        return _Sharing(
            {k: set(v) for k, v in self.bases.items()},
            {k: set(v) for k, v in self.views.items()},
            dict(self.arrays),
            dict(self.exact),
            {k: set(v) for k, v in self.same.items()},
            dict(self.items),
            dict(self.handed),
            dict(self.moved),
            set(self.numbers),
            {k: dict(v) for k, v in self.numbered.items()},
        )

    def join(self, other: _Sharing) -> _Sharing:
        """What may hold after either of two paths. Where a name is an array on
        one path only, the other path's sharing is moot (``+=`` rebinds a number),
        so only the array's path counts."""
        arrays = dict(self.arrays)
        for name, rank in other.arrays.items():
            arrays[name] = min(rank, arrays.get(name, rank))
        exact = {
            name: rank
            for name, rank in self.exact.items()
            if other.exact.get(name) == rank
        }
        same = {
            name: self.same.get(name, set()) | other.same.get(name, set())
            for name in set(self.same) | set(other.same)
        }
        items = {  # (kept where both paths bound the name to as many items)
            name: tuple(a | b for a, b in zip(mine, other.items[name]))
            for name, mine in self.items.items()
            if name in other.items and len(other.items[name]) == len(mine)
        }
        joined = _Sharing(
            arrays=arrays,
            exact=exact,
            same=same,
            items=items,
            handed={**other.handed, **self.handed},
            moved={**other.moved, **self.moved},
            numbers=self.numbers & other.numbers,
            numbered=_joined_numbered(self, other),
        )
        for field_name in ("bases", "views"):
            mine, theirs = getattr(self, field_name), getattr(other, field_name)
            merged = {}
            for name in set(mine) | set(theirs):
                if name in self.arrays and name not in other.arrays:
                    merged[name] = set(mine.get(name, ()))
                elif name in other.arrays and name not in self.arrays:
                    merged[name] = set(theirs.get(name, ()))
                else:
                    merged[name] = mine.get(name, set()) | theirs.get(name, set())
            setattr(joined, field_name, merged)
        return joined


def _joined_numbered(one: _Sharing, other: _Sharing) -> dict:
    """``numbered`` after either of two paths: a list of numbers with items
    replaced on one path (or both), kept where the other path has it too, or the
    list of numbers unchanged; each position's item may be what either put."""
    joined = {}
    for name in set(one.numbered) | set(other.numbered):
        sides = [
            state.numbered.get(name, {} if name in state.numbers else None)
            for state in (one, other)
        ]
        if None in sides:
            continue
        positions = set(sides[0]) | set(sides[1])
        joined[name] = {
            p: sides[0].get(p, frozenset()) | sides[1].get(p, frozenset())
            for p in positions
        }
    return joined


def check(
    parsed: ParsedFunction,
    ranks: dict | None = None,
    passed=(),
    returns: dict | None = None,
    generated: bool = False,
    lists_only: bool = False,
    numbers=(),
    written: dict | None = None,
    zero_d=(),
    defaults=(),
    maybe_zero_d: dict | None = None,
    own=None,
) -> None:
    """Raise at the first write through a name another name read later shares.
    ``ranks``: the parameters' numbers of axes, where known (one or more: an array).
    ``numbers``: the parameters given a tuple or list of Python numbers, whose
    items share no memory (``h, w = size``; an array's rows would).
    ``passed``: for a function the differentiated one calls, its parameters the
    caller passes objects of its own for: a write into one (or a list changed) is
    seen there. ``returns``: where given, collects the parameters a returned value
    may share. ``generated``: code ppto generated (a derivative differentiated
    again), whose copies of lists (a loop's ``sequence = hs``) are its own.
    ``lists_only``: check only the changes made to lists. ``written``: where
    given (the differentiated function itself), collects each parameter whose
    caller's object the code may change in place -> the first statement that
    does: allowed, as the generated code changes a copy, but wrong where the
    caller passed one array for two parameters (see ``ppto.shared_arguments``).
    ``zero_d``: the parameters given 0-d arrays, whose ``+=`` writes into them
    (``ranks`` says 0 for them as for a Python float, which ``+=`` rebinds).
    ``defaults``: the parameters the call leaves to a default that a write could
    change (an array, a list): Python keeps the change for the next call, which
    generated code does not, so a write into one is refused. ``maybe_zero_d``:
    those of ``passed`` given a number or a 0-d array, the caller cannot tell
    which -> None, made the first statement whose ``+=`` may write into one
    (``t = p; t += 1.0``: into a 0-d array; p read afterwards is refused).
    ``own``: ``(self's name, the object)`` for a method differentiated for one
    object, whose attributes are then known (see ``_object_part``)."""
    local = _local_names(parsed)
    nodes = trees.nodes_by_kind(parsed.tree)  # (three passes read it: none changes it)
    described = None  # (nothing known: see ``containers``)
    if ranks is not None:
        described = {name for name, rank in ranks.items() if rank is not None}
    arrays = {name for name, rank in (ranks or {}).items() if rank}
    held = _CONTAINERS.set(containers(parsed, nodes, local, described, arrays))
    token = _HELPER_RESULTS.set(_helper_results(parsed, local, nodes))
    reader = _OBJECT_READER.set(lambda node: read_value(node, parsed, local, own, []))
    numbers = set(numbers) & set(parsed.parameters)
    try:
        _check(
            parsed,
            ranks,
            set(passed),
            returns,
            generated,
            lists_only,
            local,
            nodes,
            numbers,
            written,  # (``writes`` there: ``written`` names the array changed)
            set(zero_d),
            set(defaults),
            maybe_zero_d,
        )
    finally:
        _OBJECT_READER.reset(reader)
        _HELPER_RESULTS.reset(token)
        _CONTAINERS.reset(held)


def _check(
    parsed: ParsedFunction,
    ranks,
    passed: set,
    returns,
    generated,
    lists_only,
    local,
    nodes: dict,
    numbers: set,
    writes: dict | None = None,
    zero_d: frozenset = frozenset(),
    defaults: set = frozenset(),
    maybe_zero_d: dict | None = None,
) -> None:
    maybe_zero_d = {} if maybe_zero_d is None else maybe_zero_d
    order = list(_flattened(parsed.tree.body, ()))
    positions = {id(statement): n for n, (statement, _) in enumerate(order)}
    known = {name: rank for name, rank in (ranks or {}).items() if rank is not None}
    state = _Sharing(
        arrays={name: rank for name, rank in known.items() if rank},
        exact=known,
        numbers=numbers - set(known),
    )
    for parameter in passed:  # each shares its object with the caller's argument
        if parameter in parsed.parameters:
            _held_from_outside(state, parameter, _argument(parameter), known)
            if parameter in maybe_zero_d:  # (``+=`` may write into it)
                state.views[parameter] = {MAYBE_ZERO_D + parameter}
    for parameter in parsed.parameters if writes is not None else ():
        # (its own name: a write is recorded, not refused; a tuple or list of
        # numbers holds no array a write could reach, and its items share none,
        # but a list changed is changed for another parameter given it too; a
        # number's ``+=`` rebinds the name, a 0-d array's writes into it)
        if parameter in passed:
            continue
        if parameter in numbers:
            state.same[parameter] = {PARAMETER + parameter}
        elif known.get(parameter) != 0 or parameter in zero_d:
            _held_from_outside(state, parameter, PARAMETER + parameter, known)
            if parameter in zero_d:  # (known as rank 0, yet an array)
                state.views[parameter] = {PARAMETER + parameter}
    for parameter in defaults - passed:  # (the function's own object)
        _held_from_outside(state, parameter, DEFAULT + parameter, known)
    sequences = _sequence_names(parsed, nodes, set(parsed.parameters) - set(known))
    copies = _bound_to_copies_only(nodes)
    tuples = _tuple_names(
        parsed, nodes
    )  # (``t += (4.0,)`` rebinds one: no list change)
    # names that may be lists, whose ``c[i] = y`` puts y's very array in them: a
    # list written out, or a parameter not described as an array (``size``, given
    # a list of numbers, or a list of arrays); an array's item assignment copies
    lists = sequences | (set(parsed.parameters) - set(known))
    indexed, items = set(), set()  # ``row = m[-1]``: m is indexed, row an item
    for node in _of_kinds(nodes, (gast.Assign, gast.AnnAssign, gast.For)):
        if isinstance(node, (gast.Assign, gast.AnnAssign)) and node.value is not None:
            held = _held_items(node.value)
            targets = node.targets if isinstance(node, gast.Assign) else [node.target]
            if isinstance(node.value, gast.Name) and any(
                isinstance(t, (gast.Tuple, gast.List)) for t in targets
            ):  # ``y, c = params``: items of params (arrays, perhaps)
                held = {node.value.id}
        elif isinstance(node, gast.For):  # ``for row in m``: rows of m
            held = {n.id for n in [node.iter] if isinstance(n, gast.Name)}
            targets = [node.target]
        else:
            continue
        indexed |= held
        if held:
            items |= {n for t in targets for n in _stored(t)}
    # ``c = r`` (or ``max(r, s)``) with r an item: c is that item too
    named_items = [
        (node.targets, _same_objects(node.value))
        for node in _of_kinds(nodes, (gast.Assign,))
    ]
    while True:
        found = {
            n
            for targets, objects in named_items
            if objects & items
            for t in targets
            if isinstance(t, gast.Name)
            for n in _stored(t)
        }
        if found <= items:
            break
        items |= found

    def written_through_another_name(statement, state: _Sharing, loops: tuple):
        if not generated:
            refuse_change_while_iterated(statement, state, loops)
        for call, changed in _changed_lists(statement):  # ``gs.append(y)``, gs = hs
            if changed not in local and _module(parsed.namespace.get(changed)):
                continue  # ``np.sort(k)``, ``np.append(a, b)``: new arrays
            if generated:
                continue
            refuse_global_change(call, changed)
            others = state.same.get(changed, set())
            refuse_argument_change(call, changed, others)
            refuse_if_read_later(statement, changed, others, loops, call)
        for name in _items_unpacked_into(statement):  # ``p[0], p[1] = p[1], p[0]``
            refuse_global_change(statement, name)
            shared = state.same.get(name, set()) | _sharing(name, state.bases)
            refuse_argument_change(statement, name, shared)
        refuse_stored_after_its_change(statement, state)
        written = _written_in_place(statement)
        if written is None:
            return
        if written not in local and _module(parsed.namespace.get(written)):
            return  # ``np.put(y, i, v)``: not a change of np (normalize refuses it)
        refuse_global_change(statement, written)
        listed = sequences | state.numbers | set(state.numbered)  # (lists for sure)
        if _item_replaced(statement, listed) or (lists_only and written in state.same):
            # ``a[i] = v`` on a list puts another object in it: the arrays it held
            # are unchanged, but another name for the list sees the new item
            others = set() if generated else state.same.get(written, set())
            refuse_argument_change(statement, written, others)
            return refuse_if_read_later(statement, written, others, loops, statement)
        if lists_only:
            return
        if (
            isinstance(statement, gast.AugAssign)
            and isinstance(statement.target, gast.Name)
            and (
                written in sequences
                or (_sequence_value(statement.value) and may_be_a_list(written, state))
            )
        ):
            if written in tuples:
                return  # (a new tuple, bound to this name alone)
            # ``xs += [h]`` on a name only ever bound to a list or tuple extends
            # the list (or makes a new tuple): the arrays it holds do not change,
            # only what another name for the same list sees; and so does ``size
            # += (4,)`` on a parameter (a list of numbers, perhaps: not a tuple
            # for sure) or another name for one (``s = size``)
            shared = state.same.get(written, set())  # (its items are not changed)
            refuse_argument_change(statement, written, shared)
            others = shared - {written}
            refuse_if_read_later(statement, written, others, loops, statement)
            if ({written} | shared) & (sequences | state.numbers):
                return
            # (an array of unknown rank, perhaps, into which += writes: below)
        # ``a += 1`` writes into an array only if ``a`` is one: after ``a = x[0]``
        # or ``a = c`` it may be a number, which ``+=`` rebinds; a slice, ``.T``
        # or a reshape is an array for sure, and so is a name bound to an array
        # argument or to arithmetic on one. ``a[...] = ...`` needs an array.
        augmented = isinstance(statement, gast.AugAssign) and isinstance(
            statement.target, gast.Name
        )
        if augmented and _rebinds_a_number(statement, state):
            return
        maybe_number = (  # (``+= [a]`` extends a list or adds into an array)
            augmented
            and written not in state.arrays
            and not state.exact.get(written)
            and not isinstance(statement.value, gast.List)
            and written not in indexed  # (``m[-1]`` somewhere: not a number)
            # (nor another name for its object: ``z = y; c = y[0]; z += 1``)
            and not state.same.get(written, set()) & indexed
            # (an item of an array of unknown rank: a row, perhaps)
            and not (written in items and written not in state.exact)
        )
        if augmented and not maybe_number and written not in state.arrays:
            state.arrays[written] = 1  # (so that ``+=`` keeps what it shares)
        shared = _sharing(written, state.views if maybe_number else state.bases)
        if written in copies and _stored_into(statement):  # (``t[i] = v`` of t =
            # ys.copy(): a new array, or a new list whose item it replaces; what
            # ys holds is untouched, only a view of t or another name sees it)
            shared = _viewing(written, state.bases) | state.same.get(written, set())
        if maybe_number:  # (``t = z``: z's very object, an array where z may be
            # one, as a 0-d array may: ``+=`` writes into it; a number it rebinds)
            shared |= {
                other
                for other in state.same.get(written, set())
                if ":" not in other
                and state.exact.get(other) != 0
                and other not in state.numbers
            }
        refuse_argument_change(statement, written, shared)
        for marker in sorted(shared) if maybe_number else ():
            if marker.startswith(MAYBE_ZERO_D):  # (first write only)
                written_into = marker[len(MAYBE_ZERO_D) :]
                maybe_zero_d[written_into] = maybe_zero_d[written_into] or statement
        within = state.bases.get(written, set())  # (named first: what it is in)
        listed = state.moved.get(written)
        handed = {listed: state.handed[listed]} if listed in state.handed else {}
        refuse_if_read_later(
            statement, written, shared, loops, within=within, handed=handed
        )
        if _writes_into_an_item(statement) and _items_may_share(written, state):
            refuse_item_write_if_read_later(statement, written, loops)

    def may_be_a_list(name: str, state: _Sharing) -> bool:
        """Whether ``name`` may be bound to a list: one of ``lists``, or another
        name for one (``s = size``)."""
        return bool(({name} | state.same.get(name, set())) & lists)

    def refuse_stored_after_its_change(statement, state: _Sharing):
        """``Y[0], Y[1] = Y[1], Y[0]``: Python stores the items in turn, and
        ``Y[0]``, a view, is stored into Y[1] as the store into Y[0] left it (the
        rows are not swapped); the generated code takes each item as it was."""
        found = _stored_after_its_change(
            statement, state, sequences | state.numbers | set(state.numbered)
        )
        if found is None:
            return
        item, target, earlier = (gast.unparse(n).strip() for n in found)
        raise parsed.source.error(
            statement,
            f"this stores {item} into {target} after the store into {earlier}, "
            f"which writes into the array {item} may be a view of: Python stores "
            f"the items in turn, so NumPy stores {item} as that write left it, "
            "but ppto's generated code takes each item as it was before the "
            "statement",
            f"copy the item first ({target} = {item}.copy() in the tuple), or "
            "store the items in separate statements in the order meant",
        )

    def read_later(statement, loops: tuple) -> set:
        """The names read after ``statement``, in the function or (the next
        turn reads what came before too) the loops it is in."""
        after = order[positions[id(statement)] + 1 :]
        later = set().union(*(loads(s) for s, _ in after))
        for loop in loops:
            later |= loads(loop)
        return later

    def read_before(statement) -> set:
        """The names read before ``statement`` (compound statements: their
        headers), but for a name bound to another (``s = size``), which reads
        no item of it."""
        before = order[: positions[id(statement)]]
        return set().union(
            *(
                loads(_headers(s))
                for s, _ in before
                if not (isinstance(s, gast.Assign) and isinstance(s.value, gast.Name))
            )
        )

    def refuse_item_write_if_read_later(statement, written: str, loops: tuple):
        if written in read_later(statement, loops):
            raise parsed.source.error(
                statement,
                f"this writes into an item of {written}, whose items may share "
                "their arrays (one a view of another, as in (t, t.reshape(-1)), "
                "or one array repeated, as in [t] * 3), "
                f"and {written} is read afterwards: ppto's generated code gives "
                "each assignment a new array, so the change would not reach the "
                f"other items of {written} as it does in NumPy",
                f"take the item out and make it an array of its own before "
                f"changing it (item = {written}[...] * 1.0), or make the items "
                "arrays of their own where they are made",
            )

    def refuse_change_while_iterated(statement, state: _Sharing, loops: tuple):
        """Refuse a change to a list a ``for`` loop around ``statement`` runs over
        (``for h in hs: hs.append(...)``): Python reads the list as it is at each
        turn, ppto's generated code as it was when the loop began."""
        for loop in loops:
            iterated = _iterated(loop) & _containers_now().names
            changed = _list_changes(statement, _current_item(loop)) if iterated else ()
            for name in sorted(iterated):
                others = set(changed) & ({name} | state.same.get(name, set()))
                if not others:
                    continue
                line, _ = parsed.source.position(loop)
                spelled = parsed.spelled.get(name, name)
                raise parsed.source.error(
                    statement,
                    f"this changes the list {sorted(others)[0]} while the for loop "
                    f"at line {line} runs over it: Python's loop reads {spelled} "
                    "as it is at each turn (an item appended is visited, one "
                    "replaced is read as it is now, one removed is skipped), but "
                    "ppto's generated code runs over the list as it was when the "
                    "loop began",
                    f"run over a copy of it ({_over_a_copy(parsed, loop, name)}), "
                    "or put the new items in another list and join it to "
                    f"{spelled} after the loop",
                )

    def refuse_global_change(node, written: str):
        if written not in local:
            raise parsed.source.error(
                node,
                f"this changes {written} in place, which is not a variable of "
                f"{parsed.name} (a module-level value): ppto's generated code keeps "
                "its changes to its own values",
                f"make a new value inside the function ({written}_now = ...) and "
                f"read that, or pass {written} as an argument and return the new "
                "value",
            )

    def refuse_argument_change(node, written: str, shared: set):
        refuse_default_change(node, written, shared)
        if not generated:
            refuse_object_change(node, written, shared)
        if writes is not None:
            for name in sorted(shared):
                if name.startswith(PARAMETER):
                    writes.setdefault(name[len(PARAMETER) :], node)
        parameter = _first_marked(shared, ARGUMENT)
        if parameter is not None:
            raise parsed.source.error(
                node,
                f"this changes {written} in place, which is (part of) the argument "
                f"{parameter} of {parsed.name}: the caller's value would change in "
                "NumPy, but ppto's generated code gives each assignment a new "
                "value, so the caller would not see the change",
                f"change a copy and return it ({parameter} = {parameter} * 1.0 for "
                f"an array, {parameter} = list({parameter}) for a list; return "
                f"{parameter}), and assign the result in the caller",
            )

    def refuse_object_change(node, written: str, shared: set):
        held = _first_marked(shared, HELD)
        if held is None:
            return
        written = parsed.spelled.get(written, written)
        raise parsed.source.error(
            node,
            f"this changes {written} in place, which is (part of) {held}, held by "
            "an object: NumPy changes the object, but ppto's generated code gives "
            f"each assignment a new value, so {held} would not change, and what "
            "is read back from it would have no derivative",
            f"make a new value ({written} = {held} * 1.0 for an array, "
            f"list({held}) for a list; {written} = {written} + ... where it is a "
            "number), compute with it and return what the "
            "caller needs, and change the object outside the differentiated "
            "function",
        )

    def refuse_default_change(node, written: str, shared: set):
        parameter = _first_marked(shared, DEFAULT)
        if parameter is not None:
            raise parsed.source.error(
                node,
                f"this changes {written} in place, which is (part of) the default "
                f"value of the parameter {parameter} of {parsed.name}: Python makes "
                "that value once, when the def runs, and a change to it is seen by "
                f"every later call that leaves {parameter} out, but ppto's generated "
                "code gives each assignment a new value, so the change would not "
                "be kept",
                f"write the default as {parameter}=None and make a new value "
                f"inside the function (if {parameter} is None: {parameter} = "
                f"np.zeros(...)), or pass {parameter} in the call",
            )

    def refuse_if_read_later(
        statement,
        written: str,
        shared: set,
        loops: tuple,
        list_change=None,
        within=(),
        handed=(),
    ):
        later = read_later(statement, loops)
        if list_change is not None:  # a list's adjoint is made from the list as it
            later |= read_before(statement)  # ends: a read before the change counts
        # (the user's names: ``params[1]`` for the leaf parameter ``params_1``)
        seen = [
            parsed.spelled.get(name, name)
            for name in sorted(shared & later, key=lambda n: (n not in within, n))
        ]
        written = parsed.spelled.get(written, written)
        if seen and list_change is not None:
            changes = (  # (``size += (4,)``: a tuple would be rebound)
                f"where {written} is a list, += extends it in place: this changes "
                if isinstance(list_change, gast.AugAssign)
                else "this changes "
            )
            raise parsed.source.error(
                list_change,
                f"{changes}the list {written}, which is also named {seen[0]} "
                f"({written} = {seen[0]} or the other way round), and {seen[0]} "
                "is read afterwards: ppto's generated code keeps each name's list "
                f"apart, so the change would not reach {seen[0]} as it does in "
                "Python",
                f"use one name for the list: change and read it through "
                f"{seen[0]} only, or copy it first ({written} = list({seen[0]}))",
            )
        if seen and handed:
            refuse_moved_item(statement, written, shared, seen[0], handed)
        own = f"make {written} an array of its own first ({written} = {written} * 1.0)"
        if written in sequences:  # (a list holding another's items: ys.copy())
            own = f"replace the item instead ({written}[i] = {written}[i] + ...)"
        if seen:
            raise parsed.source.error(
                statement,
                f"this writes into {written}, which shares its array with "
                f"{seen[0]} (a view or another name for it), and {seen[0]} is "
                "read afterwards: ppto's generated code gives each assignment "
                "a new array, so the change would not reach "
                f"{seen[0]} as it does in NumPy",
                f"write the change into {seen[0]} itself ({seen[0]}[...] = "
                f"...), or, if {seen[0]} must not change, {own}",
            )

    def refuse_moved_item(statement, written: str, shared, read: str, handed):
        """Refuse a write into an item of a list handed to a function of the
        user's (``handed``: the list's name -> that call): which item it is, so
        what it shares, is not known (a helper may have swapped them)."""
        listed, call = sorted(handed.items())[0]
        line, _ = parsed.source.position(call)
        spelled = parsed.spelled.get
        candidates = sorted(
            spelled(n, n)
            for n in shared
            if ":" not in n and n not in handed and not n.startswith(ARGUMENT)
        )
        if not candidates:
            return  # (what it shares is no item: the plain refusal says it)
        written, listed = spelled(written, written), spelled(listed, listed)
        raise parsed.source.error(
            statement,
            f"this writes into {written}, an item of {listed} read after "
            f"`{parsed.source.statement_text(call)}` (line {line}), which may have "
            f"changed {listed}'s items (ppto does not follow a function's changes "
            f"to a list): {written} may share its array with "
            f"{' or '.join(candidates)}, and {read} is read afterwards; "
            "ppto's generated code gives each assignment a new array, so a change "
            f"would not reach {read} as it does in NumPy",
            f"make {written} an array of its own first ({written} = {written} * "
            f"1.0), or take the items out of {listed} before the call",
        )

    def block(statements: list, state, loops: tuple, exits: dict):
        """The state after ``statements``, None where no path gets past them (a
        ``break``, ``continue`` or ``return``); ``exits`` collects the states at
        the innermost loop's ``break`` and ``continue`` statements."""
        for statement in statements:
            if state is None:
                return None  # after a break, continue or return: never reached
            written_through_another_name(statement, state, loops)
            if isinstance(statement, gast.If):
                state = _joined(
                    block(statement.body, state.copy(), loops, exits),
                    block(statement.orelse, state.copy(), loops, exits),
                )
            elif isinstance(statement, (gast.For, gast.While)):
                inner = loops + (statement,)
                entry, before = state, None
                while entry != before:  # each turn starts from what the last left
                    before, turn = entry, entry.copy()
                    _bind(statement, turn)  # (a for loop's target)
                    turn_exits: dict = {gast.Break: [], gast.Continue: []}
                    end = block(statement.body, turn, inner, turn_exits)
                    entry = _joined(entry, end, *turn_exits[gast.Continue])
                state = _joined(
                    block(statement.orelse, entry.copy(), loops, exits),
                    *turn_exits[gast.Break],  # (a break skips the else block)
                )
            elif isinstance(statement, gast.With):
                # (a function the fence lets run as written: a helper whose
                # result is unused, ``check_calls_inside``)
                state = block(statement.body, state, loops, exits)
            elif isinstance(statement, gast.Try):
                done = block(statement.body, state.copy(), loops, exits)
                if done is not None:
                    done = block(statement.orelse, done, loops, exits)
                # (an exception may leave the body anywhere: a handler and the
                # finally block start from the state before it or after it)
                start = _joined(state.copy(), done and done.copy())
                handled = [
                    block(handler.body, start.copy(), loops, exits)
                    for handler in statement.handlers
                ]
                after = _joined(done, *handled)
                final = _joined(start.copy(), after and after.copy())
                final = block(statement.finalbody, final, loops, exits)
                state = final if after is not None else None
            elif isinstance(statement, gast.Match):  # (no case may match)
                cases = [
                    block(case.body, state.copy(), loops, exits)
                    for case in statement.cases
                ]
                state = _joined(state, *cases)
            elif isinstance(statement, (gast.Break, gast.Continue)):
                exits[type(statement)].append(state)
                return None
            elif isinstance(statement, gast.Return):
                if returns is not None and statement.value is not None:
                    value = statement.value
                    an_array = _surely_an_array(value) or (  # (t = x[1:]; return t)
                        isinstance(value, gast.Name)
                        and value.id not in parsed.parameters  # (perhaps numbers)
                        and (value.id in state.views or value.id in state.arrays)
                    )
                    for origin in _viewed(value):  # parameter -> returned whole
                        for shared in state.bases.get(origin, set()) | {origin}:
                            if shared.startswith(ARGUMENT):
                                parameter = shared[len(ARGUMENT) :]
                                returns.setdefault(parameter, False)
                                if an_array:  # (np.expand_dims(u, 0))
                                    returns[AN_ARRAY + parameter] = True
                    parts = value.elts if _literal_sequence(value) else [value]
                    for part in parts:  # the very object passed (or in a tuple)
                        if not isinstance(part, gast.Name):
                            continue
                        for shared in state.same.get(part.id, set()):
                            if shared.startswith(ARGUMENT):
                                returns[shared[len(ARGUMENT) :]] = True
                    shared_parts = returns.setdefault(SHARED_PARTS, set())
                    shared_parts |= _parts_sharing(value, state)
                    _record_parts(value, state, returns)
                return None
            else:
                _hold_stored_items(statement, state, lists)
                _bind(statement, state)
        return state

    block(parsed.tree.body, state, (), {gast.Break: [], gast.Continue: []})


ARGUMENT = "argument:"  # (not a Python name: no variable is called so)
# the caller's object passed as a parameter of the differentiated function itself,
# whose changes are recorded (``check``'s ``written``) rather than refused
PARAMETER = "parameter:"
# a default the function holds, given a parameter the call leaves out
DEFAULT = "default:"
# a helper's parameter of rank 0 the caller passes: a number, or a 0-d array
MAYBE_ZERO_D = "rank 0:"
# what an object holds in an attribute, as the code reads it (``held:self.w``):
# a name bound to it (or to a part or view of it) changes the object when it is
# written into, which the generated code would not follow
HELD = "held:"
AN_ARRAY = "array:"  # in ``returns``: a parameter returned as a view, an array
# in ``returns``: pairs of positions in the returned tuple whose values may share
# memory (``return t, t.reshape(-1)``); EVERY_PART for a sequence returned not
# written out (``return r``), whose items may share, for all that is known
SHARED_PARTS = "parts:"
EVERY_PART = (-1, -1)
# in ``_Sharing``: the memory of one call's result that parts of it may share, as
# a name (``a, b = pair(W)``: a and b get the same one)
RESULT = "result:"
# in ``_Sharing``: the memory of the item at one position of a list or tuple
# written out, as a name (``params = [y, b]``: ``item:params:1`` for b's)
ITEM = "item:"
# in ``_Sharing``: the array a name was bound to before it was bound to another,
# which other names may still share (one stand-in for all its former arrays)
FORMER = "former:"
# in ``returns``: for each position of the tuple (or list) every return statement
# writes out, the parameters whose array the item there may share; None where a
# return does not write one out. ``t6, t7 = pair(x)`` with ``return total, x[1:]``:
# t6, a number or an array of pair's own, is no view of x
PARTS = "positions:"


def _record_parts(value, state: _Sharing, returns: dict) -> None:
    """Add to ``returns[PARTS]`` the parameters each item of ``value`` (returned)
    may share an array with (see ``PARTS``)."""
    if not positions_known(value):
        returns[PARTS] = None
        return
    parts = returns.setdefault(PARTS, {})
    if parts is None:
        return
    for position, item in enumerate(value.elts):
        memory = _memory(item, state)
        if isinstance(item, gast.Name):  # (the very object passed: ``return a``)
            memory |= state.same.get(item.id, set())
        parts.setdefault(position, set()).update(
            shared[len(ARGUMENT) :] for shared in memory if shared.startswith(ARGUMENT)
        )


def _parts_sharing(value, state: _Sharing) -> set:
    """Pairs of positions in the tuple or list ``value`` (returned) whose items may
    share memory with each other (``t, t.reshape(-1)``, ``u, u.T``); ``{EVERY_PART}``
    for a value not written out that may hold a local array made elsewhere (an
    item of it may share with another: ``r = (t, t[0]); return r``; not the rows
    of an array of its own, ``return np.tanh(u)``, which share nothing)."""
    if _literal_sequence(value):
        memory = [_memory(part, state) for part in value.elts]
        return {
            (first, second)
            for first in range(len(memory))
            for second in range(first + 1, len(memory))
            if memory[first] & memory[second]
        }
    helper_result = _helper_result(value)
    if helper_result is not None:  # ``return pair(u)``: as pair's result shares
        return set(helper_result.shared_parts)
    held = set().union(*(state.bases.get(o, set()) for o in _viewed(value)))
    if any(not name.startswith(ARGUMENT) for name in held):
        return {EVERY_PART}
    return set()


def _memory(value, state: _Sharing) -> set:
    """The names (and results, arguments) whose array ``value`` may be in."""
    origins = _viewed(value)
    return origins.union(*(state.bases.get(origin, set()) for origin in origins))


def _part_groups(shared_parts) -> dict:
    """Position -> a label shared by the positions whose items may share memory
    (joined through pairs: 0 with 1 and 1 with 2 puts 0 with 2), for those in a
    pair."""
    groups: dict = {}
    for first, second in sorted(shared_parts):
        joined = {groups.get(first, first), groups.get(second, second)}
        label = min(joined)
        for position in [first, second, *groups]:
            if groups.get(position, position) in joined:
                groups[position] = label
    return groups


def _linked_parts(statement, state: _Sharing) -> list:
    """``(name, result)`` for each name ``statement`` binds to an item of a call's
    result that may share memory with another item of it: ``a, b = pair(W)`` with
    ``return t, t.reshape(-1)`` binds a and b to the same result (the name
    ``RESULT...`` standing for its memory); ``r = pair(W)`` binds r to all of it
    (``RESULT...:items:r``: its items may share), and so does ``r = [t, t[:]]``."""
    if not isinstance(statement, gast.Assign):
        return []
    return [
        found
        for target in statement.targets
        for found in _linked_items(target, statement.value, state)
    ]


def _linked_items(target, value, state: _Sharing) -> list:
    if (
        isinstance(target, (gast.Tuple, gast.List))
        and _literal_sequence(value)
        and len(target.elts) == len(value.elts)
    ):
        return [
            found
            for item_target, item in zip(target.elts, value.elts)
            for found in _linked_items(item_target, item, state)
        ]
    helper_result = _helper_result(value)
    if helper_result is not None:
        shared_parts = helper_result.shared_parts
    elif _repeats_arrays(value):  # ``[y] * 3``: one object at every position
        shared_parts = {EVERY_PART}
    elif _literal_sequence(value) and isinstance(target, gast.Name):
        shared_parts = _parts_sharing(value, state)
    else:
        return []
    if not shared_parts:
        return []
    call = f"{RESULT}{id(value)}"
    if isinstance(target, gast.Name):
        return [(target.id, f"{call}:items:{target.id}")]
    if not isinstance(target, (gast.Tuple, gast.List)):
        return [(name, f"{call}:every") for name in _stored(target)]
    groups = _part_groups(shared_parts - {EVERY_PART})
    every = EVERY_PART in shared_parts or not positions_known(target)
    return [
        (name, f"{call}:{'every' if every else groups[position]}")
        for position, item in enumerate(target.elts)
        if every or position in groups
        for name in _stored(item)
    ]


def _repeats_arrays(value) -> bool:
    """Whether ``value`` repeats a list or tuple that may hold arrays (``[y] *
    3``, ``ys * 2``; not ``[0.0] * n``, whose items are numbers)."""
    sequence = _containers_now().repeated(value)
    if sequence is None:
        return False
    return not _literal_sequence(sequence) or not all(
        isinstance(item, gast.Constant) for item in sequence.elts
    )


def _writes_into_an_item(statement) -> bool:
    """``xs[0] -= s`` or ``xs[0][1:] = v``: a write into an item of ``xs`` (not
    ``xs[0] = v``, which puts another object in a list)."""
    if isinstance(statement, gast.AugAssign):
        return isinstance(statement.target, gast.Subscript)
    target = statement.targets[0] if isinstance(statement, gast.Assign) else None
    return isinstance(target, gast.Subscript) and isinstance(
        target.value, gast.Subscript
    )


def _items_may_share(name: str, state: _Sharing) -> bool:
    """Whether ``name`` holds items that may share memory with each other (bound to
    ``[t, t[:]]``, or to a call's result whose items may)."""
    return any(
        shared.startswith(RESULT) and shared.endswith(f":items:{name}")
        for shared in state.bases.get(name, ())
    )


def _module(value) -> bool:
    return isinstance(value, types.ModuleType)


# during a check: id of each call of a user's function -> the names of the caller's
# arrays its result may share (its arguments that the function may return)
_HELPER_RESULTS: ContextVar[dict | None] = ContextVar("helper_results", default=None)
# during a check: the names that may be lists, tuples or dicts (``ys.copy()`` then
# holds ys's very items)
_CONTAINERS: ContextVar[Containers | None] = ContextVar("containers", default=None)
# during a check: ``(found, value)`` of an attribute chain read from an object the
# function can see (``objects.read_value``): what the object holds now
_OBJECT_READER: ContextVar = ContextVar("object_reader", default=None)
_in_progress: set = set()  # (a recursive function: each parameter, to be safe)


def _local_names(parsed: ParsedFunction) -> set:
    """The function's parameters and the names it assigns."""
    return set(parsed.parameters) | stores(parsed.tree.body)


def _helper_results(parsed: ParsedFunction, local: set, nodes: dict) -> dict:
    """For each call of a user's function in ``parsed`` (whose local names are
    ``local``, its nodes by kind ``nodes``), the names in its arguments that its
    result may share an array with."""
    from ppto.transform.resolve import resolve_call

    found = {}
    for node in nodes.get(gast.Call, ()):
        if _sequence_call(node) is not None:
            continue
        try:
            callee = resolve_call(node, parsed.namespace, local)
        except Exception:  # (what cannot be resolved is not a user's function)
            continue
        function = callee.function
        if inspect.ismethod(function):  # ``model.ident(y)``: its self is bound
            parameters, returned = returned_parameters(function.__func__)
            parameters = parameters[1:]
        elif callee.kind == "function":
            parameters, returned = returned_parameters(function)
        else:
            continue
        names, whole, arrays = set(), set(), set()
        shared_parts = returned.get(SHARED_PARTS, {EVERY_PART})  # (unknown: all)
        parts = returned.get(PARTS)
        positions = {position: set() for position in parts or ()}
        for parameter, argument in bound_arguments(node, parameters):
            if parameter not in parameters or parameter in returned:
                names |= _viewed(argument)
                if returned.get(parameter, True) and isinstance(argument, gast.Name):
                    whole.add(argument.id)
                if returned.get(AN_ARRAY + str(parameter), not returned):
                    arrays |= _viewed(argument)
                for position, shared in (parts or {}).items():
                    if parameter in shared or parameter is None:
                        positions[position] |= _viewed(argument)
        found[id(node)] = _Returned(
            names, whole, arrays, shared_parts, positions if parts else None
        )
    return found


class _Returned(frozenset):
    """The names of the caller's arrays a call's result may share; ``whole``: those
    it may be (the very object passed, ``return a``); ``arrays``: those it may be a
    view of that is an array for sure (``return np.expand_dims(a, 0)``, not
    ``return a[i]``, a number for a vector); ``shared_parts``: the pairs of
    positions in it whose items may share memory (see ``SHARED_PARTS``);
    ``positions``: for a tuple written out by every return, position -> the names
    the item there may share (see ``PARTS``), else None."""

    def __new__(cls, names, whole, arrays=(), shared_parts=(), positions=None):
        made = super().__new__(cls, names)
        made.whole = frozenset(whole)
        made.arrays = frozenset(arrays)
        made.shared_parts = frozenset(shared_parts)
        made.positions = positions
        return made

    def at(self, position: int | None) -> frozenset:
        """The names the item at ``position`` may share (all, where not known)."""
        if position is None or self.positions is None:
            return self
        return frozenset(self.positions.get(position, self))


def returned_parameters(function) -> tuple[list, dict]:
    """``function``'s parameters, and those whose array its result may share
    (``return a``, ``return a[1:]``), each with whether it may be returned whole;
    all of them, whole, where it cannot be analysed. (Keys ``AN_ARRAY +
    parameter`` mark those returned as a view that is an array for sure.)"""
    from ppto.errors import PptoError
    from ppto.transform.source import parse_function

    # (not cached: what a closure or a global it calls returns may change)
    key = getattr(function, "__code__", None)
    try:
        parsed = parse_function(function)
    except PptoError:
        return [], {}  # (not analysable: every argument counts, see caller)
    parameters = parsed.parameters
    if key in _in_progress:
        return parameters, _all_returned(parameters)
    returned: dict = {}
    _in_progress.add(key)
    try:
        check(parsed, None, parameters, returns=returned)
    except PptoError:  # (refused itself where it is differentiated)
        returned = _all_returned(parameters)
    finally:
        _in_progress.discard(key)
    return parameters, returned


def _all_returned(parameters) -> dict:
    """Every parameter returned, whole or as an array (to be safe)."""
    returned = dict.fromkeys(parameters, True) | {SHARED_PARTS: {EVERY_PART}}
    returned[PARTS] = None
    return returned | {AN_ARRAY + parameter: True for parameter in parameters}


def _helper_result(value):
    """The ``_Returned`` of ``value`` where it is a call of a user's function in
    the function being checked, else None."""
    return (_HELPER_RESULTS.get() or {}).get(id(value))


def _containers_now() -> Containers:
    """The ``Containers`` of the function being checked (none outside a check)."""
    return _CONTAINERS.get() or Containers()


def _argument(parameter: str) -> str:
    """The caller's object passed as ``parameter``, as a name in ``_Sharing``."""
    return ARGUMENT + parameter


def _joined(*states):
    """What may hold after any of ``states`` (None: a path that never gets there)."""
    reached = [state for state in states if state is not None]
    if not reached:
        return None
    joined = reached[0]
    for state in reached[1:]:
        joined = joined.join(state)
    return joined


def _follow_arrays(statement, arrays: dict) -> None:
    """Update ``arrays`` for the names ``statement`` binds: ``a = x`` and
    ``a = x * 2.0`` with ``x`` an array make ``a`` one (broadcasting never removes an
    axis), and so does ``for a in x`` where ``x`` has two axes or more; anything else
    may be a number (``x[0]``, ``np.sum(x)``)."""
    bound = []  # (name, its fewest axes if surely an array, else None)
    if isinstance(statement, gast.Assign):
        for target in statement.targets:
            bound += [
                (name, _rank(value, arrays) if whole else _element(value, arrays))
                for name, value, whole in paired(target, statement.value)
            ]
    elif isinstance(statement, gast.AugAssign) and isinstance(
        statement.target, gast.Name
    ):  # ``a += x``: a number plus an array is an array
        rank = _most(_rank(statement.target, arrays), _rank(statement.value, arrays))
        bound.append((statement.target.id, rank))
    elif isinstance(statement, gast.For):
        bound += [
            (name, _element(source, arrays) if source is not None else None)
            for name, source in _loop_targets(statement)
        ]
    elif not isinstance(statement, gast.AugAssign):  # (+= keeps what a name was)
        bound += [(name, None) for name in _stored(statement)]
    for name, rank in bound:
        if rank:
            arrays[name] = rank
        else:
            arrays.pop(name, None)


def _element(value, arrays: dict) -> int | None:
    """The fewest axes of an element of ``value`` (``for row in x``, ``u, v = x``)
    where ``value`` is an array of two axes or more, else None."""
    rank = _rank(value, arrays) if value is not None else None
    return rank - 1 if rank and rank > 1 else None


def _rank(value, arrays: dict) -> int | None:
    """The fewest axes ``value`` has if it is surely an array, else None."""
    helper_result = _helper_result(value)
    if helper_result is not None:  # an argument returned whole keeps its axes,
        ranks = [arrays.get(name) for name in helper_result.whole]  # a part of one
        ranks += [  # (an item) may have one fewer
            arrays[name] - 1
            for name in helper_result - helper_result.whole
            if arrays.get(name, 0) > 1
        ]
        return _most(*ranks)
    if isinstance(value, gast.Name):
        return arrays.get(value.id)
    if isinstance(value, gast.Subscript) and not _surely_an_array(value):
        parts = (  # each index takes one axis away at most (x[0] of a matrix)
            value.slice.elts if isinstance(value.slice, gast.Tuple) else [value.slice]
        )
        rank = _rank(value.value, arrays)
        return rank - len(parts) if rank and rank > len(parts) else None
    if _sequence_call(value) in ("list", "tuple", "reversed", "sorted"):
        return _rank(value.args[0], arrays) if len(value.args) == 1 else None
    if _surely_an_array(value) and _viewed(value) & set(arrays):
        if isinstance(value, gast.Subscript):  # slices keep axes, None adds one
            parts = (
                value.slice.elts
                if isinstance(value.slice, gast.Tuple)
                else [value.slice]
            )
            base = _rank(value.value, arrays)
            if base and all(_slice_or_new_axis(part) for part in parts):
                return base + sum(_new_axis(part) for part in parts)
        return 1  # a view (slice, reshape, .T) of an array
    if isinstance(value, gast.BinOp) and not isinstance(value.op, gast.MatMult):
        return _most(_rank(value.left, arrays), _rank(value.right, arrays))
    if isinstance(value, gast.UnaryOp) and not isinstance(value.op, gast.Not):
        return _rank(value.operand, arrays)
    if isinstance(value, gast.IfExp):
        body, orelse = _rank(value.body, arrays), _rank(value.orelse, arrays)
        return min(body, orelse) if body and orelse else None
    if isinstance(value, (gast.List, gast.Tuple)) and value.elts:
        # a sequence holding arrays counts as one more axis: an item (``c[0]``,
        # ``for a in c``) is then taken for an array, which the sequence holds
        items = [rank for rank in (_rank(item, arrays) for item in value.elts) if rank]
        return min(items) + 1 if items else None
    if isinstance(value, gast.Attribute) and value.attr in {"T", "mT"}:
        return _rank(value.value, arrays)
    if isinstance(value, gast.Call) and _broadcasting(value.func):
        return _most(*(_rank(argument, arrays) for argument in value.args))
    return None


def _most(*ranks) -> int | None:
    known = [rank for rank in ranks if rank]
    return max(known) if known else None


def _broadcasting(function) -> bool:
    """``np.tanh``, ``ppto.maximum``, ...: a function whose result has the axes of
    its broadcast arguments, at least."""
    if not (
        isinstance(function, gast.Attribute)
        and isinstance(function.value, gast.Name)
        and function.value.id in MODULES
    ):
        return False
    if function.value.id == "ppto":
        found = OPERATORS.get(ALIASES.get(function.attr, function.attr))
        return getattr(getattr(found, "signature", None), "mode", "") == "broadcast"
    found = getattr(np, function.attr, None)
    return isinstance(found, np.ufunc) and found is not np.matmul


def _flattened(body: list, loops: tuple):
    """``(statement, enclosing loops)`` in the order they appear."""
    for statement in body:
        yield statement, loops
        looping = isinstance(statement, (gast.For, gast.While))
        inner = loops + (statement,) if looping else loops
        for field_name in ("body", "orelse"):
            block = getattr(statement, field_name, None)
            if isinstance(block, list):
                yield from _flattened(block, inner if field_name == "body" else loops)
        if isinstance(statement, gast.Try):  # (in a function run as written)
            for handler in statement.handlers:
                yield from _flattened(handler.body, loops)
            yield from _flattened(statement.finalbody, loops)
        if isinstance(statement, gast.Match):
            for case in statement.cases:
                yield from _flattened(case.body, loops)


def _items_unpacked_into(statement) -> list:
    """The names whose items or elements an unpacking assignment replaces:
    ``p[0], p[1] = p[1], p[0]`` (``_written_in_place`` sees one target alone)."""
    if not isinstance(statement, gast.Assign):
        return []
    found = []
    for target in statement.targets:
        if isinstance(target, (gast.Tuple, gast.List)):
            for node in trees.walk(target):
                if isinstance(node, gast.Subscript):
                    while isinstance(node, gast.Subscript):
                        node = node.value
                    if isinstance(node, gast.Name) and node.id not in found:
                        found.append(node.id)
    return found


def _written_in_place(statement) -> str | None:
    """The name whose array ``statement`` changes in place: ``a += ...``,
    ``a[...] = ...``, ``a[...] += ...``, or an in-place method called on it or on
    a view of it as a statement (``a[0].fill(0.0)``, ``a.T.sort()``)."""
    called = _in_place_method_call(statement)
    if called is not None:
        return called
    if isinstance(statement, gast.AugAssign):
        target = statement.target
    elif isinstance(statement, gast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if not isinstance(target, gast.Subscript):
            return None
    else:
        return None
    while isinstance(target, gast.Subscript):
        target = target.value
    return target.id if isinstance(target, gast.Name) else None


def _in_place_method_call(statement) -> str | None:
    """The name ``a`` where ``statement`` is a call of an array's in-place method
    on ``a`` or a view of it (``a[0].fill(0.0)``), else None."""
    if not (
        isinstance(statement, gast.Expr)
        and isinstance(statement.value, gast.Call)
        and isinstance(statement.value.func, gast.Attribute)
        and statement.value.func.attr in ARRAY_CHANGES
    ):
        return None
    viewed = sorted(_viewed(statement.value.func.value))
    return viewed[0] if len(viewed) == 1 else None


def _first_marked(shared: set, marker: str) -> str | None:
    """The first parameter (by name) of the ``marker + parameter`` in ``shared``."""
    marked = sorted(n for n in shared if n.startswith(marker))
    return marked[0][len(marker) :] if marked else None


def _held_from_outside(state: _Sharing, parameter: str, marker: str, known) -> None:
    """Seed ``state`` with ``parameter`` holding an object from outside the
    function, named ``marker``: a write into it is a write into that object."""
    state.bases[parameter] = {marker}
    state.same[parameter] = {marker}
    if parameter not in known:  # (perhaps an array: ``+=`` writes into it)
        state.views[parameter] = {marker}


def _sharing(name: str, bases: dict) -> set:
    """The other names that may share ``name``'s array."""
    mine = bases.get(name, set()) | {name}
    return {
        other
        for other, theirs in bases.items()
        if other != name and (theirs | {other}) & mine
    } | (mine - {name})


def _bind(statement, state: _Sharing) -> None:
    """Update ``state`` for the names ``statement`` binds: each target of
    ``a = b = value``, the names of ``a, b = y, z`` pairwise, and a loop's target
    (an element of what it runs over)."""
    replaced = _items_after_change(statement, state)
    _mark_item_held_twice(statement, state)
    _lists_of_numbers_changed(statement, state)
    pairs = []
    for name in _changed_items(statement):  # its items are not those written
        for other in {name} | state.same.get(name, set()):  # (nor another name's)
            state.items.pop(other, None)
            state.numbered.pop(other, None)
    for name, (table, items) in replaced.items():  # (``c[0] = v``: known still)
        for other in {name} | state.same.get(name, set()):
            if ":" not in other:  # (not the caller's object, nor a marker)
                getattr(state, table)[other] = items
    for name in _passed_to_functions(statement):
        state.handed[name] = statement
    grown = _grown_list(statement)
    if grown is not None:  # ``c.append(y)``: c holds y's array from now on
        name, value = grown
        origins = _viewed(value)
        state.bases.setdefault(name, set()).update(
            origins, *(state.bases.get(o, set()) for o in origins)
        )
        rank = _rank(value, state.arrays)
        if rank:
            held = rank if statement.value.func.attr == "extend" else rank + 1
            state.arrays[name] = min(held, state.arrays.get(name, held))
        return
    if isinstance(statement, gast.Assign):
        for target in statement.targets:
            pairs += paired(target, statement.value)
    elif isinstance(statement, gast.AnnAssign) and statement.value is not None:
        pairs += paired(statement.target, statement.value)  # ``row: T = m[-1]``
    elif isinstance(statement, gast.For):
        pairs += [(n, source, False) for n, source in _loop_targets(statement)]
    elif isinstance(statement, gast.AugAssign) and isinstance(
        statement.target, gast.Name
    ):
        name = statement.target.id
        if name not in state.arrays and not state.exact.get(name):
            _forget(name, state.bases)  # a number: += makes it a new value
            _forget(name, state.views)
    elif not isinstance(statement, (gast.While, gast.AugAssign)):
        pairs += [(name, None, False) for name in _stored(statement)]
    bases, views, same = state.bases, state.views, state.same
    written_out = _items_written_out(statement, state)
    taken_apart = _items_taken(statement, state)
    unpacked = _unpacked_positions(statement)
    # ``a, b = b, a`` and ``t = t[1:]``: every value is read before any name is
    # bound, so a value naming a rebound name reads its former array (FORMER +
    # name), from the state as it was (``old``); t = t[1:] forgot that t's
    # former array was u's: t += 1 then wrote into u unseen
    rebound = {name for name, _, _ in pairs}
    simultaneous = any(
        _viewed(value) & rebound for _, value, _ in pairs if value is not None
    )
    old = _formerly(state, rebound) if simultaneous else state
    for name, value, whole in pairs:
        _forget(name, bases, simultaneous)
        _forget(name, views, simultaneous)
        _forget(name, same, simultaneous)
        state.items.pop(name, None)
        state.numbered.pop(name, None)
        state.moved.pop(name, None)
        taken = value.value if isinstance(value, gast.Subscript) else value
        if isinstance(taken, gast.Name) and taken.id in state.handed:
            if not (whole and taken is value):  # (an item of it, not the list)
                state.moved[name] = taken.id
        if (
            whole
            and isinstance(value, gast.Name)
            and value.id != name
            and _exact_rank(value, state.exact) != 0  # (a number is no object
            # another name's ``+=`` changes)
        ):
            source = _renamed({value.id}, rebound if simultaneous else ()).pop()
            group = old.same.get(source, set()) | {source}
            same[name] = set(group)
            for other in group:
                same.setdefault(other, set()).add(name)
        if (
            isinstance(value, gast.Subscript) or _compared(value) is not None
        ) and _exact_rank(value, state.exact) == 0:
            continue  # a number (x[0] of a vector): it shares no memory
        if not whole and _exact_rank(value, state.exact) == 1:
            continue  # (``a, b = y`` of a vector: numbers, too)
        if _number_item(value, whole, state.numbers):
            continue  # (``h, w = size``, ``size[i]`` of a tuple of numbers)
        origins = _viewed(value) if value is not None else set()
        returned = _helper_result(value)
        if returned is not None and not whole:  # ``a, b = pair(y)``: a's item's
            origins = set(returned.at(unpacked.get(name)))
        origins = _renamed(origins, rebound if simultaneous else ())
        if origins:
            memory = set().union(*(old.bases.get(o, set()) for o in origins))
            bases[name] = memory | origins
            # ``a = helper(y)`` with ``return np.expand_dims(y, 0)``, ``a, b =
            # helper(y)`` with ``return y[-1], y * y``: a may be a view of y, which
            # ``a += 1`` would write into (an unpacked item's rank is not known)
            viewed = returned is not None and (not whole or returned.arrays)
            # ``a, b = y``: rows of y, views, unless y has one axis for sure (then
            # numbers); so is ``c = y[2]`` (a number was skipped above); ``a, b =
            # np.split(y, 2)``: views of y
            rows = not whole and returned is None
            rank = _exact_rank(value, state.exact) if rows else None
            row = (whole and isinstance(value, gast.Subscript)) or (rows and rank != 1)
            if row or (whole and _surely_an_array(value)) or viewed:
                views[name] = set().union(*(old.views.get(o, set()) for o in origins))
                views[name] |= origins
            elif whole:  # ``c = r``, ``c = max(r, s)``: a view where r may be one
                objects = _same_objects(value)
                objects = _renamed(objects, rebound if simultaneous else ())
                held = {o for o in objects if o in old.views}
                if held:
                    views[name] = held.union(*(old.views[o] for o in held))
    for name, value, whole in pairs:  # ``b = self.w``, ``h = self.hs[0]``: the
        # object's (``for h in self.hs``: items of it)
        held = _object_part(value, whole) if value is not None else None
        if held is not None:
            marker, an_array = held
            for table in (bases, same, views) if an_array else (bases, same):
                table.setdefault(name, set()).add(marker)
    if isinstance(statement, gast.For):
        for name, source in _loop_targets(statement):
            if number_sequence(source, state.numbers):
                continue  # (``for s in size``: numbers)
            rank = _exact_rank(source, state.exact) if source is not None else 0
            origins = _viewed(source) if source is not None else set()
            if origins and (rank is None or rank >= 2):
                # an item of an array of two axes or more is a view of a row (as
                # ``+=`` writes into it), and so may be one of an unknown array
                views[name] = set().union(*(views.get(o, set()) for o in origins))
                views[name] |= origins
    for name, result in _linked_parts(statement, state):
        # ``a, b = pair(W)`` with ``return t, t.reshape(-1)``: a and b may share
        # (and be arrays, as for any item of a result: in views too)
        bases.setdefault(name, set()).add(result)
        views.setdefault(name, set()).add(result)
    for name, value, whole in pairs:  # ``r[0]``, ``a, b = r``: in r's result too
        results = {
            shared
            for origin in (_viewed(value) if value is not None else ())
            for shared in bases.get(origin, ())
            if shared.startswith(RESULT)
        }
        if results and not (whole and isinstance(value, gast.Name)):
            views.setdefault(name, set()).update(results)
    for name, value, whole in pairs:  # ``ys = same(hs)``: one object, two names
        helper_result = _helper_result(value)
        if helper_result is not None:  # (``ys, s = both(hs)``: either, to be safe)
            at = helper_result.at(None if whole else unpacked.get(name))
            for other in (helper_result.whole & at) - {name}:
                same.setdefault(name, set()).add(other)
                same.setdefault(other, set()).add(name)
    chained = isinstance(statement, gast.Assign) and len(statement.targets) > 1
    if chained and _exact_rank(statement.value, state.exact) != 0:
        # ``hs = gs = []``: one object, two names (``a = b = 0.0``: a number)
        names = {t.id for t in statement.targets if isinstance(t, gast.Name)}
        for name in names:
            same[name] = same.get(name, set()) | (names - {name})
    if chained and _rank(statement.value, state.arrays):
        names = [t.id for t in statement.targets if isinstance(t, gast.Name)]
        for name in names:  # ``a = b = x * 1.0``: one new array, two names
            bases[name] = bases.get(name, set()) | (set(names) - {name})
            views[name] = views.get(name, set()) | (set(names) - {name})
    for name, memory in written_out.items():  # ``params = [y, b]``
        state.items[name] = memory
        bases[name] = bases.get(name, set()).union(*memory)
    for name, memory in taken_apart.items():  # ``y, b = params``, ``params[1]``
        # (the value holds its items: a write is seen there, and through a view
        # of the value made afterwards, ``c = y[2]; z = y.reshape(-1)``)
        for table in (bases, views) if name in views else (bases,):
            table[name] = set(memory)
            for held in memory:
                if held.startswith(ITEM):
                    table.setdefault(held.split(":")[1], set()).add(held)
    _follow_arrays(statement, state.arrays)
    _follow_exact(statement, pairs, state.exact)
    _follow_numbers(statement, pairs, state)


# attributes that hold no object a write could reach: numbers and tuples of them
# (an array's ``z.shape``, ``z.ndim``)
NOT_HELD = {"shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides"}
IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), np.generic)
ARRAYS = (np.ndarray, Tensor)


def _object_part(value, whole: bool = True) -> tuple | None:
    """``(HELD marker, whether it may be an array)`` where ``value`` is (a part
    or view of) what an object holds in an attribute (``self.w``, ``self.hs[0]``,
    ``k.w[1:]``, ``self.w.T``, ``getattr(self, "w")``; ``whole``: False for an
    item of it, ``for h in self.hs``), unless it is known to be a number, a
    string or a tuple of them, a function or a module (``np.random``); None
    else. The marker names the attribute read, as written (``held:self.w``). An
    attribute not known here (of an argument, ``k.w``) may be an array, which
    ``+=`` writes into."""
    node, attribute, item = value, None, not whole
    while True:
        if isinstance(node, gast.Subscript):
            item = item or attribute is None
            node = node.value
        elif _getattr_written_out(node):  # (as methods.py will read it: self.w)
            node = gast.Attribute(node.args[0], node.args[1].value, gast.Load())
        elif isinstance(node, gast.Attribute):
            if node.attr in NOT_HELD:
                return None
            if node.attr not in VIEW_ATTRIBUTES and attribute is None:
                attribute = node  # (the outermost: self.layer.W of self.layer.W[0])
            node = node.value
        elif (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and node.func.attr in VIEW_CALLS
        ):
            node = node.func.value  # (self.w.reshape(2, 2))
        else:
            break
    if attribute is None or not isinstance(node, gast.Name):
        return None
    reader = _OBJECT_READER.get()
    found, held = reader(attribute) if reader is not None else (False, None)
    if not found:
        return HELD + gast.unparse(attribute).strip(), True
    if _immutable(held) or isinstance(held, types.ModuleType):
        return None
    if callable(held) and not isinstance(held, ARRAYS):
        return None  # (a method or function: called, not written into)
    an_array = isinstance(held, ARRAYS) or (
        item
        and isinstance(held, (list, tuple))
        and any(isinstance(one, ARRAYS) for one in held)
    )
    return HELD + gast.unparse(attribute).strip(), an_array


def _getattr_written_out(node) -> bool:
    """Whether ``node`` is ``getattr(obj, "name")`` with the name written out."""
    return (
        isinstance(node, gast.Call)
        and isinstance(node.func, gast.Name)
        and node.func.id == "getattr"
        and len(node.args) == 2
        and isinstance(node.args[1], gast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _immutable(value) -> bool:
    if isinstance(value, tuple):
        return all(map(_immutable, value))
    return isinstance(value, IMMUTABLE)


def _mark_item_held_twice(statement, state: _Sharing) -> None:
    """``hs[1] = hs[0]``, ``hs.append(y)`` with y in hs already, ``hs += [hs[0]]``
    (or ``d["b"] = d["a"]``): the container may now hold one array at two
    places, as ``[y, y]`` does; mark its items as ones that may share (see
    ``_items_may_share``), so that a write into one of them read afterwards
    through another is refused."""
    put = _items_put(statement)
    if put is None:
        return
    name, values = put
    if name not in _containers_now().names:
        return  # (``y[1] = y[0]`` on an array copies the row)
    held = {name} | state.bases.get(name, set()) | state.same.get(name, set())
    memories = [_memory(value, state) for value in values]
    if any(memory & held for memory in memories) or any(
        first & second
        for n, first in enumerate(memories)
        for second in memories[n + 1 :]
    ):
        for other in {name} | state.same.get(name, set()):
            if ":" not in other:
                marker = f"{RESULT}{id(statement)}:items:{other}"
                state.bases.setdefault(other, set()).add(marker)


def _items_put(statement) -> tuple | None:
    """``(container name, the values put in it)`` for ``c[k] = v``,
    ``c.append(v)``, ``c.insert(i, v)``, ``c.extend([v, w])`` and ``c += [v,
    w]`` (a sequence not written out: itself, whose items it may hold)."""
    grown = _grown_list(statement)
    if grown is not None:
        name, value = grown
        extended = statement.value.func.attr == "extend"
        return name, (value.elts if extended and _literal_sequence(value) else [value])
    if isinstance(statement, gast.AugAssign) and isinstance(
        statement.target, gast.Name
    ):
        value = statement.value
        if not _sequence_value(value):
            return None
        return statement.target.id, (
            value.elts if _literal_sequence(value) else [value]
        )
    if isinstance(statement, gast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name):
            return target.value.id, [statement.value]
    return None


def _unpacked_positions(statement) -> dict:
    """``{name: position}`` for each name ``a, (b, c) = call(...)`` unpacks from
    an item of a call's result (b and c: 1), where no item is starred."""
    if not isinstance(statement, gast.Assign) or _literal_sequence(statement.value):
        return {}
    positions = {}
    for target in statement.targets:
        if not positions_known(target):
            continue
        for position, item in enumerate(target.elts):
            for name in _stored(item):
                positions[name] = position
    return positions


def _items_written_out(statement, state: _Sharing) -> dict:
    """``{name: the memory of each item}`` for ``name = [a, b]`` (or a tuple, or
    such sequences joined: ``(w,) + (z,)``)."""
    name = single_target(statement)
    items = _written_out(statement.value) if name is not None else None
    if items is None:
        return {}
    return {
        name: tuple(
            frozenset(_memory(item, state) | {f"{ITEM}{name}:{position}"})
            for position, item in enumerate(items)
        )
    }


def _written_out(value) -> list | None:
    """The items of ``value``, a list or tuple written out or several joined with
    ``+`` (``(w,) + (z,)``: w then z), each at its position; else None."""
    if positions_known(value):
        return list(value.elts)
    if isinstance(value, gast.BinOp) and isinstance(value.op, gast.Add):
        left, right = _written_out(value.left), _written_out(value.right)
        return None if left is None or right is None else left + right
    return None


def _items_taken(statement, state: _Sharing) -> dict:
    """``{name: the memory of the item it is bound to}`` for the names bound to
    items of a list written out, by position: ``y, b = params`` or ``b =
    params[1]`` (each apart from the other items); so too of a value holding no
    other name's arrays (a parameter, a new array), by a position counted from
    the start (rows of an array never overlap, nor do a tuple's items, unless the
    caller put one object in twice)."""
    if not isinstance(statement, gast.Assign) or len(statement.targets) != 1:
        return {}
    target, value = statement.targets[0], statement.value
    if _exact_rank(value, state.exact) == 0:  # (``t = y[0]`` of a vector: a
        return {}  # number, which shares no memory: a swap through it is fine)
    if isinstance(value, gast.Subscript) and isinstance(target, gast.Name):
        position = _whole_number(value.slice)
        if position is None or not isinstance(value.value, gast.Name):
            return {}
        base = value.value.id
        memory = state.items.get(base, ())
        if base in state.numbered and position >= 0:  # (else a number)
            return {target.id: state.numbered[base].get(position, frozenset())}
        if not memory and position >= 0 and _holds_no_others(base, state):
            return {target.id: frozenset({f"{ITEM}{base}:{position}"})}
        if not -len(memory) <= position < len(memory):
            return {}
        return {target.id: memory[position]}
    if not (
        isinstance(value, gast.Name)
        and isinstance(target, (gast.Tuple, gast.List))
        and all(isinstance(item, gast.Name) for item in target.elts)
    ):
        return {}
    if state.exact.get(value.id) == 1:  # (``a, b = y`` of a vector: numbers)
        return {}
    memory = state.items.get(value.id, ())
    if value.id in state.numbered:  # (each item not replaced: a number)
        replaced = state.numbered[value.id]
        memory = [replaced.get(n, frozenset()) for n in range(len(target.elts))]
    if not memory and _holds_no_others(value.id, state):
        memory = [frozenset({f"{ITEM}{value.id}:{n}"}) for n in range(len(target.elts))]
    if len(memory) != len(target.elts):
        return {}
    return {item.id: held for item, held in zip(target.elts, memory)}


def _items_after_change(statement, state: _Sharing) -> dict:
    """For ``c[k] = v`` (k a whole number written out) on a list whose items are
    known by position, ``{c: (the field of state, its items after)}``: a list
    written out (``items``) has v's memory at k, the others as they were; a list of
    numbers (``numbers``, ``numbered``) has it at k (from the start), numbers
    elsewhere. So too for ``c.insert(k, v)`` and ``c.append(v)`` on a list written
    out. Else empty: what the list holds is then not known by position."""
    grown = _grown_list(statement)
    if grown is not None:
        return _items_after_growing(statement, state)
    if not (isinstance(statement, gast.Assign) and len(statement.targets) == 1):
        return {}
    target = statement.targets[0]
    if not (isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name)):
        return {}
    name, position = target.value.id, _whole_number(target.slice)
    if position is None:
        return {}
    known = state.items.get(name)
    if known is not None and -len(known) <= position < len(known):
        position %= len(known)
    elif position < 0 or not (name in state.numbers or name in state.numbered):
        return {}
    marker = f"{ITEM}{name}:{id(statement)}"  # (the item put there, not the old)
    memory = frozenset(_memory(statement.value, state) | {marker})
    if known is not None:
        return {name: ("items", known[:position] + (memory,) + known[position + 1 :])}
    return {name: ("numbered", {**state.numbered.get(name, {}), position: memory})}


def _stored_after_its_change(statement, state: _Sharing, listed: set):
    """``(item, its target, an earlier target)`` for an assignment to a tuple of
    targets whose value's item may be a view of an array that the store into an
    earlier target writes into (``Y[0], Y[1] = Y[1], Y[0]``); else None. A list's
    item replaced (among ``listed``) writes into no array."""
    if not (isinstance(statement, gast.Assign) and len(statement.targets) == 1):
        return None
    target, value = statement.targets[0], statement.value
    if not isinstance(target, (gast.Tuple, gast.List)):
        return None
    items = target.elts
    taken = value.elts if positions_known(value) else [value] * len(items)
    if len(taken) != len(items):
        return None
    for position, (item, stored_into) in enumerate(zip(taken, items)):
        if _numbers_only(item, state.exact):
            continue  # (a number: NumPy's ``y[0]`` of a vector is a copy)
        memory = _memory(item, state)
        for earlier in items[:position]:
            base = earlier
            while isinstance(base, gast.Subscript):
                base = base.value
            if base is earlier or not isinstance(base, gast.Name):
                continue  # (a name rebound writes into no array)
            if base.id in listed:
                continue
            if memory & ({base.id} | _sharing(base.id, state.bases)):
                return item, stored_into, earlier
    return None


def _numbers_only(value, exact: dict) -> bool:
    """Whether ``value`` is a number, or a tuple or list written out of numbers
    (``(y[0], y[2])`` of a vector): nothing in it is a view."""
    if _literal_sequence(value):
        return all(_numbers_only(item, exact) for item in value.elts)
    return _exact_rank(value, exact) == 0


def _items_after_growing(statement, state: _Sharing) -> dict:
    """``_items_after_change`` for ``c.insert(k, v)`` (k a whole number written
    out) or ``c.append(v)`` on a list written out: v's memory at its place."""
    call = statement.value
    name, method = call.func.value.id, call.func.attr
    known = state.items.get(name)
    if known is None or method == "extend":
        return {}
    position = len(known)
    if method == "insert":
        position = _whole_number(call.args[0]) if len(call.args) == 2 else None
        if position is None:
            return {}
        if position < 0:  # (before the item there, as list.insert does)
            position = max(len(known) + position, 0)
        position = min(position, len(known))
    marker = f"{ITEM}{name}:{id(statement)}"
    memory = frozenset(_memory(call.args[-1], state) | {marker})
    return {name: ("items", known[:position] + (memory,) + known[position:])}


def _holds_no_others(name: str, state: _Sharing) -> bool:
    """Whether ``name``'s value holds no other name's arrays (only its own items
    taken apart so far), and no other name views it (``z = y[1:]``, whose write
    reaches ``y[1]``): its items by position are its own."""
    own, caller = f"{ITEM}{name}:", PARAMETER + name  # (the caller's object)
    viewed = any(
        {name, caller} & held for other, held in state.bases.items() if other != name
    )
    return (
        not viewed
        and state.same.get(name, set()) <= {caller}
        and all(
            held.startswith(own) or held == caller for held in state.bases.get(name, ())
        )
    )


def _whole_number(node) -> int | None:
    """The whole number ``node`` writes out (``1``, ``-1``), else None."""
    value = literal(node)
    return value if type(value) is int else None


def _changed_items(statement) -> set:
    """The names of lists whose items ``statement`` may change or move: a method
    (``c.append(y)``, ``c.pop()``) or an item replaced (``c[0] = v``)."""
    changed = {name for _, name in _changed_lists(statement)}
    # a list handed to a function may come back changed (a helper swapping its
    # items): what it holds is then unknown
    changed |= _passed_to_functions(statement)
    targets = []
    if isinstance(statement, gast.Assign):
        targets = statement.targets
    elif isinstance(statement, gast.AugAssign):
        targets = [statement.target]
    for target in targets:
        for node in trees.walk(target):
            if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name):
                changed.add(node.value.id)
    return changed


# builtins that read a list without changing it
_READING_BUILTINS = frozenset(
    {"len", "enumerate", "zip", "sum", "max", "min", "sorted", "reversed", "iter",
     "list", "tuple", "range", "isinstance", "float", "int", "abs", "print", "all",
     "any", "map", "filter"}
)  # fmt: skip


def _passed_to_functions(statement) -> set:
    """The names ``statement`` passes whole to a call that may change them: not a
    module's function (``np.stack(c)``) nor a reading builtin (``len(c)``)."""
    parts = _headers(statement)
    found = set()
    for part in parts:
        for node in trees.walk(part):
            if not isinstance(node, gast.Call):
                continue
            function = node.func
            if isinstance(function, gast.Name) and function.id in _READING_BUILTINS:
                continue
            if isinstance(function, gast.Attribute):
                continue  # (a module's function, or a method: _changed_lists)
            arguments = list(node.args) + [k.value for k in node.keywords]
            for argument in arguments:
                if isinstance(argument, gast.Starred):
                    argument = argument.value
                if isinstance(argument, gast.Name):
                    found.add(argument.id)
    return found


def _headers(statement) -> list:
    """What of ``statement`` runs as it does: a compound statement's header."""
    if isinstance(statement, (gast.If, gast.While)):
        return [statement.test]
    if isinstance(statement, gast.For):
        return [statement.iter]
    return [statement]


def _follow_exact(statement, pairs: list, exact: dict) -> None:
    """Update ``exact`` (the names whose number of axes is known) for ``pairs``."""
    if isinstance(statement, gast.AugAssign) and isinstance(
        statement.target, gast.Name
    ):
        exact.pop(statement.target.id, None)  # (``a += x`` may add axes)
    known = {
        name: _exact_rank(value, exact) if whole else None
        for name, value, whole in pairs
    }
    for name, rank in known.items():
        if rank is None:
            exact.pop(name, None)
        else:
            exact[name] = rank


def _follow_numbers(statement, pairs: list, state: _Sharing) -> None:
    """Update ``state.numbers`` (and ``state.exact``: an item of a tuple of
    numbers has no axes) for ``pairs``: ``t = size``, ``t = size[1:]`` and
    ``size += (4,)`` hold numbers too, anything else bound to a name does not."""
    numbers = state.numbers
    held = {
        name
        for name, value, whole in pairs
        if whole and number_sequence(value, numbers)
    }
    for name, value, whole in pairs:
        if _number_item(value, whole, numbers):
            state.exact[name] = 0
    numbers.difference_update(name for name, _, _ in pairs)
    numbers |= held


def _hold_stored_items(statement, state: _Sharing, lists: set) -> None:
    """``c[0] = y`` with ``c`` perhaps a list (among ``lists``, not known to be an
    array): c holds y's array from now on, as after ``c.append(y)``, and so does
    every other name for c. Then ``h, w = c`` (or ``h = c[0]``, ``for h in c``)
    and ``h += 1`` write into y's array, which a later read of y must see."""
    if not isinstance(statement, gast.Assign):
        return  # (``c[0] += y`` makes a new array: c[0] + y)
    for target in statement.targets:
        for name, value in _items_stored(target, statement.value):
            if name not in lists or name in state.arrays or state.exact.get(name):
                continue
            origins = _viewed(value)
            if not origins:
                continue
            held = origins.union(*(state.bases.get(o, set()) for o in origins))
            for holder in {name} | state.same.get(name, set()):
                if not holder.startswith(ARGUMENT):
                    state.bases.setdefault(holder, set()).update(held)


def _items_stored(target, value) -> list:
    """``(list name, the value put in it)`` for each item ``target = value``
    replaces: ``c[0] = y``, ``c[0], d[1] = y, z`` pairwise, ``rows[0][1] = y``
    (in rows, held by one of its items); ``c[0], c[1] = pair``: all of pair."""
    if isinstance(target, gast.Subscript):
        base = target.value
        while isinstance(base, gast.Subscript):
            base = base.value
        return [(base.id, value)] if isinstance(base, gast.Name) else []
    if isinstance(target, (gast.Tuple, gast.List)):
        if isinstance(value, (gast.Tuple, gast.List)) and len(value.elts) == len(
            target.elts
        ):
            pairs = zip(target.elts, value.elts)
        else:
            pairs = ((item, value) for item in target.elts)
        return [found for t, v in pairs for found in _items_stored(t, v)]
    return []


def _lists_of_numbers_changed(statement, state: _Sharing) -> None:
    """Drop from ``state.numbers`` a list ``statement`` may put something else in,
    with every other name for it: ``size.append(y)``, ``size[0] = y``, ``t += [y]``
    with ``t = size`` (``size += (4,)`` keeps numbers)."""
    numbers = state.numbers
    if not numbers:
        return
    changed = {name for _, name in _changed_lists(statement)}
    if isinstance(statement, (gast.Assign, gast.AnnAssign, gast.AugAssign)):
        targets = getattr(statement, "targets", None) or [statement.target]
        for node in (n for t in targets for n in trees.walk(t)):
            if isinstance(node, gast.Subscript) and isinstance(node.ctx, gast.Store):
                while isinstance(node, gast.Subscript):
                    node = node.value
                if isinstance(node, gast.Name):
                    changed.add(node.id)
    if (
        isinstance(statement, gast.AugAssign)
        and isinstance(statement.target, gast.Name)
        and not number_sequence(statement.value, numbers)
    ):
        changed.add(statement.target.id)
    for name in changed:
        numbers -= {name} | state.same.get(name, set())


def _number_item(value, whole: bool, numbers: set) -> bool:
    """Whether a name bound to ``value`` (all of it, or an item: ``whole``) gets
    an item of a tuple of numbers: ``h, w = size``, ``for s in size``, ``size[i]``,
    ``max(size)``."""
    if value is None:
        return False
    if not whole:
        return number_sequence(value, numbers)
    if isinstance(value, gast.Subscript) and not isinstance(value.slice, gast.Slice):
        return number_sequence(value.value, numbers)
    compared = _compared(value)
    return (
        compared is not None
        and len(compared) == 1
        and number_sequence(compared[0], numbers)
    )


def _rebinds_a_number(statement: gast.AugAssign, state: _Sharing) -> bool:
    """Whether ``t += v`` surely rebinds ``t`` to a new number, changing nothing
    in place: ``t`` holds a Python number or a tuple or list of them (the caller
    passed one, ``t = size``) and ``v`` has no axes, which a tuple or list would
    refuse (a list extends in place only by what it can iterate); not ``t *= n``,
    which repeats a list in place."""
    return (
        statement.target.id in state.numbers
        and not isinstance(statement.op, gast.Mult)
        and _exact_rank(statement.value, state.exact) == 0
    )


def _exact_rank(value, exact: dict) -> int | None:
    """The number of axes of ``value`` where it is known: a name whose number is,
    or such a name indexed by whole numbers written out (``x[0]``, ``w[1, 2]``);
    0 for a number (see ``_surely_a_number``)."""
    if _surely_a_number(value, exact):
        return 0
    if isinstance(value, gast.Name):
        return exact.get(value.id)
    if isinstance(value, gast.Constant) and type(value.value) in (int, float):
        return 0
    if isinstance(value, gast.BinOp) and not isinstance(value.op, gast.MatMult):
        sides = (_exact_rank(value.left, exact), _exact_rank(value.right, exact))
        return None if None in sides else max(sides)  # (``v * 1.0``: v's)
    compared = _compared(value)
    if compared is not None and len(compared) > 1:  # ``max(x[0], x[1])``: one of
        ranks = {_exact_rank(item, exact) for item in compared}
        return ranks.pop() if len(ranks) == 1 else None
    if isinstance(value, gast.Subscript) and isinstance(value.value, gast.Name):
        parts = (
            value.slice.elts if isinstance(value.slice, gast.Tuple) else [value.slice]
        )
        # (an index that is a number: ``y[i]``, ``y[i + 1]``; a whole number
        # takes an axis away, a bool or an index array makes a copy)
        whole = all(_exact_rank(part, exact) == 0 for part in parts)
        rank = exact.get(value.value.id)
        if whole and rank is not None and rank >= len(parts):
            return rank - len(parts)
    copied = _copied_array(value)
    if copied is not None:  # (``y = x.copy()``: x's)
        return _exact_rank(copied, exact)
    return _reshaped_rank(value, exact)


def _copied_array(value):
    """``a`` of ``a.copy()``, ``a.astype(t)`` or ``np.copy(a)``; else None."""
    if not (isinstance(value, gast.Call) and isinstance(value.func, gast.Attribute)):
        return None
    owner, method = value.func.value, value.func.attr
    if getattr(owner, "id", None) in ("np", "numpy"):
        return value.args[0] if method == "copy" and len(value.args) == 1 else None
    return owner if method in ("copy", "astype") else None


def _reshaped_rank(value, exact: dict) -> int | None:
    """The number of axes of ``np.reshape(a, (2, -1))`` or ``a.reshape(2, n)`` (a
    of a known number of axes), a shape written out of numbers; else None."""
    if not (
        isinstance(value, gast.Call)
        and not value.keywords
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "reshape"
    ):
        return None
    owner = value.func.value
    if getattr(owner, "id", None) in ("np", "numpy"):
        shape = value.args[1:] if len(value.args) == 2 else []
    elif _exact_rank(owner, exact) is not None:
        shape = value.args
    else:
        return None
    if len(shape) == 1 and _literal_sequence(shape[0]):
        shape = shape[0].elts
    if shape and all(_exact_rank(part, exact) == 0 for part in shape):
        return len(shape)
    return None


# NumPy's reductions, which make a number of a whole array (given no axis)
WHOLE_REDUCTIONS = {
    "sum", "mean", "prod", "max", "min", "amax", "amin", "std", "var", "median",
    "nansum", "nanmean", "nanprod", "nanmax", "nanmin", "nanstd", "nanvar",
}  # fmt: skip


def _surely_a_number(value, exact: dict) -> bool:
    """Whether ``value`` is a number, never an array (a 0-d one too, which ``+=``
    writes into): a number written out, ``float(v)``, a whole array reduced
    (``np.sum(x)``, ``x.item()``), or arithmetic on numbers (NumPy's operators
    make a number of 0-d arrays too)."""
    if isinstance(value, gast.Constant):
        return type(value.value) in (int, float, bool)
    if isinstance(value, gast.BinOp) and not isinstance(value.op, gast.MatMult):
        return _exact_rank(value.left, exact) == 0 == _exact_rank(value.right, exact)
    if isinstance(value, gast.UnaryOp):
        return _exact_rank(value.operand, exact) == 0
    if not isinstance(value, gast.Call) or any(
        keyword.arg != "keepdims" or literal(keyword.value) is not False
        for keyword in value.keywords
    ):
        return False
    function, count = value.func, len(value.args)
    if isinstance(function, gast.Name):
        return function.id in ("float", "int", "bool", "len") and count == 1
    return isinstance(function, gast.Attribute) and (
        (function.attr == "item" and count == 0)
        or (
            function.attr in WHOLE_REDUCTIONS
            and count == 1
            and getattr(function.value, "id", None) in ("np", "numpy")
        )
    )


def _stored(node) -> list:
    return [
        n.id
        for n in trees.walk(node)
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)
    ]


def _surely_an_array(value) -> bool:
    """A view that is an array whatever its base held: a slice, ``.T``, a reshape
    (not a bare name or ``x[0]``, which may be numbers, nor what a user's function
    returns)."""
    if _helper_result(value) is not None:
        return False
    if isinstance(value, gast.IfExp):
        return _surely_an_array(value.body) and _surely_an_array(value.orelse)
    compared = _compared(value)
    if compared is not None:  # ``max(a, b)`` is a or b, an item of ``max(c)``
        return len(compared) > 1 and all(map(_surely_an_array, compared))
    if isinstance(value, gast.Subscript):
        parts = (
            value.slice.elts if isinstance(value.slice, gast.Tuple) else [value.slice]
        )
        return any(isinstance(part, gast.Slice) for part in parts)
    if _shallow_copy(value):  # (a list's copy holds its arrays: is none)
        return False
    return isinstance(value, (gast.Attribute, gast.Call))


def _forget(name: str, bases: dict, always: bool = False) -> None:
    """``name`` is bound to another array now: what it shared is no more. Names
    that held its old array keep sharing it with each other (``u = t; v = t[1:];
    t = ...``: v is still a view of u's array), through ``FORMER`` + name; with
    ``always``, a single one as well (another name bound at once may take the
    old array: ``a, b = b, a``)."""
    bases.pop(name, None)
    holders = [shared for shared in bases.values() if name in shared]
    for shared in holders:
        shared.discard(name)
        if always or len(holders) > 1:
            shared.add(FORMER + name)


def _renamed(names: set, rebound) -> set:
    """``names`` with each of ``rebound`` standing for its former array."""
    return {FORMER + name if name in rebound else name for name in names}


def _formerly(state: _Sharing, rebound: set) -> _Sharing:
    """A copy of ``state`` in which each of ``rebound`` is its former array."""
    old = state.copy()
    for table in (old.bases, old.views, old.same):
        for name in rebound & set(table):
            table[FORMER + name] = table.pop(name)
        for key, shared in table.items():
            table[key] = _renamed(shared, rebound)
    return old


def may_view(value) -> set:
    """The names ``value`` may be (a part of) the array of, outside a check: a
    name itself, or a view of it (a subscript, ``.T``, ``z.reshape(2, 2)``), so
    that what changes ``value`` in place changes them."""
    return _viewed(value)


def _viewed(value) -> set:
    """The names ``value`` may be (a part of) the array of."""
    helper_result = _helper_result(value)
    if helper_result is not None:  # ``z = ident(y)``: the arguments it may return
        return helper_result
    if isinstance(value, gast.Name):
        return {value.id}
    if isinstance(value, gast.Subscript):
        if _index_array_written_out(value.slice):
            return set()  # (NumPy copies: y[[0, 2]], y[:, np.array([1, 3])])
        return _viewed(value.value)
    if isinstance(value, gast.Attribute) and value.attr in VIEW_ATTRIBUTES:
        return _viewed(value.value)
    if isinstance(value, gast.IfExp):
        return _viewed(value.body) | _viewed(value.orelse)
    if isinstance(value, (gast.List, gast.Tuple)):  # holds them
        return set().union(set(), *(_viewed(item) for item in value.elts))
    if _sequence_operation(value):  # ``[y] * 2``, ``xs + [y]``, ``ys * 1``
        return _viewed(value.left) | _viewed(value.right)
    if _sequence_call(value) is not None:  # list(c), zip(c, d): c's and d's items
        return set().union(set(), *(_viewed(argument) for argument in value.args))
    if isinstance(value, gast.Call):
        return _viewed_by_call(value)
    return set()


def _viewed_by_call(call) -> set:
    """The names the result of ``call`` may be (a part of) the array of: a view
    of its argument (``np.flip(y)``, ``y.reshape(2, 3)``), one-operand
    ``np.einsum`` (``'ii->i'``: a view of the diagonal), ``np.array(y,
    copy=False)``, or Python's ``max``/``min`` (one of the arrays compared,
    itself: ``max(y[:1], y[1:])`` is ``y[1:]``)."""
    function = call.func
    name = _numpy_name(function)
    if isinstance(function, gast.Name) and name in ("max", "min"):
        candidates = list(call.args) + [k.value for k in call.keywords]
        return set().union(set(), *(_viewed(item) for item in candidates))
    if isinstance(function, gast.Attribute) and not _of_a_module(function.value):
        # a method: x.reshape(...), x.ravel(); ys.copy() of a list holds ys's items
        shallow = _shallow_copy(call)
        return _viewed(function.value) if name in VIEW_CALLS or shallow else set()
    arrays = list(call.args) or [k.value for k in call.keywords]
    if name == "einsum":
        return _einsum_operand(call)
    if name == "array":  # (copies unless told not to: copy=False, copy=None)
        copy = next((k.value for k in call.keywords if k.arg == "copy"), None)
        if copy is None or literal(copy) is True:
            return set()
        return _viewed(arrays[0]) if arrays else set()
    if name in VIEW_OF_EACH_CALLS:
        return set().union(set(), *(_viewed(item) for item in arrays))
    if name in VIEW_CALLS and arrays:
        return _viewed(arrays[0])  # np.reshape(x, ...)
    return set()


def _numpy_name(function) -> str | None:
    """The name a call's function is known by here: its attribute (``np.flip``,
    ``y.reshape``) or its name, or, for a name bound to one of NumPy's functions
    under another (``from numpy.lib.stride_tricks import sliding_window_view as
    windows``), NumPy's own name for it."""
    name = getattr(function, "attr", getattr(function, "id", None))
    reader = _OBJECT_READER.get()
    if not isinstance(function, gast.Name) or reader is None:
        return name
    found, held = reader(function)
    module = getattr(held, "__module__", None) or ""
    if found and callable(held) and module.split(".")[0] == "numpy":
        return getattr(held, "__name__", name)
    return name


def _bound_to_copies_only(nodes: dict) -> set:
    """The names every binding of which is ``t = ys.copy()`` of what may be a
    list (see ``_shallow_copy``): a new object each time, sharing no memory with
    ys, only ys's items where it is a list."""
    copying = set()
    for node in nodes.get(gast.Assign, ()):
        if _shallow_copy(node.value):
            copying |= {id(t) for t in node.targets if isinstance(t, gast.Name)}
    names, others = set(), set()
    for node in nodes.get(gast.Name, ()):
        if isinstance(node.ctx, (gast.Store, gast.Del, gast.Param)):
            (names if id(node) in copying else others).add(node.id)
    return names - others


def _stored_into(statement) -> bool:
    """Whether ``statement`` stores into a name's own subscript (``t[i] = v``,
    ``t[1:] = v``): not into an item of it (``t[0][1:] = v``, ``t[0] += v``)."""
    return (
        isinstance(statement, gast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], gast.Subscript)
        and isinstance(statement.targets[0].value, gast.Name)
    )


def _viewing(name: str, bases: dict) -> set:
    """The other names whose arrays may be in ``name``'s (its views)."""
    return {
        other for other, theirs in bases.items() if other != name and name in theirs
    }


def _shallow_copy(value) -> bool:
    """Whether ``value`` is ``ys.copy()`` of what may be a list, tuple or dict (see
    ``containers``): a new list holding ys's very items (of an array, a new
    array)."""
    return (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "copy"
        and _containers_now().kind(value.func.value)[0]
    )


def _einsum_operand(call) -> set:
    """What ``np.einsum`` of one operand may be a view of: that operand (NumPy
    returns a view wherever the subscripts only permute or take a diagonal, and
    a new array for a sum, which is taken for a view too); none for two operands
    or more. Subscripts not written out (held in a name, or operands interleaved
    with lists of axes) leave the count unknown: every argument then, where the
    call may have one operand."""
    arguments = list(call.args)
    if arguments and isinstance(literal(arguments[0]), str):
        operands = arguments[1:]
        return _viewed(operands[0]) if len(operands) == 1 else set()
    if len(arguments) <= 3:  # (einsum(s, y), einsum(y, [0, 0], [0]))
        return set().union(set(), *(_viewed(item) for item in arguments))
    return set()


def _of_a_module(owner) -> bool:
    """Whether ``owner`` names one of ``MODULES`` or a module in one
    (``np.linalg``)."""
    while isinstance(owner, gast.Attribute):
        owner = owner.value
    return isinstance(owner, gast.Name) and owner.id in MODULES


def _index_array_written_out(index) -> bool:
    """Whether ``index`` (or a part of a tuple of them) is an index array for
    sure, so that the subscript is a copy in NumPy whatever the values: a list
    written out or ``np.array`` of one, or what NumPy's index functions make
    (``np.argsort(x)``, ``np.arange(n)``, ``np.nonzero(m)``, sliced:
    ``np.argsort(x)[-2:]``). (An index held in a name, or computed otherwise, may
    be a number, and then the subscript a view.)"""
    parts = index.elts if isinstance(index, gast.Tuple) else [index]
    return any(_an_index_array(part) for part in parts)


# NumPy's functions (and methods) that make an array of indices, or a tuple of
# them (nonzero, where of a condition alone), whatever their arguments
INDEX_FUNCTIONS = {"argsort", "argpartition", "arange", "flatnonzero", "nonzero"}
INDEX_TUPLES = {"nonzero", "where"}


def _an_index_array(part) -> bool:
    if isinstance(part, gast.List):
        return True
    if isinstance(part, gast.Subscript):  # (a slice of one, or a tuple's array)
        index, value = part.slice, part.value
        if isinstance(index, gast.Slice):
            return _an_index_array(value)
        return _index_call(value) in INDEX_TUPLES and type(literal(index)) is int
    name = _index_call(part)
    if name in ("array", "asarray"):
        return isinstance(part.args[0], gast.List)
    return name in INDEX_FUNCTIONS or name == "where"


def _index_call(node) -> str | None:
    """The name of the NumPy function (or array method) ``node`` calls, where it
    is one of those above taking one array first (``np.where`` its condition
    alone), else None."""
    if not (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)):
        return None
    name, owner = node.func.attr, node.func.value
    module = isinstance(owner, gast.Name) and owner.id in MODULES
    if name in ("array", "asarray", "arange", "where") and not module:
        return None
    if name in ("array", "asarray") and len(node.args) != 1:
        return None
    if name == "where" and (len(node.args) != 1 or node.keywords):
        return None
    if name in INDEX_FUNCTIONS | INDEX_TUPLES | {"array", "asarray"}:
        return name
    return None


SEQUENCE_CALLS = {"list", "tuple", "reversed", "sorted", "enumerate", "zip"}


def _sequence_call(value) -> str | None:
    """The name of a built-in that makes a sequence of its arguments' items
    (``list(c)``, ``zip(c, d)``), for a call of one; else None."""
    if (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Name)
        and value.func.id in SEQUENCE_CALLS
        and not value.keywords
    ):
        return value.func.id
    return None


def _loop_targets(statement) -> list:
    """``(name, what it is an item of, or None)`` for a ``for`` loop's targets:
    ``for i, a in enumerate(c)`` makes ``a`` an item of ``c`` and ``i`` a number;
    ``for a, b in zip(c, d)`` an item of ``c`` and one of ``d``."""
    return _item_targets(statement.target, statement.iter)


def _item_targets(target, source) -> list:
    """``(name, what it is an item of, or None)`` for the names ``target`` binds
    to an item of ``source``, nested alike: ``for i, (a, b) in enumerate(zip(c,
    d))`` makes ``a`` an item of ``c`` and ``b`` one of ``d``."""
    kind = _sequence_call(source)
    if isinstance(target, (gast.Tuple, gast.List)):
        names = target.elts
        if kind == "enumerate" and len(names) == 2 and len(source.args) == 1:
            counted = [(n, None) for n in _stored(names[0])]
            return counted + _item_targets(names[1], source.args[0])
        if kind == "zip" and len(names) == len(source.args):
            return [
                found
                for element, argument in zip(names, source.args)
                for found in _item_targets(element, argument)
            ]
        rows = source.elts if _literal_sequence(source) else []
        if rows and all(
            positions_known(row) and len(row.elts) == len(names) for row in rows
        ):  # ``for a, b in [(z, w), (u, v)]``: a is an item of [z, u]
            return [
                found
                for position, element in enumerate(names)
                for found in _item_targets(
                    element,
                    gast.List([row.elts[position] for row in rows], gast.Load()),
                )
            ]
    return [(name, source) for name in _stored(target)]


def _grown_list(statement) -> tuple | None:
    """``(list name, what it takes in)`` for ``c.append(y)``, ``c.extend(ys)`` or
    ``c.insert(i, y)``; else None."""
    if not (
        isinstance(statement, gast.Expr) and isinstance(statement.value, gast.Call)
    ):
        return None
    call = statement.value
    function = call.func
    if not (
        isinstance(function, gast.Attribute)
        and isinstance(function.value, gast.Name)
        and function.attr in ("append", "extend", "insert")
        and call.args
    ):
        return None
    return function.value.id, call.args[-1]


LIST_CHANGES = {
    "append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort",
}  # fmt: skip
# an array's methods that change it in place (also normalize's to refuse)
IN_PLACE_METHODS = {
    "fill", "sort", "put", "itemset", "resize", "partition", "setfield", "byteswap",
    "__setitem__", "__delitem__",
}  # fmt: skip
IN_PLACE_DUNDERS = {
    "__iadd__", "__isub__", "__imul__", "__imatmul__", "__itruediv__",
    "__ifloordiv__", "__imod__", "__ipow__", "__ilshift__", "__irshift__",
    "__iand__", "__ixor__", "__ior__",
}  # fmt: skip
# those an array has and a list has not (a list's own, sort, are ``LIST_CHANGES``)
ARRAY_CHANGES = (IN_PLACE_METHODS | IN_PLACE_DUNDERS) - LIST_CHANGES


def _item_replaced(statement, sequences: set) -> bool:
    """``a[i] = v`` with ``a`` a name only ever bound to lists (one subscript: it
    replaces an item; ``a[i][j] = v`` writes into the item)."""
    if not (isinstance(statement, gast.Assign) and len(statement.targets) == 1):
        return False
    target = statement.targets[0]
    return (
        isinstance(target, gast.Subscript)
        and isinstance(target.value, gast.Name)
        and target.value.id in sequences
    )


def _same_objects(value) -> set:
    """The names ``value`` may be the very object of: ``r``, ``max(r, s)``, ``r if
    c else s``."""
    if isinstance(value, gast.Name):
        return {value.id}
    if isinstance(value, gast.IfExp):
        return _same_objects(value.body) | _same_objects(value.orelse)
    compared = _compared(value)
    if compared is not None and len(compared) > 1:
        return set().union(*(_same_objects(item) for item in compared))
    return set()


def _compared(value) -> list | None:
    """The arguments of a call of Python's ``max`` or ``min`` (what it returns one
    of, itself, or an item of where it is given one), else None."""
    if (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Name)
        and value.func.id in ("max", "min")
    ):
        return list(value.args)
    return None


def _held_items(value) -> set:
    """The names an item or view of which ``value`` may be as it is (``m[-1]``,
    ``m[1:][-1]``, in a conditional expression, a tuple or a list, or Python's
    ``max`` of them: ``max(a[0], b[0])``, ``max(c)``), not computed from."""
    compared = _compared(value)
    if compared is not None:
        if len(compared) == 1 and isinstance(compared[0], gast.Name):
            return {compared[0].id}  # (an item of c)
        return set().union(set(), *(_held_items(item) for item in compared))
    if isinstance(value, gast.Subscript):
        base = value.value
        while isinstance(base, gast.Subscript):
            base = base.value
        return {base.id} if isinstance(base, gast.Name) else set()
    if isinstance(value, gast.IfExp):
        return _held_items(value.body) | _held_items(value.orelse)
    if isinstance(value, (gast.Tuple, gast.List)):
        return set().union(set(), *(_held_items(item) for item in value.elts))
    return set()


def _list_changes(statement, current=None) -> set:
    """The names of the lists ``statement`` changes in place: a method
    (``c.append(y)``, ``c.pop()``), an item replaced or written into (``c[0] =
    v``, ``c[0] += v``), ``c += [y]``, or ``del c[0]``; not the item at
    ``current``, a ``(list, index name)`` (``c[i] = v`` in ``for i, h in
    enumerate(c)``)."""
    changed = {name for _, name in _changed_lists(statement)}
    if isinstance(statement, gast.AugAssign):
        changed.update(_stored(statement.target))  # (c[0] += v: c, as a Load)
        targets = [statement.target]
    elif isinstance(statement, (gast.Assign, gast.Delete)):
        targets = list(statement.targets)
    else:
        targets = []
    while targets:
        target = targets.pop()
        if isinstance(target, (gast.Tuple, gast.List)):
            targets += target.elts
        elif isinstance(target, gast.Starred):
            targets.append(target.value)
        elif isinstance(target, gast.Subscript):
            while isinstance(target.value, gast.Subscript):
                target = target.value  # (``c[0][1] = v``: into c's item)
            listed, index = target.value, target.slice
            if not isinstance(listed, gast.Name):
                continue
            at = index.id if isinstance(index, gast.Name) else None
            if (listed.id, at) != current:
                changed.add(listed.id)
    return changed


def _current_item(loop):
    """``(list, index name)`` for ``for i, h in enumerate(c)``: ``c[i]`` is the
    item the turn reads (replacing it changes no item the loop reads later)."""
    iterable, target = loop.iter, loop.target
    if (
        _sequence_call(iterable) == "enumerate"
        and len(iterable.args) == 1
        and isinstance(iterable.args[0], gast.Name)
        and isinstance(target, gast.Tuple)
        and isinstance(target.elts[0], gast.Name)
    ):
        return iterable.args[0].id, target.elts[0].id
    return None


def _iterated(loop) -> set:
    """The names whose very list a ``for`` loop runs over as it goes (``for h in
    hs``, ``enumerate(hs)``, ``zip(hs, gs)``, ``reversed(hs)``, ``d.values()``);
    not a copy made first (``list(hs)``, ``hs[:]``, ``sorted(hs)``)."""
    if not isinstance(loop, gast.For):
        return set()
    found, sources = set(), [loop.iter]
    while sources:
        source = sources.pop()
        if isinstance(source, gast.Name):
            found.add(source.id)
        elif _sequence_call(source) in ("enumerate", "zip", "reversed"):
            sources += source.args
        elif (
            isinstance(source, gast.Call)
            and isinstance(source.func, gast.Attribute)
            and source.func.attr in ("values", "items", "keys")
        ):
            sources.append(source.func.value)
    return found


def _over_a_copy(parsed: ParsedFunction, loop, name: str) -> str:
    """The header of ``loop`` running over a copy of the list ``name`` (``for i,
    h in enumerate(list(hs)):``), where the loop is as the user wrote it (not a
    dict's ``d.values()``, read as a list by then)."""
    target = loop.target
    parts = target.elts if isinstance(target, gast.Tuple) else [target]
    written = ", ".join(gast.unparse(part).strip() for part in parts)

    def header(source) -> str:
        return f"for {written} in {gast.unparse(source).strip()}:"

    def spaced(text: str) -> str:
        return "".join(text.split())

    if spaced(header(loop.iter)) != spaced(parsed.source.statement_text(loop)):
        return "list(...) of what the loop runs over, made before it"
    return header(_ListCopied(name).visit(trees.clone(loop.iter)))


class _ListCopied(gast.NodeTransformer):
    """Reads ``list(name)`` wherever a tree reads ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node):
        if node.id != self.name:
            return node
        return gast.Call(gast.Name("list", gast.Load(), None, None), [node], [])


def _changed_lists(statement) -> list:
    """``(call, list name)`` for each call by which ``statement`` changes a list in
    place (``c.append(y)``, ``v = c.pop()``, ``np.sum(c.pop())``); for a compound
    statement, in its header."""
    found = []
    for part in _headers(statement):
        for node in trees.walk(part):
            if not (
                isinstance(node, gast.Call)
                and isinstance(node.func, gast.Attribute)
                and node.func.attr in LIST_CHANGES
            ):
                continue
            owner = node.func.value
            while isinstance(owner, gast.Subscript):  # ``rows[0].append(v)``
                owner = owner.value
            if isinstance(owner, gast.Name):
                found.append((node, owner.id))
    return found


def _slice_or_new_axis(part) -> bool:
    return isinstance(part, gast.Slice) or _new_axis(part)


def _new_axis(part) -> bool:
    return isinstance(part, gast.Constant) and part.value is None


def _literal_sequence(node) -> bool:
    return isinstance(node, (gast.List, gast.Tuple))


def _sequence_names(parsed: ParsedFunction, nodes: dict, given=frozenset()) -> set:
    """Names that every assignment binds to a list or tuple (written out, joined,
    repeated, made by ``list``/``tuple``, or a copy of such a name or of a
    parameter among ``given``, those given no array: ``zs = ys.copy()``), never to
    anything else."""
    bound, others = [], set(parsed.parameters)
    for node in _of_kinds(nodes, (gast.Assign, gast.For, gast.AugAssign)):
        if isinstance(node, gast.Assign):
            for target in node.targets:
                for name in _stored(target):
                    if isinstance(target, gast.Name):
                        bound.append((name, node.value))
                    else:
                        others.add(name)
        elif isinstance(node, (gast.For, gast.AugAssign)):
            if not (isinstance(node, gast.AugAssign) and _sequence_value(node.value)):
                others.update(_stored(node.target))
    found = {name for name, _ in bound} - others
    while True:  # (a copy of a name that is not one is not one either)
        known = found | given
        kept = found - {n for n, value in bound if not _sequence_value(value, known)}
        if kept == found:
            return found
        found = kept


def _tuple_names(parsed: ParsedFunction, nodes: dict) -> set:
    """Names that every assignment binds to a tuple for sure (written out, made
    by ``tuple``, joined with ``+`` to one, or another such name), parameters
    never (a list, perhaps): ``+=`` on one makes a new tuple, where on a list it
    extends the list in place."""
    bound, others = [], set(parsed.parameters)
    for node in _of_kinds(nodes, (gast.Assign, gast.AugAssign, gast.For)):
        if isinstance(node, gast.Assign):
            for target in node.targets:
                if isinstance(target, gast.Name):
                    bound.append((target.id, node.value))
                else:
                    others.update(_stored(target))
        elif isinstance(node, gast.AugAssign) and isinstance(node.target, gast.Name):
            joined = gast.BinOp(node.target, gast.Add(), node.value)
            bound.append(
                (node.target.id, joined if isinstance(node.op, gast.Add) else None)
            )
        else:
            others.update(_stored(node.target))
    found = {name for name, _ in bound} - others
    while True:
        kept = found - {n for n, value in bound if not _a_tuple(value, found)}
        if kept == found:
            return found
        found = kept


def _a_tuple(value, tuples: set) -> bool:
    """Whether ``value`` is surely a tuple, given the names that are."""
    if isinstance(value, gast.Tuple) or _sequence_call(value) == "tuple":
        return True
    if isinstance(value, gast.Name):
        return value.id in tuples
    return (
        isinstance(value, gast.BinOp)
        and isinstance(value.op, gast.Add)
        and _a_tuple(value.left, tuples)
        and _a_tuple(value.right, tuples)
    )


def _of_kinds(nodes: dict, kinds: tuple):
    """The nodes of ``kinds`` in ``nodes`` (``trees.nodes_by_kind``'s), kind by
    kind: for passes that collect sets, which no order changes."""
    for kind in kinds:
        yield from nodes.get(kind, ())


def _sequence_value(value, sequences=frozenset()) -> bool:
    """Whether ``value`` is surely a list or tuple, given the names that are
    (``sequences``): written out, made by ``list``/``tuple``, joined or repeated
    (``[y] * 2``, ``xs + [y]``, ``ys * n``), or copied (``ys.copy()``)."""
    if _literal_sequence(value) or _sequence_call(value) in ("list", "tuple"):
        return True
    if isinstance(value, gast.BinOp) and isinstance(value.op, (gast.Add, gast.Mult)):
        return any(
            _literal_sequence(side)
            or (isinstance(side, gast.Name) and side.id in sequences)
            for side in (value.left, value.right)
        )
    return (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "copy"
        and isinstance(value.func.value, gast.Name)
        and value.func.value.id in sequences
        and not value.args
    )


def _sequence_operation(value) -> bool:
    """Whether ``value`` joins or repeats lists or tuples, one written out (``[y]
    * 2``, ``xs + [y]``), or repeats what may be one (``ys * 1``; see
    ``containers``), so that it holds their very items. (``ys + zs`` is refused
    where lists are lowered.)"""
    if not (
        isinstance(value, gast.BinOp) and isinstance(value.op, (gast.Add, gast.Mult))
    ):
        return False
    if any(_literal_sequence(side) for side in (value.left, value.right)):
        return True
    return _containers_now().repeated(value) is not None
