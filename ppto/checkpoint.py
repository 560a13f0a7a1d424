"""``ppto.checkpoint``: trade memory for recomputation in differentiated code.

``ppto.checkpoint(step)(h, x)`` calls ``step`` as usual; inside a differentiated
function, the values ``step`` computes are not kept for the backward pass, which runs
``step`` again. ``for t in ppto.checkpoint(range(n)):`` does the same for a loop body:
only the values carried from one iteration to the next are saved.

A step that draws random numbers (dropout) draws the same ones when it runs again:
``random_states`` records the random generators' states before the forward call and
``replayed`` runs the recomputation from them, then puts the states back (as
PyTorch's checkpoint does with its generator's state). So does a step reading an
object's attributes (``self.W``): the objects' attributes are recorded with the
generators' states, so a weight rebound between vjp's forward pass and its
pullback (``layer.W = ...``) is not what the recomputation reads.
"""

from __future__ import annotations

import dis
import inspect
import random
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import PptoError


class Checkpointed:
    """A function whose intermediate values are recomputed rather than saved."""

    def __init__(self, function: Callable) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", "checkpointed")
        self.__wrapped__ = function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ppto.checkpoint of {self.__name__}>"


def checkpoint(target: Any) -> Any:
    """Mark a function (or a loop's range) for recomputation (see module docstring).

    >>> def rnn_step(h, x, W):
    ...     return np.tanh(x @ W + h)
    >>> step = ppto.checkpoint(rnn_step)
    >>> step
    <ppto.checkpoint of rnn_step>
    >>> for t in ppto.checkpoint(range(steps)):     # doctest: +SKIP
    ...     h = np.tanh(x[t] @ Wx + h @ Wh)
    """
    if callable(target) and not isinstance(target, range):
        return Checkpointed(target)
    try:
        iter(target)
    except TypeError as error:
        raise PptoError(
            f"ppto.checkpoint takes a function or a loop's range, got {target!r}: "
            "write ppto.checkpoint(step)(h, x) or for t in ppto.checkpoint(range(n))"
        ) from error
    return target  # an iterable: the transformer reads the mark from the source


# how deep _generators looks into arguments, attributes and the items of lists,
# tuples and dicts (m.inner.rng, [rng], {"rng": rng}: three)
SEARCH_DEPTH = 4
GENERATOR_TYPES = (np.random.Generator, np.random.RandomState, random.Random)


def _reached(function: Any, arguments: tuple) -> list:
    """The random generators a call of ``function`` may draw from, and the
    objects whose attributes it may read: NumPy's and Python's global
    generators, and the generators (NumPy's, ``random.Random``) and objects
    among the arguments, the items of lists, tuples and dicts and objects'
    attributes (``self.rng``, ``m.inner.rng``, ``[rng]``: a few levels deep), and
    the globals and closures of ``function`` and of the user's functions it
    refers to."""
    found: dict[int, Any] = {id(np.random): np.random, id(random): random}
    seen: set = set()

    def add(value: Any, depth: int) -> None:
        if value is None or isinstance(value, (np.ndarray, int, float, str, bytes)):
            return  # (quickly: most arguments)
        if isinstance(value, GENERATOR_TYPES):
            found.setdefault(id(value), value)
        elif id(value) in seen:
            return
        elif isinstance(value, Checkpointed):
            add(value.function, depth)
        elif inspect.ismethod(value):
            add(value.__self__, depth)
            add(value.__func__, depth)
        elif isinstance(value, types.FunctionType):
            seen.add(id(value))
            for cell in value.__closure__ or ():
                try:
                    add(cell.cell_contents, depth)
                except ValueError:  # (a cell not yet filled)
                    continue
            for default in _defaults(value):  # (def step(x, rng=RNG))
                add(default, depth)
            for code in _codes(value.__code__):
                for global_name in code.co_names:
                    if global_name in value.__globals__:
                        add(value.__globals__[global_name], depth)
                for reached in _module_attributes(value, code):
                    add(reached, depth)  # (helpers.noisy(x): helpers.RNG)
        elif depth > 0 and not isinstance(value, (type, types.ModuleType)):
            seen.add(id(value))
            if isinstance(value, (list, tuple)):
                items = value
            elif isinstance(value, dict):
                items = value.values()
            elif type(getattr(value, "__dict__", None)) is dict:
                found[id(value)] = value  # (its attributes: self.W)
                items = list(vars(value).values())
            else:
                items = ()
            for item in items:
                add(item, depth - 1)

    add(function, SEARCH_DEPTH)
    for argument in arguments:
        add(argument, SEARCH_DEPTH)
    return list(found.values())


