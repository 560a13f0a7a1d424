"""Local names for layers replaced, loops over layers unrolled and tests of optional
layers settled, in a method differentiated for its object (or code reading a
module's list of layers): what ``ppto.transform.methods`` then resolves call by
call.

A local name given a layer, activation or method once, in the function's own block
(``layer = self.layer``, ``f = self.act``, ``step = self.layers[-1].forward``,
``layers = self.layers``), is replaced by what it reads wherever it is read
(``inlined_aliases``), so that ``layer(x)`` is the call ``self.layer(x)``.

A loop over a list or tuple of layers the code can see (``for layer in
self.layers: x = layer(x)``, a ``Sequential``) is unrolled, one copy of its body per
layer reading ``self.layers[0]``, ``self.layers[1]``..., whose calls are then
resolved as any; so is one over ``enumerate`` of such a list, its indices
(``range(len(self.layers))``, ``range(1, len(self.layers))``), ``reversed`` of
such a list or ``zip`` of lists (``for layer, norm in zip(self.layers,
self.norms)``, enumerated too), a slice of one (``self.layers[1:]``, each turn
reading the sliced list's item) and a dict of layers (``for name, block in
self.blocks.items()``, ``.values()``, its keys: each turn reading
``self.blocks["enc"]``), and a loop over names written out whose body reads
layers or attributes by them (``for name in ("enc", "dec"): h =
self.blocks[name](h)``, ``getattr(self, name)``); a loop's ``else`` follows its
copies. A ``break`` in the
loop makes its copies the body of a loop run once (``for turn in range(1):``,
with the loop's ``else``), which the break leaves; a ``continue`` makes each copy
one. An ``if`` on whether
an attribute is None (``if self.downsample is not None:``) takes its branch here:
an optional layer. What they read is watched as the calls' objects are
(``Program.reached``).
"""

from __future__ import annotations

import builtins
import inspect

import gast

from ppto.transform import trees
from ppto.transform.names import Namer, names_in
from ppto.transform.objects import constant_int, read_value
from ppto.transform.resolve import classify, is_library
from ppto.transform.source import ParsedFunction
from ppto.transform.trees import clone


def inlined_aliases(body: list, parsed: ParsedFunction, local: set, own) -> list:
    """``body`` with each local name given a layer once (``layer = self.layer``,
    ``f = self.act``, ``step = self.layer.forward``, ``layers = self.layers``)
    replaced by what it reads where it is read (``self.layer(x)``), so that its
    calls are resolved as any. The name is bound by that statement alone, in
    the function's own block, and read only after it; the function stores into
    no attribute, nor into an item of what it does not make itself (reading
    ``self.layer`` again gives what the name holds)."""
    if any(_writes_an_object(node, local) for node in trees.walk(parsed.tree)):
        return body
    body, out = list(body), []
    for position, statement in enumerate(body):
        name = _alias_bound(statement, parsed, local, own)
        if name is None or not _bound_once(parsed.tree, name):
            out.append(statement)
            continue
        earlier = [*body[:position], statement.value]
        if any(_reads(part, name) for part in earlier):
            out.append(statement)
            continue
        reads = {name: statement.value}
        later = body[position + 1 :]
        body[position + 1 :] = [_replaced(part, reads) for part in later]
    return out


def _writes_an_object(node, local: set) -> bool:
    """Whether ``node`` stores into an attribute, or into an item of something
    not a local name (``self.layers[0] = ...``; ``h[0] = ...`` writes an array
    the function made)."""
    if isinstance(node, gast.Attribute):
        return not isinstance(node.ctx, gast.Load)
    if not isinstance(node, gast.Subscript) or isinstance(node.ctx, gast.Load):
        return False
    base = node.value
    return not (isinstance(base, gast.Name) and base.id in local)


def bound_to_a_layer(statement, parsed: ParsedFunction, local: set, own):
    """``(the name, what it reads)`` where ``statement`` gives a local name a
    layer, function or method the code can see (``layer = self.layer``), else
    None."""
    name = _alias_bound(statement, parsed, local, own)
    return None if name is None else (name, statement.value)


