"""``@ppto.operator``: a user function registered as an operator.

It runs as the plain Python function it is; to the transformer it is an operator
whose derivative comes from its custom rule (``@ppto.grad_rule``) if it has one, and
otherwise from differentiating its body. ``show_op`` describes it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ppto.errors import PptoError
from ppto.ops.primitive import OBSERVERS, OperatorDef, camel_case
from ppto.ops.signature import Signature, TensorPattern
from ppto.registration import note_definition

USER_OPERATORS: dict[str, CompositeOperator] = {}


class CompositeOperator(OperatorDef):
    """A user function as an operator (see the module docstring)."""

    differentiated_from_body = True

    def __init__(self, function: Callable) -> None:
        super().__init__()
        self.function = function
        self.name = function.__name__
        self.python_signature = inspect.signature(function)
        parameters = list(self.python_signature.parameters.values())
        self.input_names = tuple(
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
        self.param_names = tuple(p.name for p in parameters if p.kind == p.KEYWORD_ONLY)
        self.defaults = {
            p.name: p.default for p in parameters if p.default is not p.empty
        }
        patterns = tuple(TensorPattern(None, False) for _ in self.input_names)
        self.signature = Signature(patterns, _annotation_text(self.python_signature))
        self.__doc__ = function.__doc__
        self.__name__ = function.__name__
        self.__wrapped__ = function

    @property
    def display_name(self) -> str:
        return camel_case(self.name)

    def inputs_text(self) -> str:
        """A parameter annotated as something other than a tensor, or given a
        default, is written as Python writes it (``axis: int``, ``keepdims=False``);
        the others are ``Tensor[...]``."""
        return ", ".join(
            _parameter_text(p) for p in self.python_signature.parameters.values()
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not OBSERVERS or self.backward_rule is None:
            return self.function(*args, **kwargs)
        # With a rule of its own, the gradient checker's tapes record it as one
        # operator: its body's operators would give the derivative of the body, so
        # a wrong rule passed the check.
        observers = list(OBSERVERS)
        OBSERVERS.clear()
        try:
            out = self.function(*args, **kwargs)
        finally:
            OBSERVERS.extend(observers)
        inputs, params = self.bind(args, kwargs)
        for observer in observers:
            observer(self, inputs, params, out)
        return out

    def bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        bound = self.python_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        inputs = [bound.arguments[name] for name in self.input_names]
        params = {name: bound.arguments[name] for name in self.param_names}
        return inputs, params

    def __repr__(self) -> str:
        qualified = getattr(self.function, "__qualname__", self.name)
        return f"<ppto operator {self.name} (user function {qualified})>"


_TENSOR_ANNOTATIONS = {"Tensor", "ppto.Tensor", "ndarray", "np.ndarray", "ArrayLike"}


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, str):  # from __future__ import annotations
        return annotation
    return getattr(annotation, "__name__", str(annotation))


def _parameter_text(parameter: inspect.Parameter) -> str:
    annotated = parameter.annotation is not parameter.empty
    if annotated and _type_name(parameter.annotation) not in _TENSOR_ANNOTATIONS:
        text = f"{parameter.name}: {_type_name(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            text += f" = {parameter.default!r}"
        return text
    if parameter.default is not parameter.empty:
        return f"{parameter.name}={parameter.default!r}"
    return str(TensorPattern(None, False))


def _annotation_text(signature: inspect.Signature) -> str:
    annotation = signature.return_annotation
    if annotation is signature.empty or _type_name(annotation) in _TENSOR_ANNOTATIONS:
        return str(TensorPattern(None, False))
    return _type_name(annotation)


def operator(function: Callable) -> CompositeOperator:
    """Register ``function`` as an operator (see the module docstring).

    >>> @ppto.operator
    ... def softsign(x):
    ...     return x / (1 + ppto.abs(x))
    """
    if isinstance(function, OperatorDef):
        raise PptoError(
            f"@ppto.operator decorates a function, and {function!r} is an operator "
            "already: use it as it is, or attach a rule with @ppto.grad_rule(op)"
        )
    if not callable(function) or not hasattr(function, "__name__"):
        raise PptoError(f"@ppto.operator decorates a function, got {function!r}")
    op = CompositeOperator(function)
    qualified = getattr(function, "__qualname__", function.__name__)  # (a wrapper)
    module = getattr(function, "__module__", None)
    USER_OPERATORS[f"{module}.{qualified}"] = op
    note_definition(op, module)
    return op