# the methods that draw random numbers (rng.normal, rs.rand, r.random ...)
DRAWING_METHODS = frozenset(
    name
    for kind in (np.random.Generator, np.random.RandomState, random.Random)
    for name in dir(kind)
    if not name.startswith("_")
) - {"bit_generator", "getstate", "get_state", "spawn"}


def may_draw(function: Any) -> bool:
    """Whether a call of ``function``, a user's function that generated code runs
    as written, may draw random numbers, so that running it again may give
    another result: its code (or that of a function of the user's it refers to)
    calls a method named as a random generator's (``rng.normal``), names
    ``random`` (``np.random.rand``, ``random.random``), or refers to a
    generator in its globals or closure, or assigns a global (a counter)."""
    seen: set = set()

    def draws(value: Any) -> bool:
        if isinstance(value, (np.random.Generator, np.random.RandomState)):
            return True
        if isinstance(value, random.Random) or value is random or value is np.random:
            return True
        if isinstance(value, Checkpointed):
            return draws(value.function)
        if inspect.ismethod(value):
            return draws(value.__func__)
        if not isinstance(value, types.FunctionType) or id(value) in seen:
            return False
        seen.add(id(value))
        for cell in value.__closure__ or ():
            try:
                if draws(cell.cell_contents):
                    return True
            except ValueError:  # (a cell not yet filled)
                continue
        if any(map(draws, _defaults(value))):
            return True
        for code in _codes(value.__code__):
            if any(i.opname == "STORE_GLOBAL" for i in dis.get_instructions(code)):
                return True  # (global state it changes: a counter)
            if any(map(draws, _module_attributes(value, code))):
                return True
            for name in code.co_names:
                if name in value.__globals__:
                    if draws(value.__globals__[name]):
                        return True
                elif name in DRAWING_METHODS:  # (an attribute: a method called)
                    return True
        return False

    return draws(function)


def _defaults(function: types.FunctionType) -> list:
    """``function``'s default values, positional and keyword-only."""
    keywords = function.__kwdefaults__ or {}
    return [*(function.__defaults__ or ()), *keywords.values()]


# modules whose functions draw only from NumPy's or Python's global generators
# (always replayed) or not at all: their attributes are not searched
LIBRARIES = frozenset({"numpy", "ppto", "cupy", "scipy"}) | sys.stdlib_module_names


def _module_attributes(function: types.FunctionType, code: types.CodeType) -> list:
    """The values ``code`` may reach as attributes of a user's module among
    ``function``'s globals (``helpers.noisy`` for ``import helpers``): each
    attribute of such a module named in the code."""
    modules = [
        module
        for name in code.co_names
        if isinstance(module := function.__globals__.get(name), types.ModuleType)
        and module.__name__.split(".")[0] not in LIBRARIES
    ]
    return [
        getattr(module, name)
        for module in modules
        for name in code.co_names
        if name in vars(module)
    ]


def _codes(code: types.CodeType) -> list:
    """``code`` and the code of the functions defined inside it."""
    inner = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return [code] + [nested for c in inner for nested in _codes(c)]


class _Attributes(dict):
    """An object's attributes as a checkpointed call found them (a state)."""


def _state(generator: Any) -> Any:
    if not isinstance(generator, GENERATOR_TYPES) and not isinstance(
        generator, types.ModuleType
    ):
        return _Attributes(vars(generator))  # (an object: its attributes)
    if generator is random:
        return random.getstate()
    if generator is np.random:
        return np.random.get_state()
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    if isinstance(generator, random.Random):
        return generator.getstate()
    return generator.get_state()