def _alias_bound(statement, parsed: ParsedFunction, local: set, own) -> str | None:
    """The name ``statement`` gives a layer, function or method the code can see
    (``layer = self.layer``), or a list, tuple or dict of them, else None."""
    if not isinstance(statement, gast.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if not isinstance(target, gast.Name) or target.id in parsed.parameters:
        return None
    if not isinstance(statement.value, (gast.Name, gast.Attribute, gast.Subscript)):
        return None
    found, value = read_value(statement.value, parsed, local, own, [])
    if found and type(value) is dict:
        value = list(value.values())
    if found and type(value) in (list, tuple):  # (layers = self.layers)
        return target.id if all(map(_is_layer, value)) else None
    return target.id if found and _is_layer(value) else None


def _bound_once(tree, name: str) -> bool:
    """Whether ``name`` is bound once in ``tree`` (no other assignment, loop,
    parameter of a nested function, ``global`` or ``nonlocal`` of it)."""
    bound = 0
    for node in trees.walk(tree):
        if isinstance(node, gast.Name) and node.id == name:
            bound += not isinstance(node.ctx, gast.Load)
        elif isinstance(node, (gast.Global, gast.Nonlocal)) and name in node.names:
            return False
    return bound == 1


def _reads(tree, name: str) -> bool:
    return any(
        isinstance(node, gast.Name) and node.id == name for node in trees.walk(tree)
    )


def unrolled(body: list, parsed: ParsedFunction, local: set, own, program) -> list:
    """``body`` with each loop over layers unrolled (see the module docstring), in
    nested blocks too."""
    out = []
    for statement in body:
        _rewrite_blocks(statement, unrolled, parsed, local, own, program)
        found = _turns(statement, parsed, local, own, program)
        if found is None:
            out.append(statement)
            continue
        turns, before = found
        out.extend(before)
        copies = [
            [_replaced(copy, reads) for copy in clone(statement.body)]
            for reads in turns
        ]
        exit_ = _own_exit(statement)
        if exit_ is None:
            out.extend(part for copy in copies for part in copy)
            out.extend(statement.orelse)  # (no break: a loop's else always runs)
        elif exit_ is gast.Continue:  # (each turn a loop run once: continue ends it)
            out.extend(_run_once(copy, [], parsed, statement) for copy in copies)
            out.extend(statement.orelse)
        else:  # (the turns in one loop run once: break leaves them all, and else)
            turns_run = [part for copy in copies for part in copy]
            out.append(_run_once(turns_run, statement.orelse, parsed, statement))
    return out or [gast.Pass()]


def _rewrite_blocks(statement, rewrite, *context) -> None:
    """Replace each block of statements directly inside ``statement`` (a loop's
    or branch's body, an else, a ``try``'s finally) by ``rewrite(block,
    *context)``."""
    for field, value in gast.iter_fields(statement):
        if isinstance(value, list) and value and isinstance(value[0], gast.stmt):
            setattr(statement, field, rewrite(value, *context))


def _own_exit(loop: gast.For):
    """``gast.Break`` or ``gast.Continue`` where the body of ``loop`` leaves it or
    its turn that way (not in a loop of its own), else None; ``_turns`` takes no
    loop with both."""
    found = _own_exits(loop.body)
    return next(iter(found)) if found else None


def _own_exits(body: list) -> set:
    found, pending = set(), list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, (gast.Break, gast.Continue)):
            found.add(type(node))
        elif not isinstance(node, (gast.For, gast.While, gast.FunctionDef)):
            pending.extend(gast.iter_child_nodes(node))
        else:  # (an inner loop's own break is its own; its else is this loop's)
            pending.extend(node.orelse if hasattr(node, "orelse") else [])
    return found


def _run_once(body: list, orelse: list, parsed: ParsedFunction, origin):
    """``for turn in range(1): body`` (``else: orelse``): what break and continue
    leave in an unrolled loop."""

    def located(node):
        return gast.copy_location(node, origin)

    turn = _fresh("turn", parsed, origin)
    range_ = located(gast.Name("range", gast.Load(), None, None))
    once = located(gast.Call(range_, [located(gast.Constant(1, None))], []))
    target = located(gast.Name(turn, gast.Store(), None, None))
    return located(gast.For(target, once, body, orelse, None))


def _fresh(base: str, parsed: ParsedFunction, loop: gast.For) -> str:
    """A name used nowhere in the function, nor in ``loop`` as unrolled so far (a
    loop inside it is unrolled first: its names are not the function's yet)."""
    return Namer(names_in(parsed.tree) | names_in(loop)).fresh(base)


