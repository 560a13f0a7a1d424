"""The normalized program: one operation per statement, every value named.

Operands are variable names (``str``), ``Const`` literals, or ``Verbatim`` expressions
that read no differentiated value (kept as the user wrote them). Each statement keeps
``origin``, the user's statement it came from, for ``# grad of`` comments and errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gast

from ppto.transform import trees


@dataclass(frozen=True)
class Const:
    value: Any


@dataclass
class Verbatim:
    """An expression that needs no derivative, emitted as written (after renaming)."""

    expr: gast.expr
    reads: frozenset = frozenset()


Operand = Any  # str | Const | Verbatim | list of those (list inputs such as concat's)


@dataclass
class Stmt:
    origin: Any = field(default=None, repr=False, kw_only=True)


@dataclass
class Apply(Stmt):
    """``target = op(inputs..., **params)``; ``style`` says how to print it."""

    target: str
    op: Any
    inputs: list
    params: dict  # every parameter, defaults filled: name -> gast expr
    given: tuple = ()  # parameters the user wrote (printed as keywords)
    style: str = "call"  # "call", "binop", "unary", "subscript", "attribute"
    syntax: Any = None  # the operator symbol or the original subscript slice
    result_dtype: Any = None  # the dtype its ``dtype=`` parameter names, if known
    # why inputs of some ranks cannot run as ``op`` (np.dot is not np.matmul for
    # 3-d operands): (a numpy_map.RankCheck, the call to point at)
    rank_check: Any = None
    # the cast_in_place of an augmented assignment (see in_place.py): "cast" for
    # ``t += v`` (and ``xs[i] += v`` on a list), "check" for ``x[i] += v`` on an
    # array (whose write converts the value to x's dtype); "" for any other
    augmented: str = ""


@dataclass
class CallFunction(Stmt):
    """``targets = function(inputs..., **keywords)`` for a user function."""

    targets: list
    function: Any  # a ParsedFunction
    inputs: list
    keywords: dict
    checkpoint: bool = False  # recompute in the backward pass instead of saving


@dataclass
class Passive(Stmt):
    """A statement that needs no derivative, emitted verbatim."""

    node: Any  # a gast statement
    targets: tuple = ()
    reads: frozenset = frozenset()
    opaque: str = ""  # names the call ppto cannot differentiate that computed it
    # evaluated again, it may give another value (an object's attribute, a random
    # draw): a checkpointed loop's reverse takes the value saved, not its own
    rereads: bool = False
    # as rereads, but a call of the user's function only where it may draw random
    # numbers (see ppto.checkpoint.may_draw): its checkpointed call's rerun may
    # differ (replayed from the generators' states); None: as rereads
    differs: bool | None = None
    # the call is of a value the function made (att = Attention(2); att(x))
    calls_local: bool = False
    # the dtype of the array it makes, where the Normalizer knows it: a NumPy
    # constructor's, ``t = np.zeros(n, np.int32)`` (see constructors.py)
    dtype: Any = None


@dataclass
class ListCall(Passive):
    """``target = function(*inputs)`` for a list helper that is linear in its list and
    tensor inputs (``add_at``, ``add_lists``): emitted verbatim like ``Passive``, and
    in forward mode the same function applied to the tangents. ``kinds`` says per
    input "list", "value" (a tensor or tuple), "fixed" (passed through unchanged,
    an index) or "metadata" (passed through, read for its type and shape only: it may
    be a differentiated value)."""

    function: Any = None
    inputs: list = field(default_factory=list)  # operand names; gast for PASSED ones
    kinds: tuple = ()


PASSED = ("fixed", "metadata")  # ListCall inputs passed through unchanged


def lists_passed(call: CallFunction, lists: set) -> tuple:
    """The positions and keywords at which ``call`` passes names in ``lists``."""
    positions = [
        i for i, x in enumerate(call.inputs) if isinstance(x, str) and x in lists
    ]
    names = [k for k, x in call.keywords.items() if isinstance(x, str) and x in lists]
    return tuple(positions) + tuple(sorted(names))


@dataclass
class Pack(Stmt):
    target: str
    items: list


@dataclass
class Unpack(Stmt):
    targets: list
    source: str


@dataclass
class Copy(Stmt):
    target: str
    source: Operand


@dataclass
class If(Stmt):
    test: str  # a variable holding the decision
    body: list
    orelse: list


@dataclass
class Return(Stmt):
    value: Operand


@dataclass
class For(Stmt):
    """``for target in iterable`` (a variable holding a range or index sequence)."""

    target: str
    iterable: str
    body: list
    checkpoint: bool = False  # recompute the body in the reverse loop


@dataclass
class While(Stmt):
    """``while test`` (a verbatim condition, re-evaluated before every iteration)."""

    test: Any
    reads: frozenset
    body: list


@dataclass
class BreakIf(Stmt):
    """``if test: break``, the only form of break after restructuring."""

    test: str


LOOPS = (For, While)


@dataclass
class ListNew(Stmt):
    """``target = []``: a Python list (of tensors) built by appending."""

    target: str


@dataclass
class ListAppend(Stmt):
    target: str  # the list
    value: Operand


@dataclass
class ListPop(Stmt):
    target: str
    source: str


@dataclass
class ListGet(Stmt):
    target: str
    source: str
    index: Any  # a gast expression


def operand_names(operand) -> set[str]:
    """The variables an operand reads."""
    if isinstance(operand, str):
        return {operand}
    if isinstance(operand, Verbatim):
        return set(operand.reads)
    if isinstance(operand, list):
        return (
            set().union(*(operand_names(item) for item in operand))
            if operand
            else set()
        )
    return set()


def reads(statement: Stmt) -> set[str]:
    """Variables a (simple) statement reads."""
    if isinstance(statement, Apply):
        names = set().union(*(operand_names(x) for x in statement.inputs))
        for value in statement.params.values():
            names |= expression_names(value)
        return names
    if isinstance(statement, CallFunction):
        names = set().union(*(operand_names(x) for x in statement.inputs), set())
        for value in statement.keywords.values():
            names |= operand_names(value)
        return names
    if isinstance(statement, Passive):
        return set(statement.reads)
    if isinstance(statement, Pack):
        return operand_names(statement.items)
    if isinstance(statement, Unpack):
        return {statement.source}
    if isinstance(statement, Copy):
        return operand_names(statement.source)
    if isinstance(statement, (If, BreakIf)):
        return {statement.test}
    if isinstance(statement, For):
        return {statement.iterable}
    if isinstance(statement, While):
        return set(statement.reads)
    if isinstance(statement, Return):
        return operand_names(statement.value)
    if isinstance(statement, ListAppend):
        return {statement.target} | operand_names(statement.value)
    if isinstance(statement, (ListPop, ListGet)):
        return {statement.source} | (
            expression_names(statement.index)
            if isinstance(statement, ListGet)
            else set()
        )
    return set()


def blocks(statement: Stmt) -> list:
    """The statement lists nested in a compound statement."""
    if isinstance(statement, If):
        return [statement.body, statement.orelse]
    if isinstance(statement, LOOPS):
        return [statement.body]
    return []


def walk(body: list):
    """Every statement of ``body``, those nested in its blocks included."""
    for statement in body:
        yield statement
        for block in blocks(statement):
            yield from walk(block)


def all_writes(body: list) -> set:
    """Every name assigned anywhere in ``body``, nested blocks included."""
    found = set()
    for statement in body:
        found |= set(writes(statement))
        if isinstance(statement, For):
            found.add(statement.target)
        for block in blocks(statement):
            found |= all_writes(block)
    return found


def writes(statement: Stmt) -> tuple:
    if isinstance(statement, (Apply, Pack, Copy, ListNew, ListPop, ListGet)):
        return (statement.target,)
    if isinstance(statement, (CallFunction, Unpack)):
        return tuple(statement.targets)
    if isinstance(statement, Passive):
        return statement.targets
    return ()


def expression_names(node) -> set[str]:
    if node is None or not hasattr(node, "_fields"):
        return set()
    return {
        child.id
        for child in trees.walk(node)
        if isinstance(child, gast.Name) and isinstance(child.ctx, gast.Load)
    }
