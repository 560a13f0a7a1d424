"""``np.add.at(a, index, b)``: NumPy's unbuffered scatter-add into ``a``, in place
(a repeated index adds each time, where ``a[index] += b`` adds once). It is read
as the augmented assignment it amounts to,

    a += index_add(zeros_like(a), b, index)

which the rest of the pipeline knows: a write into ``a`` (refused where another
name for its array is read afterwards, as ``a += v`` is), and ``index_add`` the
operator whose adjoint gathers ``b``'s gradient back (``getitem``). So is
``np.subtract.at`` (``a -= ...``). The other ufuncs' ``at`` (multiply, maximum,
...) are left to the refusal of calls that write in place.
"""

from __future__ import annotations

import gast
import numpy as np

from ppto.transform import trees

AUGMENTED = {np.add: gast.Add, np.subtract: gast.Sub}


def ufunc_at_as_augmented(tree, namespace) -> dict:
    """Rewrite each ``np.add.at(a, index, b)`` statement of ``tree`` (``a`` a
    name the function binds or is given; positional arguments only) in place;
    the names to bind for the rewritten statements (empty when there is none)."""
    arguments = tree.args
    starred = [a.id for a in (arguments.vararg, arguments.kwarg) if a is not None]
    assigned = trees.stores(tree.body) | {*trees.named_parameters(arguments), *starred}
    # (the operators' names, as the generated code shows them, where free)
    used = {n.id for n in trees.walk(tree) if isinstance(n, gast.Name)}
    names = {
        preferred: _free(preferred, used, namespace)
        for preferred in ("index_add", "zeros_like")
    }
    rewritten = False
    for node in trees.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            for position, statement in enumerate(statements):
                augmented = _augmented(statement, namespace, assigned, names)
                if augmented is not None:
                    statements[position] = augmented
                    rewritten = True
    if not rewritten:
        return {}
    # (imported here: the operators' rules read their source through this package)
    from ppto.ops.indexing import index_add
    from ppto.ops.shape import zeros_like

    return {names["index_add"]: index_add, names["zeros_like"]: zeros_like}


def _free(preferred: str, used: set, namespace) -> str:
    name, number = preferred, 0
    while name in used or name in namespace:
        number += 1
        name = f"{preferred}_{number}"
    return name


def _augmented(statement, namespace, assigned: set, names: dict):
    """``a += index_add(zeros_like(a), b, index)`` for ``np.add.at(a, index, b)``
    (``-=`` for ``np.subtract.at``), at the statement's place; else None."""
    if not (
        isinstance(statement, gast.Expr) and isinstance(statement.value, gast.Call)
    ):
        return None
    call = statement.value
    function = call.func
    if not (isinstance(function, gast.Attribute) and function.attr == "at"):
        return None
    from ppto.transform.resolve import static_value  # (see above: the rules)

    _, ufunc = static_value(function.value, namespace, assigned)
    operation = AUGMENTED.get(ufunc) if isinstance(ufunc, np.ufunc) else None
    if operation is None or call.keywords or len(call.args) != 3:
        return None
    target, index, values = call.args
    if not isinstance(target, gast.Name) or any(
        isinstance(a, gast.Starred) for a in call.args
    ):
        return None
    if target.id not in assigned:  # (a global's array: ``+=`` would make a local)
        return None

    def name(identifier, context=None):
        return gast.Name(identifier, context or gast.Load(), None, None)

    zeros = gast.Call(name(names["zeros_like"]), [name(target.id)], [])
    scattered = gast.Call(name(names["index_add"]), [zeros, values, index], [])
    augmented = gast.AugAssign(name(target.id, gast.Store()), operation(), scattered)
    for node in trees.walk(augmented):
        gast.copy_location(node, statement)
    return augmented
