"""Values read statically from the objects a function can see: a global or
closure value, or the object a method's ``self`` is known to hold (see
``ppto.transform.methods``), through attributes, constant indices of lists and
tuples (``self.layers[-1]``) and constant keys of dicts (``self.blocks["enc"]``).
``getattr(self, "blocks")`` and ``self.blocks.get("enc")`` are first written as
those reads (``spelled_as_reads``), so that everything that follows them sees one
spelling.
"""

from __future__ import annotations

import builtins

import gast

from ppto.transform import trees
from ppto.transform.resolve import static_value
from ppto.transform.source import ParsedFunction

MISSING = object()


def read_value(node: gast.expr, parsed: ParsedFunction, local: set, own, reached: list):
    """``(found, value)`` of a name or attribute chain read from outside the
    function, or from the object ``self`` is known to hold, recording each
    attribute read in ``reached``."""
    if isinstance(node, gast.Name):
        if own is not None and node.id == own[0]:
            return True, own[1]
        return static_value(node, parsed.namespace, local)
    if isinstance(node, gast.Attribute):
        found, holder = read_value(node.value, parsed, local, own, reached)
        try:  # (a property may raise: not known here, read where the code runs)
            value = getattr(holder, node.attr) if found else MISSING
        except Exception:
            value = MISSING
        if value is not MISSING:
            reached.append((holder, node.attr, value))
            return True, value
    if isinstance(node, gast.Subscript) and constant_key(node) is not None:
        found, holder = read_value(node.value, parsed, local, own, reached)
        key = constant_key(node)
        if found and holds(holder, key):
            reached.append((holder, key, holder[key]))
            return True, holder[key]
    return False, None


def constant_key(node: gast.Subscript) -> int | str | None:
    """The index or key ``node`` reads where it is a constant ``int`` (from the
    end where negative; see ``constant_int``) or ``str``."""
    key = node.slice
    if isinstance(key, gast.Constant) and type(key.value) is str:
        return key.value
    return constant_int(key)


FOLDED = {gast.Add: int.__add__, gast.Sub: int.__sub__, gast.Mult: int.__mul__}


def constant_int(node) -> int | None:
    """The ``int`` ``node`` writes with constants alone, else None: ``1``, ``-1``
    (parsed as the negation of 1) and sums, differences and products of them
    (``1 - 1``: an unrolled loop's count in ``self.layers[i - 1]``)."""
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        value = constant_int(node.operand)
        return None if value is None else -value
    if isinstance(node, gast.BinOp) and type(node.op) in FOLDED:
        left, right = constant_int(node.left), constant_int(node.right)
        if left is None or right is None:
            return None
        return FOLDED[type(node.op)](left, right)
    return None


def holds(holder, key) -> bool:
    """Whether ``holder`` is a list or tuple with index ``key`` or a dict with
    that key (what ``read_value`` follows: what other containers give when
    indexed is their own code's)."""
    if type(holder) in (list, tuple):
        return type(key) is int and -len(holder) <= key < len(holder)
    return type(holder) is dict and key in holder


def through_self(node: gast.expr, own) -> bool:
    """Whether ``node`` is an attribute read through the known ``self``."""
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return own is not None and isinstance(node, gast.Name) and node.id == own[0]


def spelled_as_reads(
    body: list, parsed: ParsedFunction, local: set, own, refuse: bool = True
) -> list:
    """``body`` with ``getattr(obj, name)`` of a known object and a name known
    when the code is made (written out, a module-level string, or a local name
    given one string once) written ``obj.name``, and ``d.get(key)`` of a dict the
    code can see holding ``key`` written ``d[key]``: the same reads, whose
    objects are then followed and watched as any (a ``.get`` of a missing key, or
    a ``getattr`` whose object has no such attribute, is left as written, and
    its call refused where ``refuse``: not before loops over names are unrolled,
    which make their ``getattr(self, name)`` ones of names written out)."""
    spell = _Spell(parsed, local, own, refuse)
    return [spell.visit(statement) for statement in body]


