"""A repeated call written out as one straight-line function: the checks of each
argument (``RepeatedCall.matches``), the call of the generated code, and the
finishing of its common result (``Transformed.finish_on_cpu``), specialised to the
arguments' kinds, dtypes and shapes and to the gradients'.

Why: between two calls of generated code that sweep megabytes of arrays, this
Python work runs with the interpreter's code and the objects it reads out of the
core's caches, and there every function call, loop and attribute look-up costs a
few times what it costs warm. Timed after an 8 MB write, the repeated call's
checks took 13 us and its finishing 14 us (the whole call 24 us, the MLP
gradient's four gradients); written out, the whole call took 12 us, 9 us of it in
this function: about 1% of that float32 gradient. What the written-out function
does not decide quickly (a gradient that is a view, of another dtype, read-only; a
value that is not a NumPy float) it leaves to ``finish_on_cpu``; arguments unlike
the recorded ones it answers with ``MISS``, and the caller takes the keyed path.
"""

from __future__ import annotations

import weakref

import numpy as np

from ppto.runtime.device import CPU
from ppto.runtime.precision import _state as precision_state
from ppto.runtime.tensor import Tensor
from ppto.transform.pipeline import _MISSING

MISS = object()  # (what the function answers for a call unlike the recorded one)


def written_out(repeated, entry, transformed):
    """The straight-line function ``(transformed, args) -> result or MISS`` of
    ``repeated`` (a RepeatedCall with ``kinds``), running ``entry`` (its generated
    function, fusion's choice made), for ``transformed`` (the ppto.grad or
    value_and_grad object that keeps it: its results' form is written in, which
    is why the function is not kept on the RepeatedCall, shared by every grad
    object of the function; ``transformed`` is passed at each call rather than
    held, which would make a cycle)."""
    from ppto import api
    from ppto.ops.primitive import _REGISTRATIONS

    scope = {
        "ndarray": np.ndarray,
        "Tensor": Tensor,
        "CPU": CPU,
        "float64": np.float64,
        "float32": np.float32,
        "MISS": MISS,
        "precision_state": precision_state,
        "precision": repeated.precision,
        "registrations": _REGISTRATIONS,
        "registered": repeated.registered,
        "MISSING": _MISSING,
        "entry": entry,
        "TRANSLATED_ERRORS": api.TRANSLATED_ERRORS,
        "dtypes": repeated.dtypes,
        "layouts": repeated.layouts,
        "api": api,  # (its RESULT_OBSERVERS read at each call: memcheck's)
        "observed": api._observed,
        "as_tensor": api._as_tensor,
        "name": transformed.__name__.removesuffix("_grad"),
    }
    names = [f"a{position}" for position in range(len(repeated.kinds))]
    checks, passed = _argument_checks(names, repeated.kinds, scope)
    checks += [
        'precision_state["mode"] == precision',
        "registrations[0] == registered",
        *_current_conditions(repeated.program, scope),
    ]
    count = len(repeated.dtypes)
    gradients = [f"g{index}" for index in range(count)]
    placed = ", ".join(
        f"Tensor({gradient}, CPU, gradient_layout_{index})"
        for index, gradient in enumerate(gradients)
    )
    if not transformed.single:
        placed = f"({placed},)" if count == 1 else f"({placed})"
    source = _TEMPLATE.format(
        count=len(names),
        names=", ".join(names) + ("," if len(names) == 1 else ""),
        checks=_joined(checks),
        passed=", ".join(passed),
        unpack=_UNPACK_ONE
        if count == 1
        else _UNPACK.format(count=count, gradients=", ".join(gradients)),
        finished=_joined(_gradient_checks(gradients, repeated, scope)),
        placed=placed,
        result="(as_tensor(value, CPU), gradients)"
        if transformed.with_value
        else "gradients",
    )
    exec(compile(source, "<ppto repeated call>", "exec"), scope)
    function = scope["repeated_call"]
    function.source = source  # (for reading it: tests and debugging)
    return function


