"""Matching one fusion rule's pattern against a block of generated statements, and
where its fused call may then go.

A pattern's operators are matched against an expression and, through the names it
reads, against the statements defining them (the *absorbed* statements). Each read
of a name is resolved against the definition that reaches it, so that a name the
code assigns several times (a gradient accumulator, ``g = g + t``) is matched
definition by definition; a copy ``a = b`` is seen through. What the match reads
from outside (the pattern's arguments) must hold the same values where the fused call
runs; the call goes where the matched statement was or, where a statement in between
reads one of its values, earlier, where its arguments are ready (``Match.place``).
The operands of a commutative operator (``a + b``, ``a * b``, ``maximum``,
``minimum``) match in either order: the code's first, else swapped. Where both
orders match there, and the match fails later (a parameter bound the other way
round), it is tried again from the start with that operator's operands swapped, the
latest such choice first (``candidates``); swapped tries are at most ``SWAPS`` a rule
and statement, so a long chain costs a few matches, not 2**n.
"""

from __future__ import annotations

import ast
import bisect

import gast

from ppto.ops import elementwise
from ppto.symbolic import Operator, Symbol
from ppto.transform.analyze import literal
from ppto.transform.emit import Comment
from ppto.transform.trees import loads, name_counts, single_target, stores

# operators whose two operands may be swapped without changing a value, bit for bit
# (IEEE addition and multiplication are commutative; so is choosing the larger)
COMMUTATIVE = frozenset(
    {elementwise.add, elementwise.mul, elementwise.maximum, elementwise.minimum}
)
# swapped tries per match: each may redo the matching below it, so a bound keeps
# a chain of n commutative operators from costing 2**n tries
SWAPS = 16


class Definitions:
    """Where each name is assigned by a single-target statement of a block, seen
    from a point in it: ``get(name)`` is the position of the last such statement
    before ``limit``. One index serves every statement's prefix (``before``)."""

    def __init__(self, block: list, positions: dict | None = None, limit=None):
        if positions is None:
            positions = {}
            for position, statement in enumerate(block):
                if single_target(statement):
                    positions.setdefault(statement.targets[0].id, []).append(position)
        self.positions = positions  # name -> its definitions' positions, ascending
        self.limit = len(block) if limit is None else limit

    def before(self, limit: int) -> Definitions:
        """The definitions of the statements before position ``limit``."""
        return Definitions((), self.positions, min(limit, self.limit))

    def get(self, name: str) -> int | None:
        found = self.positions.get(name)
        if found is None:
            return None
        index = bisect.bisect_left(found, self.limit) - 1
        return found[index] if index >= 0 else None

    def after(self, name: str, position: int) -> int | None:
        """The position of the next single-target definition of ``name`` after
        ``position`` (anywhere in the block), or None."""
        found = self.positions.get(name, ())
        index = bisect.bisect_right(found, position)
        return found[index] if index < len(found) else None


def same(first, second) -> bool:
    """Whether two expressions are the same code (names and numbers compared
    directly: most are)."""
    kind = type(first)
    if kind is not type(second):
        return False
    if kind is gast.Name:
        return first.id == second.id
    if kind is gast.Constant:
        return type(first.value) is type(second.value) and first.value == second.value
    return ast.dump(gast.gast_to_ast(first)) == ast.dump(gast.gast_to_ast(second))


