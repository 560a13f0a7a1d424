"""``show_op``: an operator's signature and gradient, as text derived from its rule.

The ``Grad:`` line is the backward rule's returned expression with its local names
substituted, the incoming gradient written ``δY`` and the result ``Y``. Plumbing that
only restores shapes (``unbroadcast``) is left out and ``matrix_transpose(B)`` is
written ``B.T``, so ``dot`` reads ``(δY @ B.T, A.T @ δY)``.
"""

from __future__ import annotations

import ast
import copy

from ppto.errors import PptoError
from ppto.ops.primitive import OperatorDef


def show_op(op: OperatorDef, file=None) -> str:
    """Print and return an operator's name, signature and gradient.

    >>> text = ppto.show_op(ppto.dot)
    Operator: Dot
    Input: (Tensor[M,K], Tensor[K,N])
    Output: Tensor[M,N]
    Grad: (δY @ B.T, A.T @ δY)
    """
    if not isinstance(op, OperatorDef):
        raise PptoError(
            f"show_op needs an operator such as ppto.dot, got {op!r}: "
            "python -m ppto ops lists them"
        )
    inputs, output = signature_text(op)
    text = "\n".join(
        [
            f"Operator: {op.display_name}",
            f"Input: {inputs}",
            f"Output: {output}",
            f"Grad: {grad_text(op)}",
        ]
    )
    print(text, file=file)
    return text


def signature_text(op: OperatorDef) -> tuple[str, str]:
    """``(inputs, output)`` as ``show_op`` writes them: the tensor inputs followed by
    the non-tensor parameters with their defaults.

    >>> signature_text(ppto.reduce_sum)
    ('(Tensor[...], axis=None, keepdims=False)', 'Tensor[...]')
    """
    inputs = op.inputs_text()
    output = op.signature.output.removesuffix(" tuple")
    if op.signature.output.endswith(" tuple"):
        output = f"tuple of {output}"
    return f"({inputs})", output


def grad_text(op: OperatorDef) -> str:
    """The backward rule's result as one expression (see the module docstring)."""
    if not op.differentiable:
        return "none (not differentiable)"
    rule = op.backward_rule
    if rule is None and op.differentiated_from_body:
        return "from its body (ppto.show_grad shows the code)"
    if rule is None:
        return "none (no rule defined)"
    outer = ast.parse(rule.source).body[0]
    inner = next(node for node in outer.body if isinstance(node, ast.FunctionDef))
    incoming = inner.args.args[0].arg
    renames = {incoming: "δY", "out": "Y"}
    result = _final_return(inner.body)
    if result is None:
        return "none"
    if _appended_to(result, inner):  # (multi_dot's: one gradient per array)
        return "built in a loop (ppto.show_grad shows the code)"
    assignments = [
        (node.targets[0].id, node.value)
        for node in outer.body + inner.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ]
    bindings: dict = {}
    for name, value in assignments:
        # in order, each value written with the bindings before it: a name bound
        # anew from itself (g = g + 1) is its earlier value there, not itself
        bindings[name] = _Simplify(bindings, renames).visit(copy.deepcopy(value))
    text = ast.unparse(_Simplify(bindings, renames).visit(copy.deepcopy(result)))
    names = [name for name, _ in assignments]
    if len(text) <= LONG or len(set(names)) < len(names):
        return text
    return _with_names(result, assignments, renames)


# A Grad line longer than this keeps the rule's names (np.prod's and np.cumprod's
# rules spell out how they avoid dividing by zero: substituted, a name read in
# several places is written out at each).
LONG = 160


def _with_names(result, assignments: list, renames: dict) -> str:
    """The rule's result with its local names kept, followed by the values of those
    it reads (``δY * s, with s = x * x``), each written with the names before it."""
    values = dict(assignments)
    needed: set = set()

    def read(node) -> None:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in values:
                if inner.id not in needed:
                    needed.add(inner.id)
                    read(values[inner.id])

    read(result)

    def written(node) -> str:
        return ast.unparse(_Simplify({}, renames).visit(copy.deepcopy(node)))

    clauses = [f"{name} = {written(v)}" for name, v in assignments if name in needed]
    return f"{written(result)}, with {'; '.join(clauses)}"


def _appended_to(result, function) -> bool:
    """Whether the rule's result is a list it builds by appending to it."""
    return isinstance(result, ast.Name) and any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "append"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == result.id
        for node in ast.walk(function)
    )


def _final_return(body: list):
    for node in reversed(body):
        if isinstance(node, ast.Return):
            return node.value
    return None


class _Simplify(ast.NodeTransformer):
    def __init__(self, bindings: dict, renames: dict) -> None:
        self.bindings = bindings
        self.renames = renames

    def visit_Name(self, node: ast.Name):
        if node.id in self.bindings:  # (already simplified)
            return copy.deepcopy(self.bindings[node.id])
        if node.id in self.renames:
            return ast.Name(self.renames[node.id], ast.Load())
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "unbroadcast" and node.args:
            return node.args[0]
        if name == "matrix_transpose" and len(node.args) == 1:
            return ast.Attribute(node.args[0], "T", ast.Load())
        if name == "dot" and len(node.args) == 2:
            return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
        return node