_TEMPLATE = """\
def repeated_call(transformed, args):
    if len(args) != {count}:
        return MISS
    {names} = args
    if not ({checks}):
        return MISS
    try:
        value, grads = entry({passed})
    except TRANSLATED_ERRORS as error:
        translated = transformed.failed(error, args)
        if translated is error:
            raise
        raise translated from error
{unpack}    if not ((type(value) is float64 or type(value) is float32)
            and {finished}):
        return transformed.finish_on_cpu(value, grads, dtypes, layouts, args)
    gradients = {placed}
    if api.RESULT_OBSERVERS:
        observed("Grad", name, gradients)
    return {result}
"""
_UNPACK_ONE = "    g0 = grads\n"
_UNPACK = """\
    if type(grads) is not tuple or len(grads) != {count}:
        return transformed.finish_on_cpu(value, grads, dtypes, layouts, args)
    {gradients} = grads
"""


def _argument_checks(names: list, kinds: tuple, scope: dict) -> tuple:
    """``(conditions, what is passed to the generated code)``: each argument of the
    recorded kind (``RepeatedCall.kinds``), dtype, shape and layout."""
    checks, passed = [], []
    for position, (name, (kind, dtype, shape, layout)) in enumerate(zip(names, kinds)):
        if kind is not np.ndarray and kind is not Tensor:  # (a Python number)
            scope[f"kind_{position}"] = kind
            checks.append(f"type({name}) is kind_{position}")
            passed.append(name)
            continue
        scope[f"dtype_{position}"], scope[f"shape_{position}"] = dtype, shape
        if kind is np.ndarray:
            checks += [
                f"type({name}) is ndarray",
                f"{name}.dtype is dtype_{position}",
                f"{name}.shape == shape_{position}",
            ]
            passed.append(name)
        else:
            scope[f"layout_{position}"] = layout
            checks += [
                f"type({name}) is Tensor",
                f"type({name}.data) is ndarray",
                f"{name}.device is CPU",
                f"{name}.layout == layout_{position}",
                f"{name}.data.dtype is dtype_{position}",
                f"{name}.data.shape == shape_{position}",
            ]
            passed.append(f"{name}.data")
    return checks, passed


def _gradient_checks(gradients: list, repeated, scope: dict) -> list:
    """The conditions under which ``finish_on_cpu`` would wrap the gradients as
    they are: each an array of its own (not a view), writeable, in its argument's
    dtype, none the same array as another (see api._separate)."""
    checks = []
    for index, (gradient, dtype) in enumerate(zip(gradients, repeated.dtypes)):
        scope[f"gradient_dtype_{index}"] = dtype
        scope[f"gradient_layout_{index}"] = repeated.layouts[index]
        checks += [
            f"type({gradient}) is ndarray",
            f"{gradient}.dtype is gradient_dtype_{index}",
            f"{gradient}.base is None",
            f"{gradient}.flags.writeable",
        ]
    if len(gradients) > 1:
        identities = ", ".join(f"id({gradient})" for gradient in gradients)
        checks.append(f"len({{{identities}}}) == {len(gradients)}")
    return checks


def _joined(conditions: list) -> str:
    """``conditions`` joined by ``and``, a line each."""
    return "\n            and ".join(conditions)


def _current_conditions(program, scope: dict) -> list:
    """``program.still_current()`` written out as conditions (names they read put
    in ``scope``): each global's dict look-up, each attribute a program watches
    through weak references (a function's ``__code__``, its ``__defaults__``).
    A program that watches more (a method, a list's items, the programs of a
    derivative differentiated again) is checked by the call itself."""
    program.still_current()  # (finds where each value lives, once)
    simple = not program.methods and not program.inner
    conditions = []
    for index, (place, variable, value) in enumerate(program.watched):
        if type(place) is not dict:
            simple = False
            break
        scope[f"globals_{index}"], scope[f"global_{index}"] = place, value
        conditions.append(
            f"globals_{index}.get({variable!r}, MISSING) is global_{index}"
        )
    for index, (holder, key, value) in enumerate(program.reached):
        if not (
            type(holder) is weakref.ref
            and type(value) is weakref.ref
            and type(key) is str
            and type(holder()) not in (list, tuple, dict)
        ):
            simple = False
            break
        scope[f"holder_{index}"], scope[f"held_{index}"] = holder, value
        # (a value gone is stale: its holder no longer holds it, see
        # pipeline._referred)
        conditions.append(
            f"held_{index}() is not None and "
            f"getattr(holder_{index}(), {key!r}, MISSING) is held_{index}()"
        )
    if simple:
        return conditions
    scope["still_current"] = program.still_current
    return ["still_current()"]