class Match:
    """Matches one rule's pattern against the statements ``before`` the one it
    replaces (at position ``len(before)``, the *root*), absorbing the statements
    whose values it computes where nothing else reads them."""

    def __init__(
        self,
        fuser,
        definitions: Definitions,
        before: list,
        swapped: frozenset = frozenset(),
        swaps: list | None = None,
    ) -> None:
        self.fuser = fuser
        self.definitions = definitions  # seen from the root
        self.before = before
        self.root = len(before)
        self.scope = definitions  # seen from the statement being matched
        self.position = self.root  # that statement's position
        self.bindings: dict = {}  # pattern parameter -> the expression bound to it
        self.consumed: set = set()  # positions of absorbed statements
        # (name, position of the definition read) -> reads of it inside the match
        self.uses: dict[tuple, int] = {}
        # id of a pattern node the code computes in a statement of its own -> the
        # (name, position) of that statement (a value the pattern reads twice)
        self.shared: dict = {}
        # (names an argument reads, the position of the statement reading them)
        self.argument_reads: list[tuple[set, int]] = []
        # copies seen through: name -> (position of ``name = source``, source)
        self.copies: dict[str, tuple[int, str]] = {}
        self.copy_reads: dict[str, int] = {}  # copy's name -> reads inside the match
        # swapped tries left, shared with this match's forks and its retries
        self.swaps = [SWAPS] if swaps is None else swaps
        # choices: the commutative operators where both orders may match, numbered
        # as met (a counter shared with forks: a retry meets them in the same order
        # up to the one it swaps); ``swapped``, the ones this try swaps; ``kept``,
        # the ones where the code's order matched (a retry may swap them)
        self.choices = [0]
        self.swapped = swapped
        self.kept: list[int] = []

    # --- matching ------------------------------------------------------------------

    def node(self, template, expression) -> bool:
        if isinstance(template, Symbol):
            return self.bind(template.name, expression)
        if isinstance(template, (int, float)):
            return (
                isinstance(expression, gast.Constant) and expression.value == template
            )
        if not isinstance(template, Operator):
            return False
        shared = self.shared.get(id(template))  # a value the pattern uses twice
        if shared is not None and isinstance(expression, gast.Name):
            key = self.reads_shared(expression.id, shared)
            if key is not None:
                # (a read of it inside the match: complete() counts them all)
                self.uses[key] = self.uses.get(key, 0) + 1
                return True
        # (else the code computes the value again where it reads it, in an
        # expression or another name: matched as written below)
        decoded = self.fuser.decode(expression)
        if decoded is None and isinstance(expression, gast.Name):
            return self.definition(template, expression.id)
        if decoded is None or decoded.op is not template.op:
            return False
        if len(decoded.inputs) != len(template.inputs):
            return False
        for name, value in template.params.items():
            code = decoded.params.get(name)
            if isinstance(value, Symbol):
                if not self.node(
                    value,
                    code if hasattr(code, "_fields") else gast.Constant(code, None),
                ):
                    return False
            elif (literal(code) if hasattr(code, "_fields") else code) != value:
                return False
        if template.op in COMMUTATIVE and len(decoded.inputs) == 2:
            return self.either_order(template.inputs, decoded.inputs)
        return all(self.node(t, e) for t, e in zip(template.inputs, decoded.inputs))

    def either_order(self, templates: list, operands: list) -> bool:
        """Matches a commutative operator's operands in the code's order, else
        swapped (while swapped tries are left); where both may match, the code's
        order unless this try swaps it (see ``candidates``)."""
        swapped = operands[::-1]
        if self.swaps[0] <= 0 or not self.may_match(templates, swapped):
            return all(self.node(t, e) for t, e in zip(templates, operands))
        if self.may_match(templates, operands):  # (else only swapped may: no trial)
            choice = self.choices[0]
            self.choices[0] += 1
            if choice not in self.swapped:
                trial = self.fork()  # (a failed try leaves its bindings behind)
                if all(trial.node(t, e) for t, e in zip(templates, operands)):
                    self.__dict__.update(trial.__dict__)
                    self.kept.append(choice)
                    return True
        self.swaps[0] -= 1
        return all(self.node(t, e) for t, e in zip(templates, swapped))

    def may_match(self, templates: list, operands: list) -> bool:
        """Whether each operand's outermost operator (of the statement defining
        it, for a name) is its template's: a quick test that spares most trials."""
        for template, operand in zip(templates, operands):
            if isinstance(template, (int, float)):
                if not isinstance(operand, gast.Constant) or operand.value != template:
                    return False
            elif isinstance(template, Operator):
                if isinstance(operand, gast.Name):
                    position = self.scope.get(operand.id)
                    if position is None:
                        return False  # (an argument or a loop's name: no operator)
                    operand = self.before[position].value
                    if isinstance(operand, gast.Name):
                        continue  # (a copy: seen through when matched)
                decoded = self.fuser.decode(operand)
                if decoded is None or decoded.op is not template.op:
                    return False
        return True

    def reads_shared(self, name: str, shared: tuple) -> tuple | None:
        """``(name, position of the definition read)`` where a read of ``name``
        reads the value ``shared`` names, itself or through copies of it the match
        absorbed already (``dt7 = dt8``, both read again); else None."""
        position = self.scope.get(name)
        read = key = (name, position)
        while key != shared:
            if position is None or position not in self.consumed:
                return None
            value = self.before[position].value
            if not isinstance(value, gast.Name):
                return None
            position = self.definitions.before(position).get(value.id)
            key = (value.id, position)
        return read

    def bind(self, parameter: str, expression) -> bool:
        """Binds a pattern parameter to ``expression`` (seen through copies), or
        checks that it is the one bound already."""
        expression = self.resolved(expression)
        self.argument_reads.append((loads(expression), self.position))
        if parameter in self.bindings:
            return same(self.bindings[parameter], expression)
        self.bindings[parameter] = expression
        return True

    def definition(self, template, name: str) -> bool:
        """Matches ``template`` against the statement whose value a read of ``name``
        (in the statement being matched) reads, absorbing it."""
        position = self.scope.get(name)
        if position is None:
            return False
        key = (name, position)
        self.uses[key] = self.uses.get(key, 0) + 1
        if position in self.consumed:
            return False
        self.consumed.add(position)
        scope, inside = self.scope, self.position
        self.scope, self.position = self.definitions.before(position), position
        matched = self.node(template, self.before[position].value)
        self.scope, self.position = scope, inside
        if matched:  # (the statement computing it, not a copy of it read first)
            self.shared.setdefault(id(template), key)
        return matched

    def resolved(self, expression):
        """``expression``, or where it is a name a copy ``a = b`` assigned once
        defines, the name it copies (where nothing assigns that between the copy
        and the read), recursively: the value itself."""
        first = True
        while isinstance(expression, gast.Name):
            name = expression.id
            position = self.scope.get(name)
            if position is None or self.fuser.stores.get(name) != 1:
                break
            value = self.before[position].value
            if not isinstance(value, gast.Name):
                break
            source = {value.id}
            if self.reaching(source, position) != self.reaching(source, self.position):
                break  # (it copies a value the name no longer has here)
            if first:
                self.copy_reads[name] = self.copy_reads.get(name, 0) + 1
                first = False
            self.copies[name] = (position, value.id)
            expression = value
        return expression

    def separate(self, template):
        """Matches a value of a multi-output pattern that its last value does not
        compute: the latest statement (not absorbed) whose value it is, with the
        bindings so far. Its ``(name, position)``, or None."""
        for position in range(self.root - 1, -1, -1):
            statement = self.before[position]
            if position in self.consumed or not single_target(statement):
                continue
            decoded = self.fuser.decode(statement.value)
            if decoded is None or decoded.op is not template.op:
                continue
            trial = self.fork()
            trial.scope, trial.position = self.definitions.before(position), position
            if trial.node(template, statement.value):
                trial.scope, trial.position = self.definitions, self.root
                self.__dict__.update(trial.__dict__)
                self.consumed.add(position)
                return statement.targets[0].id, position
        return None

    def fork(self) -> Match:
        """A copy whose matching changes nothing of this one's."""
        trial = Match.__new__(Match)
        trial.__dict__.update(self.__dict__)
        for field in ("bindings", "uses", "shared", "copies", "copy_reads"):
            setattr(trial, field, dict(getattr(self, field)))
        trial.consumed = set(self.consumed)
        trial.argument_reads = list(self.argument_reads)
        trial.kept = list(self.kept)
        return trial

    def retry(self) -> Match | None:
        """A fresh match that swaps the latest commutative operator this one kept
        in the code's order (and those this one swapped before it), or None where
        there is none or no swapped try is left."""
        if not self.kept or self.swaps[0] <= 0:
            return None
        latest = self.kept[-1]
        swapped = frozenset(c for c in self.swapped if c < latest) | {latest}
        return Match(self.fuser, self.definitions, self.before, swapped, self.swaps)

    # --- checking what was matched ---------------------------------------------------

    def complete(self, outputs: list) -> bool:
        """Absorbed definitions must be read only inside the match, but a
        multi-output rule's values (``outputs``, ``(name, position)`` each), which
        the fused call binds."""
        for key, count in self.uses.items():
            if key not in outputs and self.fuser.definition_reads(*key) != count:
                return False
        return True

    def read_elsewhere(self, outputs: list) -> bool:
        """Whether a statement the match does not absorb reads one of ``outputs``."""
        return any(
            self.fuser.definition_reads(*key) != self.uses.get(key, 0)
            for key in outputs
        )

    def copies_left_unread(self) -> set:
        """Positions of the copies seen through that nothing else reads: absorbed
        with the rest (a copy read by another such copy counts as read inside)."""
        inside = dict(self.copy_reads)
        dropped: dict[str, int] = {}
        changed = True
        while changed:
            changed = False
            for name, (position, source) in self.copies.items():
                if name in dropped or position in self.consumed:
                    continue
                if self.fuser.loads.get(name, 0) == inside.get(name, 0):
                    dropped[name] = position
                    inside[source] = inside.get(source, 0) + 1
                    changed = True
        return set(dropped.values())

    # --- where the fused call goes -------------------------------------------------

    def place(self, outputs: list) -> int | None:
        """Where the fused call binding ``outputs`` (``(name, position)`` each, the
        last the root's) may go: the root's position, or else the earliest where
        its arguments are ready; None where neither keeps every statement reading
        the same values (see ``valid_at``)."""
        # where each argument read finds its names defined (found once)
        reached = [self.reaching(names, p) for names, p in self.argument_reads]
        if self.valid_at(self.root, outputs, reached):
            return self.root
        ready = max((d + 1 for found in reached for d in found.values()), default=0)
        while ready < self.root and isinstance(self.before[ready], Comment):
            ready += 1  # (after the "# grad of" line of the statements it replaces)
        if ready < self.root and self.valid_at(ready, outputs, reached):
            return ready
        return None

    def reaching(self, names: set, position: int) -> dict:
        """The position of the last statement before ``position`` assigning each of
        ``names`` (the ones assigned in the block)."""
        found = {}
        for earlier in range(position - 1, -1, -1):
            for name in stores(self.before[earlier]) & names:
                found.setdefault(name, earlier)
            if len(found) == len(names):
                break
        return found

    def valid_at(self, place: int, outputs: list, reached: list) -> bool:
        """Whether the fused call, run before the statement at ``place`` (the root's
        position: in its stead), computes what the absorbed statements did and
        leaves every other statement reading what it read: no argument is assigned
        between where it was read and ``place``; no statement left out assigns a
        value the call binds between that value's definition and the root, or reads
        it before the call or where the code read another definition of it."""
        for (names, position), found in zip(self.argument_reads, reached):
            if set(found.values()) & self.consumed:
                return False  # (the call would read what it replaces)
            for between in range(min(place, position), max(place, position)):
                if stores(self.before[between]) & names:
                    return False
        for name, defined in outputs:
            later = self.definitions.after(name, defined)
            if later is not None and later < self.root and later in self.consumed:
                return False  # (an absorbed statement assigns it again)
            for position in range(min(place, defined), self.root):
                if position in self.consumed:
                    continue
                statement = self.before[position]
                if name in stores(statement):
                    return False
                if name in loads(statement) and not (
                    position >= place and defined < position
                ):
                    return False
        return True