def _turns(statement, parsed: ParsedFunction, local: set, own, program):
    """For a ``for`` loop over layers to unroll, what each of its names reads in
    each turn (``{"layer": self.layers[0]}``, ...), else None. The loop goes over
    a list or tuple read from outside the function or through ``self``, every
    item a function or an object of the user's code (``for layer in
    self.layers``), a slice of one with constant bounds (``self.layers[1:]``),
    ``reversed`` of one, a dict of them (``.items()``, ``.values()``, its keys),
    or over ``enumerate`` of a list, ``range`` of bounds counted from lists'
    lengths (``range(1, len(self.layers))``) or ``zip`` of lists (one of layers),
    also enumerated (``for i, (layer, norm) in enumerate(zip(L, N))``, from a
    start known only when the code runs too: read once, before the turns); and
    its names are read only in it, it has no ``return``, and it leaves a turn
    with ``break`` or ``continue`` but not both (see ``unrolled``). Returns the
    turns and the statements to run before them."""
    if not isinstance(statement, gast.For):
        return None
    sources = _loop_sources(statement, parsed, local)
    if sources is None:
        return None
    jumps = (gast.Return, gast.Yield, gast.YieldFrom)
    inside = [node for part in statement.body for node in trees.walk(part)]
    if any(isinstance(node, jumps) for node in inside):
        return None
    if len(_own_exits(statement.body)) > 1 or (
        _own_exits(statement.body) and not _builtin_range(parsed, local)
    ):
        return None  # (break and continue: the unrolled turns cannot say both)
    for name, _, _ in sources:
        if name is None:  # (a list only counted: range(len(self.layers)))
            continue
        if name in parsed.parameters:
            return None
        uses = [n for n in inside if isinstance(n, gast.Name) and n.id == name]
        if any(not isinstance(n.ctx, gast.Load) for n in uses):
            return None  # (rebound in the loop)
        if not _read_only_in_loops_binding(parsed.tree, name):
            return None  # (read after the loop, or bound elsewhere: its last value)
    reached: list = []
    read = {}  # source -> (where it is read, its list or dict, the keys taken)
    for index, (_, node, part) in enumerate(sources):
        if node is None or part == "count":
            continue
        if part == "range":  # (the numbers it counts: no list)
            numbers = _range_numbers(node, parsed, local, own, reached)
            read[index] = None if numbers is None else (None, None, numbers)
        else:
            read[index] = _sequence(node, parsed, local, own, reached)
        if read[index] is None:
            return None
        if part in ("key", "value") and type(read[index][1]) is not dict:
            return None  # (.items() of an object of the user's code: its own)
    sequences = [found for found in read.values() if found[1] is not None]
    if not any(
        all(_is_layer(items[k]) for k in keys) for _, items, keys in sequences
    ) and not _names_layers(statement, sources, read, parsed, local, own):
        return None
    # (a list only counted, len(self.layers) in range(...), sets no number of turns)
    named = [i for i, (name, _, _) in enumerate(sources) if name is not None]
    count = min(len(read[i][2]) for i in named if i in read)
    starts = {  # (enumerate's start: 0 where not given)
        index: 0 if node is None else constant_int(node)
        for index, (_, node, part) in enumerate(sources)
        if part == "count"
    }
    before = []  # a start known only when the code runs, read once before
    for index, (_, node, part) in enumerate(sources):
        if part == "count" and starts[index] is None:
            start = _fresh("start", parsed, statement)
            target = gast.Name(start, gast.Store(), None, None)
            assign = gast.Assign([target], clone(node), None)
            before.append(gast.copy_location(assign, statement))
            starts[index] = gast.Name(start, gast.Load(), None, None)
    program.reached.extend(reached)
    for _, items, _ in sequences:
        program.reached.append((items, None, tuple(items)))
        if type(items) is dict:  # (the layer under each key: watched too)
            program.reached.extend((items, key, items[key]) for key in items)
    turns = [
        {
            name: _turn_read(part, starts.get(index, read.get(index)), turn)
            for index, (name, _, part) in enumerate(sources)
            if name is not None
        }
        for turn in range(count)
    ]
    return turns, before


def _names_layers(statement, sources, read, parsed, local: set, own) -> bool:
    """Whether the loop goes over names (strings) that its body reads attributes
    or layers by (``for name in ("enc", "dec"): h = getattr(self, name)(h)``,
    ``self.blocks[name](h)``): unrolled, so that each turn's
    ``getattr(self, "enc")`` is followed as ``self.enc``."""
    named = {
        name
        for index, (name, _, part) in enumerate(sources)
        if part == "item"
        and index in read
        and read[index][1] is not None
        and all(type(read[index][1][k]) is str for k in read[index][2])
    }
    for node in (node for part in statement.body for node in trees.walk(part)):
        if (
            _builtin_called(node, parsed, local) is getattr
            and len(node.args) >= 2
            and isinstance(node.args[1], gast.Name)
            and node.args[1].id in named
        ):
            return True
        if (
            isinstance(node, gast.Subscript)
            and isinstance(node.slice, gast.Name)
            and node.slice.id in named
            and holds_layers(read_value(node.value, parsed, local, own, [])[1])
        ):
            return True
    return False


