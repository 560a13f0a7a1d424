"""Derivatives of a composition evaluated through the operators' rules, at run time.

``vjp_by_rules`` records every operator application while ``f`` runs, then applies the
backward rules in reverse; ``jvp_by_rules`` applies the tangent rules alongside. This is
the reference the gradient checker uses to test the rules themselves; differentiating
programs is the transformer's job. Only values that depend on a differentiated input
through differentiable operators carry derivatives; non-differentiable operators
(comparisons, ``floor``) yield constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from ppto.errors import GradError
from ppto.ops.primitive import OBSERVERS, require_rule
from ppto.ops.rules import normalize_grads
from ppto.ops.shape import zeros_like
from ppto.runtime.tensor import Tensor


class _Recorder:
    """Observes operator applications, keeping those that carry derivatives."""

    # (x += y on a Tensor makes a new one; t[i] = v calls rebind)
    tells_values_by_identity = True

    def __init__(
        self,
        active: set[int],
        on_record: Callable | None = None,
        on_rebind: Callable | None = None,
    ):
        self.active = active
        self.records: list = []
        self.on_record = on_record
        self.on_rebind = on_rebind
        self.paused = False
        self.kept: list = []  # (tensors told by id: alive, so no other takes it)

    def rebind(self, tensor: Tensor, updated: Tensor) -> None:
        """``tensor[i] = v`` while recording: ``tensor`` (which takes new memory)
        holds ``updated``'s value from now on. The records made so far read its
        value before the write, now a stand-in tensor of the old memory, and the
        write's record makes ``tensor`` itself: adjoints after the write reach
        the write's backward, not the operators that made the value before."""
        before = Tensor(tensor.data, tensor.device, tensor.layout)
        self.kept += [before, updated]

        def swapped(value):
            if value is tensor:
                return before
            if value is updated:
                return tensor
            if isinstance(value, (list, tuple)):
                return type(value)(swapped(item) for item in value)
            return value

        self.records = [
            (op, swapped(inputs), params, swapped(out), flags)
            for op, inputs, params, out, flags in self.records
        ]
        if id(tensor) in self.active:
            self.active.add(id(before))
        if id(updated) in self.active:
            self.active.add(id(tensor))
        else:
            self.active.discard(id(tensor))
        if self.on_rebind is not None:
            self.on_rebind(tensor, updated)

    def __call__(self, op, inputs, params, out) -> None:
        if self.paused or not op.differentiable:
            return
        flags = [
            name not in op.nondiff and _any_active(value, self.active)
            for name, value in zip(op.input_names, inputs)
        ]
        if not any(flags):
            return
        for part in out if isinstance(out, tuple) else (out,):
            self.active.add(id(part))
        self.records.append((op, inputs, params, out, flags))
        if self.on_record is not None:
            with self.pause():
                self.on_record(op, inputs, params, out, flags)

    @contextmanager
    def pause(self):
        self.paused = True
        try:
            yield
        finally:
            self.paused = False


def _any_active(value, active: set[int]) -> bool:
    if isinstance(value, (list, tuple)):
        return any(id(item) in active for item in value)
    return id(value) in active


@contextmanager
def _observing(recorder: _Recorder):
    OBSERVERS.append(recorder)
    try:
        yield recorder
    finally:
        OBSERVERS.remove(recorder)


def _fresh(args: Sequence, wrt: Sequence[int]) -> list:
    """Arguments with each differentiated one as a new Tensor object (its identity)."""
    fresh = list(args)
    for index in wrt:
        value = args[index]
        fresh[index] = Tensor(value.data, value.device, value.layout)
    return fresh


def vjp_by_rules(f: Callable, args: Sequence, wrt: Sequence[int]):
    """``(out, pullback)``; ``pullback(cotangent)`` returns gradients for ``wrt``."""
    fresh = _fresh(args, wrt)
    recorder = _Recorder({id(fresh[index]) for index in wrt})
    with _observing(recorder):
        out = f(*fresh)

    def pullback(cotangent: Any) -> list:
        adjoints: dict[int, Any] = {}
        for part, value in _pairs(out, cotangent):
            adjoints[id(part)] = value
        for op, inputs, params, result, flags in reversed(recorder.records):
            cotangent_out = _output_adjoint(result, adjoints)
            if cotangent_out is None:
                continue
            backward = require_rule(op, "backward").closure(inputs, params, result)
            grads = normalize_grads(op, backward(cotangent_out), len(inputs))
            for value, grad, flag in zip(inputs, grads, flags):
                if flag and grad is not None:
                    _accumulate(adjoints, value, grad)
        grads = []
        for index in wrt:
            grad = adjoints.get(id(fresh[index]))
            if grad is None:
                raise GradError(
                    f"the output does not depend on argument {index} through "
                    "differentiable operators, so it has no gradient"
                )
            grads.append(grad)
        return grads

    return out, pullback


def jvp_by_rules(f: Callable, args: Sequence, tangents: dict[int, Any]):
    """``(out, tangent_out)`` for tangents given per argument index."""
    fresh = _fresh(args, list(tangents))
    tangent_of = {id(fresh[index]): value for index, value in tangents.items()}

    def push(op, inputs, params, out, flags):
        input_tangents = [
            _tangent_for(value, tangent_of) if flag else _zero_for(value)
            for value, flag in zip(inputs, flags)
        ]
        tangent = require_rule(op, "tangent").closure(inputs, params, out)
        result = tangent(*input_tangents)
        if isinstance(out, tuple):
            for part, part_tangent in zip(out, result):
                tangent_of[id(part)] = part_tangent
        else:
            tangent_of[id(out)] = result

    def rebind(tensor, updated):  # (tensor[i] = v: the write's tangent is its)
        tangent = tangent_of.pop(id(updated), None)
        if tangent is None:
            tangent_of.pop(id(tensor), None)
        else:
            tangent_of[id(tensor)] = tangent

    recorder = _Recorder(set(tangent_of), push, rebind)
    with _observing(recorder):
        out = f(*fresh)
    return out, _map_parts(out, lambda part: tangent_of.get(id(part)))


def _tangent_for(value, tangent_of):
    if isinstance(value, (list, tuple)):
        return [_tangent_for(item, tangent_of) for item in value]
    tangent = tangent_of.get(id(value))
    return zeros_like(value) if tangent is None else tangent


def _zero_for(value):
    if isinstance(value, (list, tuple)):
        return [zeros_like(item) for item in value]
    return zeros_like(value)


def _pairs(out, cotangent):
    if isinstance(out, tuple):
        return list(zip(out, cotangent))
    return [(out, cotangent)]


def _map_parts(out, fn):
    if isinstance(out, tuple):
        return tuple(fn(part) for part in out)
    return fn(out)


def _output_adjoint(result, adjoints):
    if not isinstance(result, tuple):
        return adjoints.pop(id(result), None)
    parts = [adjoints.pop(id(part), None) for part in result]
    if all(part is None for part in parts):
        return None
    return [
        zeros_like(part) if value is None else value
        for part, value in zip(result, parts)
    ]


def _accumulate(adjoints: dict, value, grad) -> None:
    if isinstance(value, (list, tuple)):
        for item, item_grad in zip(value, grad):
            if item_grad is not None:
                _accumulate(adjoints, item, item_grad)
        return
    key = id(value)
    adjoints[key] = grad if key not in adjoints else adjoints[key] + grad
