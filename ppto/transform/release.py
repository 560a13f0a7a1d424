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
    """``body`` with each local released after its last read or write. (Walked
    backwards with one set of the names read later: a set per statement of all
    those read after it grew with the body's length squared.)"""
    read_later = set(live_after)
    pieces = []  # each statement with what follows it, last statement first
    for statement in reversed(body):
        read = loads(statement)
        if isinstance(statement, gast.If):
            statement.body = _block(statement.body, read_later, local)
            statement.orelse = _block(statement.orelse, read_later, local)
        pieces.append([statement])
        if not isinstance(statement, gast.Return):
            touched = (
                loads(statement.test)  # the branches release what they use
                if isinstance(statement, gast.If)
                else read | stores(statement)
            )
            dead = sorted((touched & local) - read_later)
            if dead:
                targets = [gast.Name(n, gast.Store(), None, None) for n in dead]
                pieces[-1].append(gast.Assign(targets, gast.Constant(None, None), None))
        read_later |= read
    return [statement for piece in reversed(pieces) for statement in piece]