def _builtin_range(parsed: ParsedFunction, local: set) -> bool:
    """Whether ``range`` in the function is Python's (an unrolled loop with break
    or continue is written with it)."""
    return "range" not in local and parsed.namespace.get("range") is builtins.range


def loop_over_layers(statement, parsed: ParsedFunction, local: set, own) -> bool:
    """Whether ``statement`` is a ``for`` loop over layers in one of the forms
    ``unrolled`` takes (whether or not it could be unrolled)."""
    if not isinstance(statement, gast.For):
        return False
    sources = _loop_sources(statement, parsed, local)
    for _, node, part in sources or ():
        if node is None or part in ("range", "count"):
            continue
        found = _sequence(node, parsed, local, own, [])
        if found is not None and all(_is_layer(found[1][k]) for k in found[2]):
            return True
    return False


def holds_layers(value) -> bool:
    """Whether ``value`` is a list, tuple or dict of layers (not empty)."""
    if type(value) is dict:
        value = list(value.values())
    return type(value) in (list, tuple) and bool(value) and all(map(_is_layer, value))


def _sequence(node, parsed: ParsedFunction, local: set, own, reached: list):
    """``(the node the items are read through, the list, tuple or dict, the
    indices or keys the loop takes in turn)`` for a loop over ``node``, else
    None; a slice (``self.layers[1:]``) takes the indices of the sliced list, so
    that each turn reads an item of a list the code can watch."""
    if isinstance(node, gast.Subscript) and isinstance(node.slice, gast.Slice):
        bounds = [node.slice.lower, node.slice.upper, node.slice.step]
        values = [constant_int(bound) for bound in bounds]
        if any(v is None and b is not None for v, b in zip(values, bounds)):
            return None
        found = _sequence(node.value, parsed, local, own, reached)
        if found is None or type(found[1]) is dict:
            return None
        base, items, keys = found
        return base, items, keys[slice(*values)]
    if _builtin_called(node, parsed, local) is reversed and len(node.args) == 1:
        found = _sequence(node.args[0], parsed, local, own, reached)
        return None if found is None else (found[0], found[1], found[2][::-1])
    if isinstance(node, (gast.Tuple, gast.List)) and all(
        isinstance(element, gast.Constant) and type(element.value) is str
        for element in node.elts
    ):  # (names written out: for name in ("enc", "dec"): getattr(self, name))
        names = tuple(element.value for element in node.elts)
        return node, names, list(range(len(names)))
    found, items = read_value(node, parsed, local, own, reached)
    if not found or type(items) not in (list, tuple, dict):
        return None
    if type(items) is dict:
        if not all(type(key) in (int, str) for key in items):
            return None  # (a key written as a constant: other keys cannot be)
        return node, items, list(items)
    return node, items, list(range(len(items)))


def _range_numbers(call, parsed: ParsedFunction, local: set, own, reached: list):
    """The numbers ``range(...)`` counts where each of its arguments is a
    constant, the length of a list of layers (``len(self.layers)``) or a sum or
    difference of them (``range(1, len(self.layers) - 1)``), else None."""
    bounds = [_bound(arg, parsed, local, own, reached) for arg in call.args]
    if not 1 <= len(bounds) <= 3 or None in bounds or bounds[2:] == [0]:
        return None
    return list(range(*bounds))


def _bound(node, parsed: ParsedFunction, local: set, own, reached: list):
    """The ``int`` ``node`` gives as a bound of ``range`` (see ``_range_numbers``),
    else None."""
    if isinstance(node, gast.BinOp) and isinstance(node.op, (gast.Add, gast.Sub)):
        left = _bound(node.left, parsed, local, own, reached)
        right = _bound(node.right, parsed, local, own, reached)
        if left is None or right is None:
            return None
        return left + right if isinstance(node.op, gast.Add) else left - right
    if _builtin_called(node, parsed, local) is len and len(node.args) == 1:
        found = _sequence(node.args[0], parsed, local, own, reached)
        return None if found is None else len(found[2])
    return constant_int(node)


