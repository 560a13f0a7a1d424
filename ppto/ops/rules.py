"""Gradient rules in one format for both directions, kept as inspectable source.

A rule is a Python function of the operator's inputs and parameters (plus ``out``, the
operator's result, when it asks for it) that returns a closure: ``backward(dY)`` giving
one gradient per input, or ``tangent(dx, ...)`` giving the output's tangent. Built-in
and user rules have exactly this form; the transformer inlines their source.

Tangent rules of three algebraic classes are derived, as source, instead of written:
``linear`` (the operator applied to the tangents), ``bilinear`` (product rule) and
``symmetric`` (a symmetric Jacobian, as every elementwise function has: the backward
rule read forwards).
"""

from __future__ import annotations

import ast
import inspect
import linecache
from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import GradError


class Rule:
    """A backward or tangent rule of one operator, callable as the user wrote it.

    >>> backward = ppto.get_grad_rule(ppto.exp)(x)     # doctest: +SKIP
    >>> backward(dy)                                    # doctest: +SKIP
    """

    def __init__(self, op: Any, fn: Callable, kind: str, source: str | None = None):
        self.op = op
        self.fn = fn
        self.kind = kind
        parameters = inspect.signature(fn).parameters
        _check_parameters(op, kind, parameters)
        self.takes_out = "out" in parameters
        self.accepted = {
            name
            for name, p in parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        self._source = source

    @property
    def built_in(self) -> bool:
        """Whether the rule is ppto's own (checked by its tests), not a user's."""
        return _built_in(self.fn)

    @property
    def source(self) -> str:
        """The rule's Python source, dedented (derived rules have generated source)."""
        if self._source is None:
            from ppto.errors import TransformError
            from ppto.transform.source import function_source

            try:
                source = function_source(self.fn)
            except TransformError as error:  # (it names the function: often _)
                raise TransformError(f"the {self!r}: {error}") from error
            if not self.built_in:  # (the built-in ones: see the tests)
                _check_shape_of_rule(self, source)
            self._source = source
        return self._source

    def closure(self, inputs: list, params: dict, out: Any) -> Callable:
        """The rule's ``backward`` / ``tangent`` for one application of the operator.

        Arguments are passed by name, and only those the rule declares, so a user's
        rule may leave out parameters it does not need.
        """
        values = dict(zip(self.op.input_names, inputs))
        values.update(params)
        if self.takes_out:
            values["out"] = out
        return self.fn(**{k: v for k, v in values.items() if k in self.accepted})

    def __call__(self, *args: Any, **kwargs: Any) -> Callable:
        out = kwargs.pop("out", None)
        if hasattr(self.op, "bind"):
            inputs, params = self.op.bind(args, kwargs)
        else:
            inputs, params = list(args), kwargs
        if self.takes_out and out is None:
            out = self.op.call_with_inputs(inputs, params)
        return self.closure(inputs, params, out)

    def __repr__(self) -> str:
        return f"<ppto {self.kind} rule of {self.op.name}>"


def checked_now(rule: Rule) -> Rule:
    """``rule``, its source's form checked as it is registered (a user's rule: the
    built-in ones, read at import, are checked by the tests), so a refused rule
    is never attached; where no source can be read it is checked where it is
    inlined, which needs the source."""
    from ppto.errors import TransformError

    if not _built_in(rule.fn):
        try:
            rule.source  # noqa: B018 (reading it checks it)
        except TransformError:
            pass
    return rule


def _built_in(fn: Callable) -> bool:
    return (getattr(fn, "__module__", None) or "").startswith("ppto.")


def _check_shape_of_rule(rule: Rule, source: str) -> None:
    """Refuse a rule whose source is not ``def rule(...): ...; def inner(dY): ...;
    return inner``, the form the transformer inlines: it took the first function
    defined in the rule for ``backward`` whatever the rule returned (a helper
    defined before it gave a silently wrong gradient), failed with StopIteration
    where there was none and with AttributeError on a lambda, and bound the
    rule's own assignment to a name ``backward`` takes as its parameter in place
    of the adjoint (``dy = ...`` before ``def backward(dy)``)."""
    outer = ast.parse(source).body[0]
    inner_name = "backward" if rule.kind == "backward" else "tangent"
    form = f"write it as def _(...): ... def {inner_name}(...): ... return {inner_name}"
    if not isinstance(outer, ast.FunctionDef):
        raise GradError(f"the {rule!r} is not a def-function: {form}")
    defined = [node for node in outer.body if isinstance(node, ast.FunctionDef)]
    last = outer.body[-1]
    returned = getattr(getattr(last, "value", None), "id", None)
    if not (
        isinstance(last, ast.Return)
        and len(defined) == 1
        and defined[0].name == returned
    ):
        raise GradError(
            f"the {rule!r} must define one function in its body and end by "
            f"returning it ({len(defined)} defined, the last statement "
            f"{ast.unparse(last)!r}): {form}; define helpers outside the rule"
        )
    inner = defined[0]
    parameters = {a.arg for a in inner.args.args}
    if rule.kind == "backward" and len(inner.args.args) != 1:
        raise GradError(
            f"the {rule!r}: {inner.name} takes {len(inner.args.args)} parameters, "
            f"but it is called with one, the gradient of the result: write def "
            f"{inner.name}(dY)"
        )
    for node in outer.body:
        if node is inner:
            break
        for name in ast.walk(node):
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                if name.id in parameters:
                    raise GradError(
                        f"the {rule!r} assigns {name.id!r} before defining "
                        f"{inner.name}, whose parameter is also {name.id!r}: "
                        "rename one of them"
                    )


def _check_parameters(op: Any, kind: str, parameters) -> None:
    """Refuse a rule whose parameters the operator's arguments do not fill.

    A rule receives the operator's inputs and parameters by name (those it
    declares), so a parameter of another name was left unbound (``None`` in the
    generated code) and the operator's names in another order bound each to the
    other's value where the rule's author meant the order: ``def _(y, x)`` for an
    operator of ``(x, y)`` gave a silently wrong gradient.
    """
    names = (*getattr(op, "input_names", ()), *getattr(op, "param_names", ()))
    if not names:
        return
    positional = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
    unknown = [  # (one with a default of its own takes it: a constant of the rule)
        name
        for name, p in parameters.items()
        if name != "out"
        and name not in names
        and p.default is p.empty
        and (p.kind in positional or p.kind is inspect.Parameter.KEYWORD_ONLY)
    ]
    wanted = ", ".join(names)
    if unknown:
        raise GradError(
            f"the {kind} rule of {op.name} has a parameter {unknown[0]!r}, but "
            f"{op.name} has no argument of that name; its arguments are "
            f"({wanted}): a rule receives them by name, so name the rule's "
            f"parameters as {op.name}'s (def _({wanted}))"
        )
    ordered = [
        name for name, p in parameters.items() if name in names and p.kind in positional
    ]
    if ordered != sorted(ordered, key=names.index):
        raise GradError(
            f"the {kind} rule of {op.name} takes ({', '.join(ordered)}), the "
            f"arguments of {op.name} ({wanted}) in another order: a rule receives "
            f"them by name, so write its parameters in {op.name}'s order"
        )


def shape_helper(function: Callable) -> Callable:
    """Mark a rule helper that reads only shapes and parameters of its arguments, so
    the transformer treats its result as a constant even when its arguments are
    differentiated values."""
    function.reads_metadata_only = True
    return function


def dtype_helper(function: Callable) -> Callable:
    """Mark a shape helper whose result depends on its one argument's dtype only:
    where that dtype is known when the code is specialised, the generated code
    holds the result (``whole_numbers(h)`` -> ``False`` for an array of floats)."""
    function.reads_dtype_only = True
    return shape_helper(function)


def rank_helper(*arrays: str) -> Callable:
    """Mark a shape helper whose result depends on literals and the numbers of axes
    of its parameters named in ``arrays`` only (einsum's subscripts of each
    gradient, the shift that undoes a roll): where its other arguments are written
    out and those ranks are known when a rule is inlined, the call is made then and
    the generated code holds its result (``'bqk,bkd->bqd'``, not the call that
    computes it on every run). It reads each array's rank with ``rank_of``."""

    def mark(function: Callable) -> Callable:
        function.folds_on_ranks = arrays
        return shape_helper(function)

    return mark


class RankNotKnown(Exception):
    """Raised by ``rank_of`` for an argument whose rank is not known while a rule
    is inlined: the helper's call stays in the generated code."""


class RankStandIn:
    """An array argument of a ``rank_helper`` called while a rule is inlined: its
    number of axes where that is known, and nothing else."""

    def __init__(self, rank: int | None) -> None:
        self.rank = rank


def rank_of(x: Any) -> int:
    """The number of axes of an array, a number or a ``RankStandIn``."""
    if isinstance(x, RankStandIn):
        if x.rank is None:
            raise RankNotKnown
        return x.rank
    return np.ndim(x)


def tangent_name(input_name: str) -> str:
    return "d" + input_name


def derive_tangent(op: Any, kind: str) -> Rule:
    """Generate the tangent rule of a linear, bilinear or symmetric operator."""
    if kind == "symmetric":
        return _symmetric_tangent(op)
    inputs = list(op.input_names)
    params = list(op.param_names)
    header = ", ".join(inputs + params)
    call_params = "".join(f", {name}={name}" for name in params)
    tangents = [tangent_name(name) for name in inputs]
    if kind == "linear":
        arguments = [
            name if name in op.nondiff else tangent_name(name) for name in inputs
        ]
        body = f"{op.name}({', '.join(arguments)}{call_params})"
    elif kind == "bilinear":
        left, right = inputs
        body = (
            f"{op.name}({tangents[0]}, {right}{call_params}) + "
            f"{op.name}({left}, {tangents[1]}{call_params})"
        )
    else:
        raise ValueError(f"unknown tangent kind {kind!r}")
    source = (
        f"def {op.name}_tangent_rule({header}):\n"
        f"    def tangent({', '.join(tangents)}):\n"
        f"        return {body}\n"
        f"    return tangent\n"
    )
    return _compiled_rule(op, source, f"{op.name}_tangent_rule", op.impl.__globals__)


def _symmetric_tangent(op: Any) -> Rule:
    backward = op.backward_rule
    tree = ast.parse(backward.source)
    rule_def = tree.body[0]
    rule_def.decorator_list = []
    rule_def.name = f"{op.name}_tangent_rule"
    inner = next(node for node in rule_def.body if isinstance(node, ast.FunctionDef))
    old = inner.args.args[0].arg
    new = tangent_name(op.input_names[0])
    inner.args.args[0].arg = new
    for node in ast.walk(inner):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    for node in ast.walk(rule_def):
        if isinstance(node, ast.Name) and node.id == inner.name:
            node.id = "tangent"
    inner.name = "tangent"
    source = ast.unparse(tree) + "\n"
    from ppto.transform.source import closure_values

    # the backward rule's closure variables as globals of the derived rule (a rule
    # made in a factory reads them); else its module's own globals, which later
    # definitions in a module still being imported join
    namespace, closure = backward.fn.__globals__, closure_values(backward.fn)
    if closure:
        namespace = {**namespace, **closure}
    return _compiled_rule(op, source, rule_def.name, namespace)


def _compiled_rule(op: Any, source: str, name: str, namespace: dict) -> Rule:
    filename = f"<ppto tangent rule of {op.name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope: dict = {}
    exec(compile(source, filename, "exec"), namespace, scope)
    return Rule(op, scope[name], "tangent", source)


def normalize_grads(op: Any, grads: Any, count: int) -> list:
    """A backward closure's result as a list with one entry per input."""
    if not isinstance(grads, (tuple, list)) or count == 1 and _is_list_input(op):
        grads = [grads]
    grads = list(grads)
    if len(grads) > count:
        raise GradError(
            f"the gradient rule of {op.name} returned {len(grads)} gradients for "
            f"{count} inputs"
        )
    return grads + [None] * (count - len(grads))


def _is_list_input(op: Any) -> bool:
    signature = getattr(op, "signature", None)
    return bool(signature and signature.inputs and signature.inputs[0].is_list)
