"""Fusion rules: a pattern (a Python function of ppto operators) and a fused
implementation that computes the same thing faster.

``@ppto.fusion_rule(pattern)`` registers a user's implementation after checking it
against the pattern on random inputs; one that disagrees beyond the tolerance is
refused. Built-in rules are registered the same way. An elementwise pattern needs no
implementation: its kernel is generated from the pattern itself.

A pattern may return a tuple of values (a *multi-output* rule): every value but the
last is an intermediate of the last, and the implementation returns them all, in
order. Fused code binds each to the name the unfused code gave it, so that later
statements (a gradient's backward pass) read them unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ppto.errors import PptoError
from ppto.fusion.kernels import ELEMENTWISE, TERNARY, ElementwiseKernel, Node
from ppto.ops.elementwise import GELU_CUBIC, GELU_SCALE
from ppto.ops.primitive import note_registration
from ppto.symbolic import Operator, Symbol, symbol


class FusionError(PptoError):
    """A fusion rule that is malformed or whose implementation is wrong."""


@dataclass
class FusionRule:
    """One pattern and its fused implementation (see the module docstring)."""

    name: str
    pattern: Callable
    implementation: Callable
    # the pattern applied to symbols: an Operator tree (a multi-output rule's last
    # value, the statement its fused call replaces)
    template: Any
    parameters: tuple
    applies: str = "forward and backward"
    builtin: bool = False
    kind: str = "elementwise"
    notes: str = field(default="", repr=False)
    # matched before elementwise regions form (``ppto.transform.regions``): a
    # pattern whose statements a region would otherwise take apart (its reductions
    # are over axes a region cannot sum over in its pass, or it starts at a product)
    before_regions: bool = False
    # a multi-output rule's values, each an Operator tree, the last one ``template``
    # (its others are nodes of it); () for a rule of one value
    outputs: tuple = ()
    # a built-in rule's CuPy kernel where none is derived from its pattern (a
    # scatter, broadcasts back to an image): a function of the rule making it
    cuda: Callable | None = field(default=None, repr=False)
    # a user's rule's largest relative difference from its pattern, measured when
    # it was registered (``verify``): above the active tolerance, set tighter since,
    # the rule is not used (``in_tolerance``)
    error: float = field(default=0.0, repr=False)
    _size: int | None = field(default=None, repr=False)

    @property
    def kernel_name(self) -> str:
        """The name generated code calls the kernel by: the rule's name made a
        Python identifier (a rule may be named ``<lambda>`` or ``my rule``)."""
        return "__fused_" + re.sub(r"\W", "_", self.name)

    def size(self) -> int:
        if self._size is None:
            self._size = _size(self.template)
        return self._size

    @cached_property
    def cuda_kernel(self):
        """The CuPy kernel derived from the pattern (or the rule's own, ``cuda``), or
        None (see ``ppto.fusion.cuda``; made on first use: CUDA is optional)."""
        if self.cuda is not None:
            return self.cuda(self)
        from ppto.fusion.cuda import for_rule

        return for_rule(self)

    def __str__(self) -> str:
        shown = ", ".join(map(repr, self.outputs or (self.template,)))
        return f"{self.name}: {shown}  ({self.kind}; {self.applies})"


RULES: list[FusionRule] = []
BOTH_PASSES = "forward and backward"


def _size(node) -> int:
    """Operator nodes in a template counted as a tree (a shared node once per
    use). A loop over a stack: every rule's size is read the first time code is
    fused, and a recursion with a generator per node took twice as long."""
    count, pending = 0, [node]
    while pending:
        current = pending.pop()
        if isinstance(current, Operator):
            count += 1
            pending.extend(current.inputs)
    return count


def template_of(pattern: Callable, parameters: Sequence[str]):
    """The pattern evaluated on symbols: the tree the matcher looks for, or a tuple
    of them (a multi-output pattern, see the module docstring)."""
    symbols = [symbol(name) for name in parameters]
    try:
        tree = pattern(*symbols)
    except PptoError:
        raise
    except Exception as error:  # (the user's code: named, as an implementation's)
        raise FusionError(
            f"fusion pattern {getattr(pattern, '__name__', pattern)!r} raised "
            f"{type(error).__name__}: {error} applied to symbols "
            f"{', '.join(parameters)}"
        ) from error
    values = tree if isinstance(tree, tuple) else (tree,)
    if not values or not all(isinstance(value, Operator) for value in values):
        raise FusionError(
            f"fusion pattern {pattern.__name__} must return an operator "
            "expression of its arguments (or a tuple of them)"
        )
    if isinstance(tree, tuple):
        _check_outputs(pattern, values)
    return tree


def _check_outputs(pattern: Callable, values: tuple) -> None:
    """A multi-output pattern's values: each but the last computed on the way to the
    last (its statements are the ones fused code replaces) or, matched in a
    statement of its own, from inputs the last one reads (batch norm's gradient:
    its per-channel sums beside the input's gradient); none twice."""
    last = values[-1]
    inside = {id(node) for node in template_nodes(last)}
    reads = _symbols(last)
    for number, value in enumerate(values[:-1]):
        if value is last or (id(value) not in inside and not _symbols(value) <= reads):
            raise FusionError(
                f"fusion pattern {pattern.__name__}: value {number} ({value!r}) is "
                "not an intermediate of its last value and reads inputs the last "
                "one does not; a multi-output pattern returns values computed on "
                "the way to its last one, or from the inputs it reads (return "
                "separate patterns for unrelated values)"
            )
    if len({id(value) for value in values}) != len(values):
        raise FusionError(f"fusion pattern {pattern.__name__} returns one value twice")


def _symbols(node) -> set:
    """The names of the parameters a template reads."""
    found = set()
    for operator in template_nodes(node):
        found.update(a.name for a in operator.inputs if isinstance(a, Symbol))
        found.update(v.name for v in operator.params.values() if isinstance(v, Symbol))
    return found


def template_nodes(template) -> list:
    """Every operator node of a template, each once (patterns share nodes), a node
    before its inputs."""
    found, seen, pending = [], set(), [template]
    while pending:
        node = pending.pop()
        if isinstance(node, Operator) and id(node) not in seen:
            seen.add(id(node))
            found.append(node)
            pending.extend(reversed(node.inputs))
    return found


def elementwise_tree(template, parameters, substitute=None) -> Node | None:
    """The kernel tree of a purely elementwise template, else None; ``substitute``
    maps ``id`` of a template node to the tree node that stands for it."""
    if substitute and id(template) in substitute:
        return substitute[id(template)]
    if isinstance(template, Symbol):
        return Node(leaf=list(parameters).index(template.name))
    if isinstance(template, (int, float)):
        return Node(value=template)
    if not isinstance(template, Operator):
        return None
    name = template.op.name
    if name not in ELEMENTWISE and name not in TERNARY and name not in ALIASES:
        return None
    children = [
        elementwise_tree(argument, parameters, substitute)
        for argument in template.inputs
    ]
    if any(child is None for child in children):
        return None
    return ALIASES[name](children) if name in ALIASES else Node(name, children)


ALIASES = {  # operators as the elementwise operations they compute, in their order
    "relu": lambda c: Node("maximum", [c[0], Node(value=0.0)]),
    "sigmoid": lambda c: _sigmoid(c[0]),
    "gelu": lambda c: _gelu(c[0]),
}


def _python(op: str, left: Node, right: Node) -> Node:
    return Node(op, [left, right], operator=True)


def _sigmoid(x: Node) -> Node:
    """``0.5 * (tanh(0.5 * x) + 1)``, as ``ppto.sigmoid`` computes it."""
    half = _python("mul", Node(value=0.5), x)
    return _python(
        "mul", Node(value=0.5), _python("add", Node("tanh", [half]), Node(value=1))
    )


def _gelu(x: Node) -> Node:
    """``0.5 * x * (1 + tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)))``, in the
    order and with the Python operators ``ppto.gelu`` computes it with."""
    python = _python
    cube = python("mul", python("mul", python("mul", Node(value=GELU_CUBIC), x), x), x)
    inner = python("mul", Node(value=GELU_SCALE), python("add", x, cube))
    one_plus = python("add", Node(value=1), Node("tanh", [inner]))
    return python("mul", python("mul", Node(value=0.5), x), one_plus)


def _random_inputs(shapes, rng) -> list:
    """Two sets of inputs: positive ones (inside every operator's domain: log, sqrt)
    and signed ones (so that an implementation forgetting an ``abs`` or a ``relu``
    is told apart from its pattern)."""
    return [
        [rng.uniform(0.5, 1.5, shape) for shape in shapes],
        [rng.standard_normal(shape) for shape in shapes],
    ]


def verify(rule: FusionRule, shapes: Sequence[tuple], rtol: float | None = None):
    """Largest relative difference between the implementation and the pattern, on
    both sets of inputs, where the pattern's values are finite; more than ``rtol``
    (by default the active tolerance's: fusion never changes results beyond it,
    ``ppto.set_tolerance``) refuses the rule, and so does a value of another shape
    or dtype than the pattern's, on those float64 inputs or on float32 ones."""
    if rtol is None:
        from ppto.runtime.precision import get_tolerance

        rtol = get_tolerance()[0]
    worst = 0.0
    sets = _random_inputs(shapes, np.random.default_rng(0))
    for number, inputs in enumerate(sets):
        with np.errstate(all="ignore" if number else "warn"):  # (signed: log(-1))
            error = _difference(rule, shapes, inputs, rtol, signed=number > 0)
        worst = max(worst, error)
    _check_dtypes_kept(rule, shapes, [np.float32(x) for x in sets[0]])
    return worst


def _check_dtypes_kept(rule, shapes, inputs) -> None:
    """Refuse an implementation whose values on float32 ``inputs`` have other
    dtypes than the pattern's (one computing in float64 whatever its inputs:
    fused code would change the results' dtype)."""
    expected = _values(rule, _pattern_values(rule, inputs), inputs)
    actual = _values(rule, _implementation_values(rule, shapes, inputs), inputs)
    for number, (value, wanted) in enumerate(zip(actual, expected)):
        if np.asarray(value).dtype != wanted.dtype:
            which = f" value {number}" if rule.outputs else ""
            raise FusionError(
                f"fusion rule {rule.name} refused: on float32 inputs its "
                f"implementation returns{which} dtype {np.asarray(value).dtype}, "
                f"the pattern {wanted.dtype}: compute in the inputs' dtype"
            )


def _pattern_values(rule, inputs):
    """The pattern's value(s) on ``inputs``; a pattern that raises (other than a
    ppto error, which says what was wrong itself) is a FusionError."""
    from ppto.runtime.tensor import tensor

    try:
        return rule.pattern(*[tensor(x) for x in inputs])
    except PptoError:
        raise
    except Exception as error:
        raise FusionError(
            f"fusion rule {rule.name} refused: its pattern raised "
            f"{type(error).__name__}: {error} on inputs of shapes "
            f"{[np.shape(x) for x in inputs]}"
        ) from error


def _implementation_values(rule, shapes, inputs):
    try:
        return rule.implementation(*inputs)
    except Exception as error:
        raise FusionError(
            f"fusion rule {rule.name} refused: its implementation raised "
            f"{type(error).__name__}: {error} on inputs of shapes {list(shapes)}"
        ) from error


def _values(rule, result, inputs) -> list:
    """A rule's value(s) as NumPy arrays, checked to be one per pattern value."""
    from ppto.runtime.tensor import Tensor

    if rule.outputs:
        if not isinstance(result, tuple) or len(result) != len(rule.outputs):
            raise FusionError(
                f"fusion rule {rule.name}: implementation returns "
                f"{_described(result)}, its pattern a tuple of {len(rule.outputs)} "
                "values"
            )
    else:
        result = (result,)
    return [
        np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        for value in result
    ]


def _difference(rule, shapes, inputs, rtol: float, signed: bool) -> float:
    """The relative difference on one set of inputs (see ``verify``)."""
    from ppto.runtime.tensor import Tensor

    try:
        expected = _pattern_values(rule, inputs)
    except PptoError:
        if not signed:
            raise
        return 0.0  # signed inputs outside the pattern's domain
    expected = [
        np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        for value in (expected if rule.outputs else (expected,))
    ]
    given = [np.array(x, copy=True) for x in inputs]
    actual = _implementation_values(rule, shapes, inputs)
    for number, (before, after) in enumerate(zip(given, inputs)):
        # generated code passes it the caller's arrays and values read again later
        if not np.array_equal(before, after, equal_nan=True):
            raise FusionError(
                f"fusion rule {rule.name} refused: its implementation changes its "
                f"argument {rule.parameters[number]} in place (+=, out=...); "
                "write the result into a new array instead"
            )
    if rule.outputs:
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            raise FusionError(
                f"fusion rule {rule.name}: implementation returns "
                f"{_described(actual)}, its pattern a tuple of {len(expected)} values"
            )
    else:
        actual = (actual,)
    return max(
        _value_difference(rule, number, np.asarray(value), wanted, rtol)
        for number, (value, wanted) in enumerate(zip(actual, expected))
    )


def _described(value) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} values"
    return f"one value ({type(value).__name__})"


def _value_difference(rule, number, actual, expected, rtol: float) -> float:
    """The relative difference of one of the implementation's values (``number``:
    its position, for a multi-output rule's messages)."""
    which = f" value {number}" if rule.outputs else ""
    if actual.shape != expected.shape:
        raise FusionError(
            f"fusion rule {rule.name}: implementation returns{which} shape "
            f"{actual.shape}, the pattern {expected.shape}"
        )
    if actual.dtype != expected.dtype:
        raise FusionError(
            f"fusion rule {rule.name} refused: its implementation returns{which} "
            f"dtype {actual.dtype}, the pattern {expected.dtype}: compute in the "
            "inputs' dtype"
        )
    finite = np.isfinite(expected)
    if not finite.any():
        return 0.0
    scale = max(1e-300, float(np.max(np.abs(expected[finite]))))
    error = float(np.max(np.abs(actual[finite] - expected[finite]))) / scale
    if not error <= rtol:
        raise FusionError(
            f"fusion rule {rule.name} refused: its implementation{which} differs "
            f"from the pattern by {error:.3g} (relative), more than the tolerance "
            f"{rtol:g} (ppto.set_tolerance)"
        )
    return error


def register(pattern: Callable, implementation: Callable | None, *, name: str,
             shapes: Sequence[tuple] | None, applies: str, builtin: bool,
             kind: str = "", before_regions: bool = False,
             cuda: Callable | None = None) -> FusionRule:  # fmt: skip
    import inspect

    parameters = tuple(inspect.signature(pattern).parameters)
    template = template_of(pattern, parameters)
    outputs = template if isinstance(template, tuple) else ()
    if outputs:
        if implementation is None:  # (regions already fuse elementwise ones)
            raise FusionError(
                f"fusion rule {name} returns several values, so it needs an "
                "implementation returning them all"
            )
        template, tree, kind = outputs[-1], None, kind or "multi-output"
    else:
        tree = elementwise_tree(template, parameters)
    if implementation is None:
        if tree is None:
            raise FusionError(
                f"fusion rule {name} is not elementwise, so it needs an implementation"
            )
        implementation = ElementwiseKernel(f"__fused_{name}", tree, len(parameters))
    rule = FusionRule(
        name,
        pattern,
        implementation,
        template,
        parameters,
        applies,
        builtin,
        kind or ("elementwise" if tree is not None else "composite"),
        before_regions=before_regions,
        outputs=outputs,
        cuda=cuda,
    )
    if not builtin:  # built-in rules are checked by the test suite, not at import
        rule.error = verify(rule, shapes or [(4, 4)] * len(parameters))
    for existing in RULES:
        if existing.name == name:
            raise FusionError(f"a fusion rule named {name!r} already exists")
        if existing.kernel_name == rule.kernel_name:
            raise FusionError(
                f"fusion rules {existing.name!r} and {name!r} would share the kernel "
                f"name {rule.kernel_name}: choose another name"
            )
    RULES.append(rule)
    _BY_ROOT.clear()
    note_registration()
    return rule


def fusion_rule(pattern: Callable, *, name: str | None = None,
                shapes: Sequence[tuple] | None = None,
                applies: str = BOTH_PASSES) -> Callable:  # fmt: skip
    """Register a fused implementation of ``pattern`` (checked on random inputs).

    >>> def pattern(A, B, b):
    ...     return ppto.relu(ppto.dot(A, B) + b)
    >>> shapes = [(4, 3), (3, 5), (5,)]
    >>> @ppto.fusion_rule(pattern, name="my_matmul_bias_relu", shapes=shapes)
    ... def fused(A, B, b):
    ...     out = A @ B
    ...     out += b
    ...     return np.maximum(out, 0, out=out)

    A pattern returning a tuple (values computed on the way to its last one) makes
    a multi-output rule: the implementation returns every value, each checked, and
    gradient code binds them to the names its backward pass reads. ``shapes``: one
    per parameter of the pattern, the inputs it is checked on (default (4, 4)
    each). A rule applies wherever its pattern matches, forward and backward code
    alike (fusion is one rewrite of both): ``applies`` can only say so.
    """
    _check_arguments(pattern, name, shapes, applies)

    def decorate(*implementation: Callable) -> FusionRule:
        if len(implementation) != 1 or not callable(implementation[0]):
            # (``@ppto.fusion_rule`` written bare made the function this decorator,
            # registering nothing; calling it is how that shows)
            raise PptoError(
                "ppto.fusion_rule(pattern, ...) returns a decorator for the fused "
                "implementation: write @ppto.fusion_rule(pattern) above the function "
                "computing the pattern's value, not @ppto.fusion_rule alone"
            )
        implementation = implementation[0]
        return register(
            pattern,
            implementation,
            # (a callable object has no __name__: its class names it)
            name=name
            or getattr(implementation, "__name__", type(implementation).__name__),
            shapes=shapes,
            applies=applies,
            builtin=False,
        )

    return decorate


def _check_arguments(pattern, name, shapes, applies) -> None:
    """``fusion_rule``'s arguments, refused with a FusionError naming the one that
    is wrong (rather than a TypeError from inside the check on random inputs)."""
    import inspect

    if not callable(pattern):
        raise FusionError(
            f"ppto.fusion_rule: the pattern must be a function of ppto operators, "
            f"got {type(pattern).__name__}: write @ppto.fusion_rule(pattern, ...)"
        )
    if name is not None and (not isinstance(name, str) or not name):
        raise FusionError(
            f"ppto.fusion_rule: name= must be a non-empty string, got {name!r}"
        )
    if applies != BOTH_PASSES:
        raise FusionError(
            f"ppto.fusion_rule: applies={applies!r} is not supported: a fusion rule "
            "applies wherever its pattern matches, in forward and backward code "
            "alike (fusion is one rewrite of both); leave applies= out"
        )
    called = getattr(pattern, "__name__", type(pattern).__name__)
    parameters = inspect.signature(pattern).parameters.values()
    for parameter in parameters:
        if parameter.kind not in (
            parameter.POSITIONAL_ONLY,
            parameter.POSITIONAL_OR_KEYWORD,
        ):
            raise FusionError(
                f"ppto.fusion_rule: pattern {called}'s parameter "
                f"{parameter} is not positional: the rule is matched and called "
                "with one positional operand per parameter; make it a plain "
                "parameter (a constant: write it inside the pattern)"
            )
    if shapes is not None:
        _check_shapes(shapes, len(parameters), called)


def _check_shapes(shapes, count: int, pattern: str) -> None:
    """``shapes=``: a list of shapes (tuples of whole numbers), one per parameter."""
    written = isinstance(shapes, (list, tuple)) and all(
        isinstance(shape, (list, tuple))
        and all(
            isinstance(n, (int, np.integer)) and type(n) is not bool and n >= 0
            for n in shape
        )
        for shape in shapes
    )
    if not written:
        raise FusionError(
            f"ppto.fusion_rule: shapes= must be a list of shapes, one tuple of "
            f"whole numbers per parameter of the pattern (shapes=[(4, 3), (3, 5)]), "
            f"got {shapes!r}"
        )
    if len(shapes) != count:
        raise FusionError(
            f"ppto.fusion_rule: shapes= gives {len(shapes)} shape(s) but pattern "
            f"{pattern} has {count} parameter(s): give one shape per parameter"
        )


def fusion_rules() -> list[FusionRule]:
    """Every fusion rule, built-in and registered, largest patterns first; of one
    size, a user's before the built-in ones, the latest first: the rule generated
    code uses where patterns are the same (as for elementwise patterns)."""
    users = [rule for rule in reversed(RULES) if not rule.builtin]
    builtins = [rule for rule in RULES if rule.builtin]
    return sorted(users + builtins, key=lambda rule: -rule.size())


_BY_ROOT: dict = {}


def rules_for(op) -> list[FusionRule]:
    """The rules whose pattern's outermost operator is ``op``, largest first, and
    those of one value before multi-output ones: where both match, the one value
    costs fewer arrays (the others' intermediates were read by nothing else).
    Rules beyond the active tolerance are left out (``in_tolerance``)."""
    if not _BY_ROOT:
        for rule in sorted(fusion_rules(), key=lambda rule: bool(rule.outputs)):
            _BY_ROOT.setdefault(rule.template.op, []).append(rule)
    return [rule for rule in _BY_ROOT.get(op, ()) if in_tolerance(rule)]


def in_tolerance(rule: FusionRule) -> bool:
    """Whether ``rule`` may be used: fusion never changes results beyond the active
    tolerance, and a user's rule accepted under a looser one (``set_tolerance``
    tightened since) differs from its pattern by more (it was used, silently)."""
    from ppto.runtime.precision import get_tolerance

    return rule.error <= get_tolerance()[0]
