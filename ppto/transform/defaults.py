"""Parameter defaults as the ``def`` bound them.

Python evaluates a default once, when the ``def`` runs; generated code repeats the
user's signature, and a default expression copied into it would be evaluated again,
where it may read another value (``s=a``, ``a`` rebound since) or a name not in
scope (``k=k``, a loop's or an enclosing function's variable); a literal written
there may no longer be the default (``f.__defaults__ = (10.0,)``). Each default
that is not a literal of its value as written becomes the value the function holds
(``__defaults__``, ``__kwdefaults__``): a literal where it is one (``s=2.0``),
else a name ppto binds to it (``w=w_default``), or the user's name where that still
holds the very same object.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections import ChainMap

import gast
import numpy as np

from ppto.transform import trees
from ppto.transform.normalize import constant_expr

_MISSING = object()


def bind_defaults(parsed):
    """``parsed`` with each default of its signature the value its function holds
    (the module docstring): its tree's defaults replaced in place, the names bound
    for them in a namespace of its own, and listed in ``bound`` (no scope of the
    user's holds them, so there is nothing there to watch for rebinding)."""
    values = default_values(parsed.fn)
    arguments = parsed.tree.args
    positional = arguments.posonlyargs + arguments.args
    holders = positional[len(positional) - len(arguments.defaults) :]
    pairs = list(zip(holders, arguments.defaults))
    pairs += [p for p in zip(arguments.kwonlyargs, arguments.kw_defaults) if p[1]]
    taken = {node.id for node in trees.walk(parsed.tree) if isinstance(node, gast.Name)}
    # (a name the function binds is another variable inside it: ``k=k``)
    local = set(parsed.parameters) | trees.stores(parsed.tree.body)
    bound = {}
    replaced = {}
    for parameter, written in pairs:
        value = values.get(parameter.id, _MISSING)
        if value is _MISSING or _holds(written, value, parsed.namespace, local):
            continue
        if is_literal(value):
            replaced[parameter.id] = constant_expr(value)
            continue
        label = _fresh(f"{parameter.id}_default", parsed.namespace, taken | set(bound))
        bound[label] = value
        replaced[parameter.id] = gast.Name(label, gast.Load(), None, None)
    if not replaced:
        return parsed
    for index, parameter in enumerate(holders):
        if parameter.id in replaced:
            arguments.defaults[index] = replaced[parameter.id]
    for index, parameter in enumerate(arguments.kwonlyargs):
        if parameter.id in replaced:
            arguments.kw_defaults[index] = replaced[parameter.id]
    if not bound:
        return parsed
    maps = parsed.namespace.maps
    namespace = ChainMap({**maps[0], **bound}, *maps[1:])
    return dataclasses.replace(
        parsed, namespace=namespace, bound=parsed.bound | frozenset(bound)
    )


def default_values(function) -> dict:
    """Parameter name -> the default ``function`` holds for it.

    >>> default_values(lambda x, s=2.0, *, t=None: x)
    {'s': 2.0, 't': None}
    """
    code = getattr(function, "__code__", None)
    if code is None:
        return {}
    positional = code.co_varnames[: code.co_argcount]  # (positional-only included)
    defaults = getattr(function, "__defaults__", None) or ()
    values = dict(zip(positional[len(positional) - len(defaults) :], defaults))
    values.update(getattr(function, "__kwdefaults__", None) or {})
    return values


def _holds(written, value, namespace, local: set) -> bool:
    """Whether the default expression ``written`` gives ``value`` where generated
    code evaluates it: a literal of that value (``__defaults__`` may have been
    given others since the ``def``), or a global of the function's (not one of its
    ``local`` names) that holds that very object still."""
    if _literal_expr(written):
        return is_literal(value) and _same_literal(_literal_value(written), value)
    if isinstance(written, gast.Name) and written.id not in local:
        return namespace.get(written.id, _MISSING) is value
    return False


def _literal_expr(node) -> bool:
    if isinstance(node, gast.Constant):
        return True
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, (gast.USub, gast.UAdd)):
        return isinstance(node.operand, gast.Constant)
    if isinstance(node, gast.Tuple):
        return all(_literal_expr(item) for item in node.elts)
    return False


def _literal_value(node):
    """The value of a literal expression (``_literal_expr``)."""
    return ast.literal_eval(gast.unparse(node))


def _same_literal(written, value) -> bool:
    """Whether two literal values are one value of one type (``2`` is not ``2.0``,
    nor ``0.0`` ``-0.0``: each writes another number into generated code)."""
    if isinstance(written, tuple) and isinstance(value, tuple):
        return len(written) == len(value) and all(map(_same_literal, written, value))
    return type(written) is type(value) and repr(written) == repr(value)


def is_literal(value) -> bool:
    """Whether ``value`` is written back exactly by a literal in generated code
    (an infinity or a NaN has none; a NumPy scalar's repr names np, which the
    code may not see)."""
    if isinstance(value, tuple):
        return all(is_literal(item) for item in value)
    if type(value) is float:
        return math.isfinite(value)
    return value is None or type(value) in (bool, int, str)


def _fresh(label: str, namespace, taken: set) -> str:
    """``label``, numbered where the user's scopes or the function hold it."""
    fresh, number = label, 0
    while fresh in namespace or fresh in taken:
        number += 1
        fresh = f"{label}_{number}"
    return fresh


def watched_defaults(function) -> list:
    """What ``Program.reached`` watches so that a program made with ``function``'s
    defaults is stale once they are given others (``f.__defaults__ = (10.0,)``,
    ``f.__kwdefaults__["s"] = 10.0``): ``(holder, attribute or key, value)``."""
    defaults = getattr(function, "__defaults__", None)
    keywords = getattr(function, "__kwdefaults__", None)
    if defaults is None and keywords is None:
        return []
    found = [
        (function, "__defaults__", defaults),
        (function, "__kwdefaults__", keywords),
    ]
    found += [(keywords, key, value) for key, value in (keywords or {}).items()]
    return found


def changeable_defaults(function) -> list:
    """The parameters whose default a write could change (an array, a list, a
    dict; not a number, a string, None or a tuple of these): Python keeps such a
    change for the next call that leaves the parameter out."""
    return [
        parameter
        for parameter, value in default_values(function).items()
        if not _unchangeable(value)
    ]


def _unchangeable(value) -> bool:
    if isinstance(value, tuple):
        return all(map(_unchangeable, value))
    return value is None or isinstance(value, (*_SCALARS, np.generic))


_SCALARS = (bool, int, float, complex, str, bytes)