def _turn_read(part: str, read, turn: int):
    """What a loop name reads in turn ``turn``: the count, a key of a dict, or
    the item at that turn's index or key (``self.layers[1]``,
    ``self.blocks["enc"]``)."""
    if part == "count" and isinstance(read, gast.Name):  # (a start read once)
        if turn == 0:
            return clone(read)
        return gast.BinOp(clone(read), gast.Add(), gast.Constant(turn, None))
    if part == "count":  # (read: enumerate's start)
        return gast.Constant(turn + read, None)
    base, items, keys = read
    if part == "item" and type(items[keys[turn]]) is str:  # (an attribute's name)
        return gast.Constant(items[keys[turn]], None)
    if part == "range":
        return gast.Constant(keys[turn], None)
    if part == "key" or (part == "item" and type(items) is dict):
        return gast.Constant(keys[turn], None)  # (a dict iterated gives its keys)
    return gast.Subscript(clone(base), gast.Constant(keys[turn], None), gast.Load())


def _loop_sources(statement: gast.For, parsed: ParsedFunction, local: set):
    """``[(name, the sequence it takes from, what it takes)]`` for the names a
    ``for`` loop binds, what it takes being ``"item"``, ``"count"``, the numbers
    of a ``"range"``, or a dict's ``"key"`` or ``"value"``: ``for layer in L``,
    ``for i, layer in enumerate(L)`` (the count's sequence: enumerate's
    constant start, if given), ``for i in range(1, len(L))`` (``L`` only
    counted: its name None), ``for layer, norm in zip(L, N)``, ``for layer in
    D.values()`` or ``for name, layer in D.items()``; else None."""
    target, iter_ = statement.target, statement.iter
    builtin = _builtin_called(iter_, parsed, local)
    if isinstance(target, gast.Name) and builtin is range:
        counted = [
            node.args[0]
            for argument in iter_.args
            for node in trees.walk(argument)
            if _builtin_called(node, parsed, local) is len and len(node.args) == 1
        ]
        if counted:  # (a loop over plain numbers: run as written)
            lists = [(None, node, "item") for node in counted]
            return [(target.id, iter_, "range"), *lists]
    view = _dict_view(iter_)
    if isinstance(target, gast.Name):
        if view in ("keys", "values"):
            return [(target.id, iter_.func.value, view[:-1])]
        return [(target.id, iter_, "item")]
    if not isinstance(target, gast.Tuple):
        return None
    names = [getattr(element, "id", None) for element in target.elts]
    plain = None not in names and len(set(names)) == len(names)
    if view == "items" and len(names) == 2 and plain:
        dictionary = iter_.func.value
        return [(names[0], dictionary, "key"), (names[1], dictionary, "value")]
    enumerated = builtin is enumerate and len(iter_.args) in (1, 2)
    start = iter_.args[1] if enumerated and len(iter_.args) == 2 else None
    if enumerated and len(target.elts) == 2:
        counted, element = target.elts
        zipped = iter_.args[0]
        if (
            isinstance(counted, gast.Name)
            and isinstance(element, gast.Tuple)
            and _builtin_called(zipped, parsed, local) is zip
        ):  # for i, (layer, norm) in enumerate(zip(L, N))
            inner = gast.For(element, zipped, statement.body, [], None)
            sources = _loop_sources(inner, parsed, local)
            if sources is None or counted.id in {name for name, _, _ in sources}:
                return None
            return [(counted.id, start, "count"), *sources]
    if not plain:
        return None
    if enumerated and len(names) == 2:
        return [(names[0], start, "count"), (names[1], iter_.args[0], "item")]
    if builtin is zip and len(iter_.args) == len(names):
        return [(name, node, "item") for name, node in zip(names, iter_.args)]
    return None


def _dict_view(node) -> str | None:
    """``"items"``, ``"keys"`` or ``"values"`` where ``node`` calls that method
    without arguments (on what: ``_sequence`` finds whether it is a dict)."""
    if not isinstance(node, gast.Call) or node.args or node.keywords:
        return None
    function = node.func
    if isinstance(function, gast.Attribute):
        if function.attr in ("items", "keys", "values"):
            return function.attr
    return None


def _builtin_called(node, parsed: ParsedFunction, local: set):
    """The builtin function ``node`` calls by its own name with positional
    arguments alone (``len(self.layers)``), else None."""
    if not isinstance(node, gast.Call) or node.keywords:
        return None
    function = node.func
    if not isinstance(function, gast.Name) or function.id in local:
        return None
    builtin = getattr(builtins, function.id, None)
    if builtin is None or parsed.namespace.get(function.id, builtin) is not builtin:
        return None
    return builtin


