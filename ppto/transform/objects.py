"""Values read statically from the objects a function can see: a global or
closure value, or the object a method's ``self`` is known to hold (see
``ppto.transform.methods``), through attributes and constant indices.
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
    if isinstance(node, gast.Subscript) and constant_index(node) is not None:
        found, holder = read_value(node.value, parsed, local, own, reached)
        index = constant_index(node)
        if found and type(holder) in (list, tuple) and index < len(holder):
            reached.append((holder, index, holder[index]))
            return True, holder[index]
    return False, None


def constant_index(node: gast.Subscript) -> int | None:
    """The index ``node`` reads where it is a constant ``int`` from 0."""
    index = node.slice
    if isinstance(index, gast.Constant) and type(index.value) is int:
        return index.value if index.value >= 0 else None
    return None


def through_self(node: gast.expr, own) -> bool:
    """Whether ``node`` is an attribute read through the known ``self``."""
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return own is not None and isinstance(node, gast.Name) and node.id == own[0]