class _Spell(trees.Transformer):
    """``spelled_as_reads``'s rewrite of calls (a class made once, not per call)."""

    def __init__(self, parsed: ParsedFunction, local: set, own, refuse):
        self.parsed, self.local, self.own = parsed, local, own
        self.refuse = refuse
        self.found_strings = None

    def strings(self) -> dict:
        """``_strings_bound_once`` of the function, found when first asked for (a
        walk of the whole tree that most functions, with no ``getattr``, never
        need; the calls rewritten before then change no name's bindings)."""
        if self.found_strings is None:
            self.found_strings = _strings_bound_once(self.parsed.tree, self.local)
        return self.found_strings

    def visit_Call(self, node):
        self.generic_visit(node)
        read = _as_read(node, self.parsed, self.local, self.own, self.strings)
        if read is None:
            if self.refuse:
                _refuse_a_callee_not_read(node, self.parsed, self.local, self.own)
            return node
        return gast.copy_location(read, node)


def _as_read(call: gast.Call, parsed: ParsedFunction, local: set, own, strings):
    """``call`` as the attribute or item read it is (see ``spelled_as_reads``),
    else None."""
    if call.keywords:
        return None
    func = call.func
    if (
        isinstance(func, gast.Name)
        and func.id == "getattr"
        and func.id not in local
        and parsed.namespace.get("getattr") is builtins.getattr
        and len(call.args) in (2, 3)
    ):
        name = _known_string(call.args[1], parsed, local, strings)
        if name is None or not name.isidentifier():
            return None
        found, holder = read_value(call.args[0], parsed, local, own, [])
        if not found or not _has(holder, name):
            return None
        return gast.Attribute(call.args[0], name, gast.Load())
    if (
        isinstance(func, gast.Attribute)
        and func.attr == "get"
        and len(call.args) in (1, 2)
        and isinstance(call.args[0], gast.Constant)
    ):
        found, holder = read_value(func.value, parsed, local, own, [])
        key = call.args[0].value
        if found and type(holder) is dict and type(key) in (int, str) and key in holder:
            return gast.Subscript(func.value, call.args[0], gast.Load())
    return None


def _refuse_a_callee_not_read(call, parsed: ParsedFunction, local: set, own):
    """Refuse at its line a call, on values the function computes, of what
    ``getattr`` or ``.get`` of an object the code can see gives where
    ``spelled_as_reads`` could not say what that is (a name known only when the
    code runs, a key the dict lacks): ppto generates code for the layer called
    (it said "has no ppto operator"). A call on constants alone runs as
    written."""
    func = call.func
    while isinstance(func, (gast.Attribute, gast.Subscript)):
        func = func.value
    if not isinstance(func, gast.Call) or func.keywords or not func.args:
        return  # (decided first: the names the arguments read cost a walk each)
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    if not any(trees.loads(argument) & local for argument in arguments):
        return
    getter = func.func
    if isinstance(getter, gast.Name) and getter.id == "getattr":
        held = func.args[0]
        what = "the attribute's name is known only when the code runs"
        instead = (
            "write the name out (getattr(self, 'blocks')), or bind it to one "
            "string once in the function"
        )
    elif isinstance(getter, gast.Attribute) and getter.attr == "get":
        held = getter.value
        what = f"{gast.unparse(held).strip()} has no key {gast.unparse(func.args[0])}"
        what = what.strip() + " known when the code is made"
        instead = "read a key it holds, written out (self.blocks['enc'])"
    else:
        return
    found, _ = read_value(held, parsed, local, own, [])
    if found:
        raise parsed.source.error(
            func,
            f"ppto cannot differentiate the call of {gast.unparse(func).strip()}: "
            f"{what}, and ppto generates code for the layer called",
            instead,
        )


def _has(holder, name: str) -> bool:
    try:  # (a property may raise: read where the code runs)
        getattr(holder, name)
    except Exception:
        return False
    return True


def _known_string(node, parsed: ParsedFunction, local: set, strings):
    """The string ``node`` is when the code is made, else None (``strings``: the
    function's ``_strings_bound_once``, asked for)."""
    if isinstance(node, gast.Constant):
        return node.value if type(node.value) is str else None
    if isinstance(node, gast.Name) and node.id in strings():
        return strings()[node.id]
    found, value = static_value(node, parsed.namespace, local)
    return value if found and type(value) is str else None


def _strings_bound_once(tree, local: set) -> dict:
    """Local names bound once in the function, to a string written out (not a
    parameter: those are not stores)."""
    bound: dict = {}
    counts: dict = {}
    for node in trees.walk(tree):
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
        target = trees.single_target(node)
        if (
            target is not None
            and isinstance(node.value, gast.Constant)
            and type(node.value.value) is str
        ):
            bound[target] = node.value.value
    return {name: text for name, text in bound.items() if counts.get(name) == 1}
