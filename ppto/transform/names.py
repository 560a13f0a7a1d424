"""``Namer``: fresh, readable, deterministic names that never collide with the user's.

Temporaries are ``t1, t2, ...``; adjoints are ``d`` + the primal name (``dW``); a
taken name, or a keyword (``def`` for ``ef``), gets the next free numbered variant.
The same input always yields the same names, so generated source is byte-for-byte
reproducible.
"""

from __future__ import annotations

import keyword

import gast

from ppto.transform import trees


class Namer:
    """Hands out names not already in use."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.counters: dict[str, int] = {}

    def reserve(self, name: str) -> str:
        self.taken.add(name)
        return name

    def fresh(self, base: str) -> str:
        """``base`` itself if free (and not a Python keyword: the adjoint of ``ef``
        is ``def1``), else ``base`` with the next free number."""
        if base not in self.taken and not keyword.iskeyword(base):
            return self.reserve(base)
        return self.numbered(base)

    def numbered(self, base: str) -> str:
        """``base1``, ``base2``, ... (``base_1`` after a trailing digit)."""
        joiner = "_" if base[-1:].isdigit() else ""
        count = self.counters.get(base, 0)
        while True:
            count += 1
            name = f"{base}{joiner}{count}"
            if name not in self.taken:
                self.counters[base] = count
                return self.reserve(name)

    def temporary(self) -> str:
        return self.numbered("t")

    def adjoint(self, primal: str) -> str:
        return self.fresh("d" + primal)


def fresh_name(preferred: str, taken: set) -> str:
    """``preferred``, or ``preferred_1``, ``preferred_2``, ... where ``taken`` (or
    Python's keywords) hold it; added to ``taken``. (For names made before a
    ``Namer`` exists: lifted local functions, a pytree's leaves.)"""
    name, number = preferred, 0
    while name in taken or keyword.iskeyword(name):
        number += 1
        name = f"{preferred}_{number}"
    taken.add(name)
    return name


def names_in(tree) -> set[str]:
    """Every identifier used anywhere in a tree."""
    found = set()
    for node in trees.walk(tree):
        if isinstance(node, gast.Name):
            found.add(node.id)
        elif isinstance(node, gast.FunctionDef):
            found.add(node.name)
    return found