def folded(body: list, parsed: ParsedFunction, local: set, own, program) -> list:
    """``body`` with each ``if`` on whether an object's attribute is None (``if
    self.downsample is not None:``, a layer optional in a model) replaced by the
    branch it takes, in nested blocks too: a call in the other branch, of a
    layer that is None, cannot be resolved (each link read is watched, so another
    value there makes the program stale). Code after a ``return`` is dropped."""
    out = []
    for statement in body:
        _rewrite_blocks(statement, folded, parsed, local, own, program)
        taken = None
        if isinstance(statement, gast.If):
            taken = _none_test(statement.test, parsed, local, own, program)
        if taken is None:
            out.append(statement)
        else:
            out.extend(statement.body if taken else statement.orelse)
        if out and isinstance(out[-1], gast.Return):
            break  # (what follows never runs)
    return out or [gast.Pass()]


def _none_test(test, parsed: ParsedFunction, local: set, own, program):
    """Whether ``test``, ``<attribute chain> is None`` or ``is not None`` of an
    object the code can see, holds; None where it is no such test. Such tests
    joined by ``and`` or ``or`` (or negated) with others settle it where their
    values alone do (``self.down is not None and i == 0`` with no ``down``: the
    other branch, where ``self.down(h)`` could not be resolved)."""
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        holds = _none_test(test.operand, parsed, local, own, program)
        return None if holds is None else not holds
    if isinstance(test, gast.BoolOp):
        settling = isinstance(test.op, gast.Or)  # (True settles an or, False an and)
        found = [_none_test(v, parsed, local, own, program) for v in test.values]
        if settling in found:
            return settling
        return None if None in found else not settling
    if not isinstance(test, gast.Compare) or len(test.ops) != 1:
        return None
    if not isinstance(test.ops[0], (gast.Is, gast.IsNot)):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, gast.Constant) and left.value is None:
        left, right = right, left
    if not isinstance(right, gast.Constant) or right.value is not None:
        return None
    if not isinstance(left, (gast.Attribute, gast.Subscript)):
        return None
    reached: list = []
    found, value = read_value(left, parsed, local, own, reached)
    if not found:
        return None
    program.reached.extend(reached)
    return (value is None) == isinstance(test.ops[0], gast.Is)


def _read_only_in_loops_binding(tree, name: str) -> bool:
    """Whether each use of ``name`` in ``tree`` is in a ``for`` loop binding it, as
    its target or in its body: once a loop is unrolled the name is bound nowhere,
    so nothing may read its last value (two loops over layers may share it)."""
    inside = set()
    for node in trees.walk(tree):
        if not isinstance(node, gast.For):
            continue
        bound = [n.id for n in trees.walk(node.target) if isinstance(n, gast.Name)]
        if name in bound:
            parts = [node.target, *node.body]
            inside.update(id(n) for part in parts for n in trees.walk(part))
    named = (n for n in trees.walk(tree) if isinstance(n, gast.Name) and n.id == name)
    return all(id(n) in inside for n in named)


def _is_layer(value) -> bool:
    """A function of the user's code or one with a ppto operator (``np.tanh``), or
    an object of a class from the user's code, called (``layer(x)``) or through its
    methods (``layer.forward(x)``, a class without ``__call__``) (arrays, numbers: a
    loop the later stages run as written)."""
    if classify(value).kind == "operator":
        return True
    if inspect.isfunction(value) or inspect.ismethod(value):
        return not is_library(getattr(value, "__func__", value))
    if isinstance(value, type):
        return False
    # (a class of the user's code defines functions there; partial, a NumPy
    # array or a number has none)
    return any(
        inspect.isfunction(member) and not is_library(member)
        for klass in type(value).__mro__
        for member in vars(klass).values()
    )


def _replaced(tree, reads: dict):
    """``tree`` with each read of a name in ``reads`` made a read of what it maps
    to."""
    return _ReadsReplaced(reads).visit(tree)


class _ReadsReplaced(trees.Transformer):
    """``_replaced``'s rewrite (a class made once, not per tree)."""

    def __init__(self, reads: dict) -> None:
        self.reads = reads

    def visit_Name(self, node):
        if node.id in self.reads and isinstance(node.ctx, gast.Load):
            return gast.copy_location(clone(self.reads[node.id]), node)
        return node
