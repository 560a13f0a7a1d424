"""Values read statically from the objects a function can see: a global or
closure value, or the object a method's ``self`` is known to hold (see
``ppto.transform.methods``), through attributes, constant indices of lists and
tuples (``self.layers[-1]``) and constant keys of dicts (``self.blocks["enc"]``).
"""

from __future__ import annotations

import gast

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
