"""Local functions given dicts: where every call of a function defined inside the
function passes, at one of its parameters, a dict of the same keys (a name
``dicts.py`` holds as the list of its values, or a dict written out), that
parameter is read as such a dict in the local function (``p["W"]`` as ``p[0]``)
and the calls pass the list. A parameter given a dict at one call and something
else (or a dict of other keys) at another, rebound in the function or returned
whole is refused at the user's line.
"""

from __future__ import annotations

import gast

from ppto.transform import trees
from ppto.transform.dicts import bound_by, literal_keys


def dict_parameters(nested: list, nodes: list, keys: dict, source) -> dict:
    """``{local function's name: {parameter: the keys of the dicts it is
    given}}`` from the calls among ``nodes`` of the functions ``nested``
    (their definitions), ``keys``: the dicts held by name."""
    definitions = {inner.name: inner for inner in nested}
    given: dict = {}  # (function, parameter) -> (keys, the argument)
    other: dict = {}  # (function, parameter) -> an argument that is no dict
    for node in nodes:
        if not (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Name)
            and node.func.id in definitions
        ):
            continue
        for parameter, value in _arguments(node, definitions[node.func.id]):
            where = (node.func.id, parameter)
            if isinstance(value, gast.Name):
                found = keys.get(value.id)
            else:
                found = literal_keys(value)
            if found is None:
                other.setdefault(where, value)
                continue
            if given.setdefault(where, (found, value))[0] != found:
                raise source.error(
                    value,
                    f"ppto cannot pass dicts of different keys ({given[where][0]!r}, "
                    f"{found!r}) to {parameter} of {node.func.id}, a local "
                    "function: it reads the dict as the list of its values",
                    "pass dicts of the same keys, in the same order, at every call",
                )
    taking: dict = {}
    for (name, parameter), (found, _) in given.items():
        if (name, parameter) in other:
            raise source.error(
                other[name, parameter],
                f"ppto cannot pass a dict to {parameter} of {name} at one call and "
                "something else at another: the local function reads it as a "
                "dict's list of values",
                "pass a dict of the same keys at every call, or use two functions",
            )
        _check_kept(definitions[name], parameter, source)
        taking.setdefault(name, {})[parameter] = found
    return taking


def positional_parameters(definition: gast.FunctionDef) -> list:
    arguments = definition.args
    return [argument.id for argument in arguments.posonlyargs + arguments.args]


def _arguments(call: gast.Call, definition: gast.FunctionDef) -> list:
    """``(parameter, argument)`` of a call of ``definition``, the arguments
    beyond its parameters left out (the lifting refuses those)."""
    pairs = list(zip(positional_parameters(definition), call.args))
    return pairs + [(k.arg, k.value) for k in call.keywords if k.arg is not None]


def _check_kept(definition: gast.FunctionDef, parameter: str, source) -> None:
    """Refuse a local function that rebinds or returns whole a parameter it is
    given dicts at (its caller would read a list by key)."""
    for node in trees.walk(definition):
        bound = bound_by(node)
        if bound is not None and parameter in trees.stores(bound):
            raise source.error(
                node,
                f"ppto cannot differentiate {definition.name} rebinding "
                f"{parameter}, a dict its calls pass (held as the list of its "
                "values)",
                f"give the new value another name than {parameter}",
            )
        if (
            isinstance(node, gast.Return)
            and isinstance(node.value, gast.Name)
            and node.value.id == parameter
        ):
            raise source.error(
                node,
                f"ppto cannot differentiate {definition.name} returning "
                f"{parameter}, a dict its calls pass, whole",
                f"return a dict written out ({{'key': {parameter}['key'], ...}})",
            )
