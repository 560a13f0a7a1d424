"""Releasing dead values in the code that runs: ``t1 = None`` after the last
statement that reads ``t1``.

Generated code names every intermediate, and a Python frame keeps every local alive
until the function returns, so without this a gradient would hold all its
temporaries at once, where hand-written NumPy frees each as soon as the expression
that used it is done. Holding them costs memory and time: a freed buffer is reused by
the next allocation of its size, a fresh one is page-faulted in. Names are released
in straight-line code and in the branches of ``if``; a loop is one statement (what
it reads stays alive until it ends). Assigning ``None`` rather than ``del`` keeps
names that some paths never bound safe to release.
"""

from __future__ import annotations

import gast

from ppto.transform.trees import loads, stores


def release_dead_values(definition: gast.FunctionDef) -> gast.FunctionDef:
    """``definition`` with its dead locals released (see the module docstring)."""
    parameters = {argument.id for argument in definition.args.args}
    local = stores(definition.body) - parameters
    definition.body = _block(definition.body, set(), local)
    return definition


def _block(body: list, live_after: set, local: set) -> list:
    read = [loads(statement) for statement in body]
    read_later = [set(live_after)]  # read_later[k]: read after statement -1-k
    for names in reversed(read[1:]):
        read_later.append(read_later[-1] | names)
    read_later.reverse()
    out = []
    for position, statement in enumerate(body):
        later = read_later[position]
        if isinstance(statement, gast.If):
            statement.body = _block(statement.body, later, local)
            statement.orelse = _block(statement.orelse, later, local)
        out.append(statement)
        if isinstance(statement, gast.Return):
            continue
        touched = (
            loads(statement.test)  # the branches release what they use
            if isinstance(statement, gast.If)
            else read[position] | stores(statement)
        )
        dead = sorted((touched & local) - later)
        if dead:
            targets = [gast.Name(n, gast.Store(), None, None) for n in dead]
            out.append(gast.Assign(targets, gast.Constant(None, None), None))
    return out
