"""Pytree arguments of the random programs: for some seeds the second parameter is
``params``, a dict, list, tuple or nested dict holding ``y`` and further leaves
(``b`` of shape (M,), the float ``c``), read at the top of the body through
constant keys, indices, unpacking or a loop. The checks compare gradients leaf by
leaf: ``leaves`` flattens arguments (dicts in key order, then lists and tuples in
order) and ``rebuild`` puts leaves back into an argument's structure.
"""

from __future__ import annotations

import random

import numpy as np

PYTREE_PROBABILITY = 0.2
KINDS = ["dict", "list", "tuple", "nested"]
# (lines of the body's start, the leaves' names they bind) per kind
PREAMBLES = {
    "dict": [
        (['y = params["y"]', 'b = params["b"]', 'c = params["c"]'], "ybc"),
        (['y, b, c = params["y"], params["b"], params["c"]'], "ybc"),
        (
            [
                'y, b = params["y"], params["b"]',
                "acc0 = 0.0",
                "for key, leaf in params.items():",
                "    acc0 = acc0 + np.sum(np.tanh(leaf))",
            ],
            "yb",
        ),
        (
            [
                'y = params["y"]',
                'c = params["c"]',
                "acc0 = sum(np.sum(leaf * leaf) for leaf in params.values())",
            ],
            "yc",
        ),
    ],
    "list": [
        (["y, b = params"], "yb"),
        (["y = params[0]", "b = params[-1]"], "yb"),
        (
            [
                "y = params[0]",
                "acc0 = 0.0",
                "for leaf in params:",
                "    acc0 = acc0 + np.sum(np.sin(leaf))",
            ],
            "y",
        ),
    ],
    "tuple": [(["y, c = params"], "yc"), (["y = params[0]", "c = params[1]"], "yc")],
    "nested": [
        (['y = params["y"]', 'b, c = params["more"]'], "ybc"),
        (['y = params["y"]', 'acc0 = tree_product(params["more"])'], "y"),
    ],
}
TREE_PRODUCT = "def tree_product(p):\n    return np.sum(np.tanh(p[0]) * p[1])"


def pytree_layout(seed: int) -> tuple[str, list[str], str] | None:
    """(kind, the body's first lines, the names they bind) for a seed whose
    second parameter is a pytree, None otherwise; its own random stream, so the
    rest of the program is drawn as before."""
    rng = random.Random(seed * 31 + 7)
    if rng.random() >= PYTREE_PROBABILITY:
        return None
    kind = rng.choice(KINDS)
    lines, names = rng.choice(PREAMBLES[kind])
    return kind, lines, names


def pytree_argument(seed: int, kind: str, y, dtype):
    """The ``params`` of ``kind`` holding ``y``; ``b`` read-only like the other
    arrays."""
    rng = np.random.default_rng(seed + 10_000)
    b = np.asarray(rng.uniform(-1.0, 1.0, size=4), dtype=dtype)
    b.flags.writeable = False
    c = float(rng.uniform(-1.0, 1.0))
    return {
        "dict": lambda: {"y": y, "b": b, "c": c},
        "list": lambda: [y, b],
        "tuple": lambda: (y, c),
        "nested": lambda: {"y": y, "more": [b, c]},
    }[kind]()


def leaves(value) -> list:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def rebuild(template, flat):
    """``template``'s structure holding the next leaves of iterator ``flat``."""
    if isinstance(template, dict):
        return {key: rebuild(item, flat) for key, item in template.items()}
    if isinstance(template, (list, tuple)):
        return type(template)(rebuild(item, flat) for item in template)
    return next(flat)


def rebuild_arguments(template: tuple, flat) -> tuple:
    """The arguments ``template`` with its leaves replaced by ``flat``'s."""
    flat = iter(flat)
    return tuple(rebuild(argument, flat) for argument in template)


def copy_leaves(value):
    """A copy of ``value`` whose arrays are writable copies."""
    return rebuild(
        value,
        iter(a.copy() if isinstance(a, np.ndarray) else a for a in leaves(value)),
    )