def _set_state(generator: Any, state: Any) -> None:
    if type(state) is _Attributes:  # (an object: attributes bound since dropped)
        attributes = vars(generator)
        for name in [name for name in attributes if name not in state]:
            del attributes[name]
        attributes.update(state)
    elif generator is random:
        random.setstate(state)
    elif generator is np.random:
        np.random.set_state(state)
    elif isinstance(generator, np.random.Generator):
        generator.bit_generator.state = state
    elif isinstance(generator, random.Random):
        generator.setstate(state)
    else:
        generator.set_state(state)


def random_states(function: Any, *arguments: Any) -> list:
    """The states of the random generators a checkpointed call may draw from,
    and the attributes of the objects it may read, taken before the call
    (generated code calls this; see the module docstring).

    >>> states = random_states(np.tanh)
    >>> a = np.random.random_sample()
    >>> replayed(states, np.random.random_sample) == a
    True
    """
    return [(g, _kept_state(g)) for g in _reached(function, arguments)]


# the last state taken of a few generators (by id): a state equal to it is kept
# as that same object, so that a checkpointed loop whose steps draw nothing from
# a generator keeps one copy of its state, not one per step (NumPy's global state
# is 2.5 kB and Python's 625 numbers, about 25 kB: a 200-step loop of a method
# over a 2x16 state kept 5.8 MB, where the unchecked loop kept 0.6 MB)
_LAST_STATES: dict = {}
LAST_STATES_KEPT = 16


def _kept_state(generator: Any) -> Any:
    """``generator``'s state, the object taken last time where it is unchanged."""
    state = _state(generator)
    if type(state) is _Attributes:
        return _kept_attributes(generator, state)
    last = _LAST_STATES.get(id(generator))
    if last is not None and _same(last, state):
        return last
    if len(_LAST_STATES) >= LAST_STATES_KEPT:
        _LAST_STATES.pop(next(iter(_LAST_STATES)), None)
    _LAST_STATES[id(generator)] = state
    return state


# per live object (by id, dropped with it), the attributes taken last: a step
# that rebinds none keeps that same copy (a checkpointed loop over a method kept
# a dict of references per object and step)
_LAST_ATTRIBUTES: dict = {}


def _kept_attributes(holder: Any, attributes: _Attributes) -> _Attributes:
    """``attributes``, or the copy taken last time where each is the same object."""
    key = id(holder)
    entry = _LAST_ATTRIBUTES.get(key)
    if entry is not None and entry[0]() is holder:
        last = entry[1]
        if last.keys() == attributes.keys() and all(
            attributes[name] is value for name, value in last.items()
        ):
            return last
    try:
        alive = weakref.ref(holder, lambda _, key=key: _LAST_ATTRIBUTES.pop(key, None))
    except TypeError:  # (no weak reference to it: a copy each time)
        return attributes
    _LAST_ATTRIBUTES[key] = (alive, attributes)
    return attributes


def _same(state: Any, other: Any) -> bool:
    """Whether two generator states (tuples and dicts of numbers, strings and
    arrays) are equal."""
    if type(state) is not type(other):
        return False
    try:
        return bool(state == other)  # (Python's: one comparison of 625 numbers)
    except ValueError:  # (arrays inside, NumPy's: compared item by item)
        pass
    if isinstance(state, np.ndarray):
        return state.shape == other.shape and bool(np.array_equal(state, other))
    if isinstance(state, dict):
        return state.keys() == other.keys() and all(
            _same(state[key], other[key]) for key in state
        )
    return len(state) == len(other) and all(map(_same, state, other))


def rewind(states: list) -> None:
    """Put the random generators (and objects) back to ``states``, taken by
    ``random_states``: a Jacobian made one tangent pass at a time draws, for each
    column, the random numbers its first column drew (as one call of the
    function would), and the generators go on from there."""
    for generator, state in states:
        _set_state(generator, state)


def replayed(states: list, function: Callable, /, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` run from the random generators' ``states``
    (and the objects' attributes); they are as before afterwards."""
    now = [(generator, _state(generator)) for generator, _ in states]
    rewind(states)
    try:
        return function(*args, **kwargs)
    finally:
        rewind(now)