def candidates(fuser, definitions: Definitions, before: list, template, expression):
    """Each match of ``template`` against ``expression`` (the statement after
    ``before``) until the caller takes one: the code's operand orders first, then
    retries with commutative operands swapped (``Match.retry``)."""
    match = Match(fuser, definitions, before)
    while match is not None:
        if match.node(template, expression):
            yield match
        match = match.retry()


def definition_reads(block: list, definitions: Definitions, counts: tuple, name: str,
                     position: int) -> int | None:  # fmt: skip
    """How many times the code reads the value the statement at ``position`` of
    ``block`` assigns to ``name``: the function's reads of it where it is assigned
    once (``counts``: the function's loads and stores by name); where it is assigned
    again, the reads up to and including the next assignment (``g = g + t``), if
    every assignment and read of it is in this block's statements; else None."""
    loads_of, stores_of = counts
    if stores_of.get(name) == 1:
        return loads_of.get(name, 0)
    if len(definitions.positions.get(name, ())) != stores_of.get(name):
        return None  # (assigned by a loop, an unpacking or another block too)
    if sum(name_counts(s, "Load").get(name, 0) for s in block) != loads_of.get(name):
        return None  # (read outside this block)
    following = definitions.after(name, position)
    stop = len(block) if following is None else following + 1
    return sum(name_counts(s, "Load").get(name, 0) for s in block[position + 1 : stop])
