"""Forward mode: each active statement followed by its tangent, from the operators'
tangent rules inlined as source; control flow and loops are kept as they are (tangents
travel with the values, so no tape is needed).

A tangent that is known to be zero is never materialised: the inlined rule is
simplified (``0 * x`` -> zero, ``a + 0`` -> ``a``, a linear operator of zero -> zero)
and only a zero that cannot be simplified away becomes ``zeros_like(...)``.
"""

from __future__ import annotations

import os

import gast
import numpy as np

from ppto.errors import TransformError
from ppto.ops.primitive import OperatorDef, require_rule
from ppto.transform import ir, lists, origins, trees
from ppto.transform.analyze import call_specialisation
from ppto.transform.inline import inline_tangent, operand_expr
from ppto.transform.reverse import (
    _pop,
    _push,
    _targets,
    assign,
    call,
    loop_statement,
    name,
    shape_checked,
)
from ppto.transform.trees import clone, single_target

ZERO = "__zero__"
# a zero shaped like an expression (``zero_expressions[k]``): ``__zero__:k`` (no
# primal's name holds a colon)
ZERO_LIKE = ZERO + ":"


def zero(primal: str = "") -> gast.Name:
    return gast.Name(ZERO + primal, gast.Load(), None, None)


def zero_like(index: int) -> gast.Name:
    """The zero shaped like the expression ``zero_expressions[index]``."""
    return gast.Name(f"{ZERO_LIKE}{index}", gast.Load(), None, None)


def zero_primal(zero, expressions: list):
    """What the zero ``zero`` (a Name) is shaped like: a copy of its expression in
    ``expressions``, its primal's name, or None for a scalar zero."""
    if zero.id.startswith(ZERO_LIKE):
        return clone(expressions[int(zero.id[len(ZERO_LIKE) :])])
    primal = zero.id[len(ZERO) :]
    return name(primal) if primal else None


def is_zero(node) -> bool:
    return isinstance(node, gast.Name) and node.id.startswith(ZERO)


class TangentGenerator:
    """Forward statements interleaved with tangent statements for one function."""

    def __init__(self, generator, callees) -> None:
        self.generator = generator
        self.activity = generator.activity
        self.namer = generator.namer
        self.callees = callees  # (parsed, positions, keywords, ranks) -> jvp name
        self.zero_expressions: list = []  # what zeros of verbatim operands look like
        self.names: dict[str, str] = {}  # one tangent variable per primal, everywhere
        self.tangents: dict[str, str] = {}  # the primals with a tangent on this path

    def tangent_name(self, primal: str) -> str:
        if primal not in self.names:
            self.names[primal] = self.namer.adjoint(primal)
        self.tangents[primal] = self.names[primal]
        return self.names[primal]

    def has(self, operand) -> bool:
        return isinstance(operand, str) and operand in self.tangents

    def tangent_of(self, operand):
        """The tangent expression of an operand (a zero marker when it has none)."""
        if isinstance(operand, list):
            return gast.List([self.materialised(x) for x in operand], gast.Load())
        if self.has(operand):
            return name(self.tangents[operand])
        if isinstance(operand, ir.Verbatim):  # zeros shaped like the expression
            self.zero_expressions.append(operand_expr(operand))
            return zero_like(len(self.zero_expressions) - 1)
        return zero(operand if isinstance(operand, str) else "")

    def materialised(self, operand):
        expression = self.tangent_of(operand)
        if is_zero(expression):
            if isinstance(operand, ir.Verbatim) and isinstance(operand.expr, gast.Name):
                operand = operand.expr.id  # a value read as it is (not differentiated)
            if isinstance(operand, str):
                return self.zeros_for(operand)
            return call(self.generator.zeros_ref(), operand_expr(operand))
        return expression

    def zeros_for(self, primal: str):
        """A zero tangent for ``primal``: zeros like it, one per element of a list;
        part by part where it is not known to be an array (a tuple whose parts no
        tangent reached may hold parts of different shapes and dtypes)."""
        if primal in self.generator.lists:
            zeros = self.generator.ref(lists.zeros_like_list, "zeros_like_list")
            return call(zeros, name(primal))
        if self.activity.ranks.get(primal) is None:
            zeros = self.generator.ref(lists.zeros_like_items, "zeros_like_items")
            return call(zeros, name(primal))
        return call(self.generator.zeros_ref(), name(primal))

    def block(self, body: list) -> list:
        out = []
        for statement in body:
            out.extend(self.statement(statement))
        return out

    def statement(self, s) -> list:
        """The statements computing ``s`` and its tangent, each marked with the
        user's line it comes from (see origins.py)."""
        code = self.statement_code(s)
        if isinstance(s, (ir.If, *ir.LOOPS)):  # (its test runs the user's line)
            header = self.generator.origin_of(s)
            for statement in code:
                if isinstance(statement, (gast.If, gast.For, gast.While)):
                    origins.mark_alone(statement, header)
        return origins.mark(code, self.generator.origin_of(s, origins.TANGENT))

    def statement_code(self, s) -> list:
        if isinstance(s, ir.If):
            return self.branch(s)
        if isinstance(s, ir.LOOPS):
            return self.loop(s)
        if isinstance(s, ir.CallFunction):
            return self.call(s)
        code = self.generator.forward_statement(s)
        return self.list_tangent_begun(s) + code + self.tangent_statement(s)

    def list_tangent_begun(self, s) -> list:
        """``xs.append(v)`` on a list that has no tangent yet (an argument not
        differentiated, holding constants) but takes a varied value: its tangent
        list from here on, zeros for the items it held before (else the item's
        tangent was dropped: jvp of ``xs.append(x * 3.0)`` on a list argument)."""
        if not (
            isinstance(s, ir.ListAppend)
            and s.target in self.activity.varied
            and s.target not in self.tangents
        ):
            return []
        return [assign(self.tangent_name(s.target), self.zeros_for(s.target))]

    def tangent_statement(self, s) -> list:
        if isinstance(s, ir.Apply):
            return self.apply(s)
        if isinstance(s, ir.Copy) and self.has(s.source):
            return [assign(self.tangent_name(s.target), self.tangent_of(s.source))]
        if isinstance(s, ir.Copy) and s.target in self.tangents:
            # a carried value whose new tangent is zero: zeros like the value it
            # takes now (its old tangent would carry over into the next iteration)
            return [assign(self.tangents[s.target], self.materialised(s.source))]
        if isinstance(s, ir.Pack) and any(self.has(x) for x in s.items):
            items = [self.materialised(x) for x in s.items]
            return [assign(self.tangent_name(s.target), gast.Tuple(items, gast.Load()))]
        if isinstance(s, ir.Unpack) and self.has(s.source):
            targets = [name(self.tangent_name(t), True) for t in s.targets]
            return [
                assign(gast.Tuple(targets, gast.Store()), self.tangent_of(s.source))
            ]
        if isinstance(s, ir.ListCall) and s.targets[0] in self.activity.varied:
            return [assign(self.tangent_name(s.targets[0]), self.list_call(s))]
        if isinstance(s, ir.ListNew) and s.target in self.activity.varied:
            return [assign(self.tangent_name(s.target), gast.List([], gast.Load()))]
        if isinstance(s, ir.ListAppend) and s.target in self.tangents:
            return [_push(self.tangents[s.target], self.materialised(s.value))]
        if isinstance(s, ir.ListPop) and s.source in self.tangents:
            return [assign(self.tangent_name(s.target), _pop(self.tangents[s.source]))]
        if isinstance(s, ir.ListGet) and s.source in self.tangents:
            element = gast.Subscript(
                name(self.tangents[s.source]), clone(s.index), gast.Load()
            )
            return [assign(self.tangent_name(s.target), element)]
        return []

    def list_call(self, s: ir.ListCall):
        """The same (linear) list helper applied to the inputs' tangents."""
        arguments = []
        for kind, operand in zip(s.kinds, s.inputs):
            if kind in ir.PASSED:
                arguments.append(clone(operand))
            else:
                arguments.append(self.materialised(operand))
        return gast.Call(clone(s.node.value.func), arguments, [])

    def apply(self, s: ir.Apply) -> list:
        op = s.op
        if not op.differentiable or s.target not in self.activity.varied:
            return []
        slots = [
            self.tangent_of(x) if input_name not in op.nondiff else zero()
            for input_name, x in zip(op.input_names, s.inputs)
        ]
        if all(is_zero(t) for t in slots):
            return []
        if op.tangent_rule is None and _rule_of_its_own(op):
            raise self.refused_gradient_rule(s)
        rule = require_rule(op, "tangent")
        statements, expression = inline_tangent(
            rule,
            s,
            slots,
            self.namer,
            self.generator.resolver(rule),
            self.activity.ranks,
            self.activity.dtypes,
        )
        simplifier = _Simplify(self.generator.refs.namespace, self.zero_expressions)
        code = simplifier.statements(statements)
        expression = simplifier.visit(expression)
        if is_zero(expression):
            return code
        code = [self.materialise_zeros(c) for c in code]
        expression = self.materialise_zeros(expression)
        expression = self.full_shape(s, expression)
        if not rule.built_in:  # (a user's tangent of another shape was broadcast)
            expression = shape_checked(
                self.generator, expression, s.target, op.name, ""
            )
        return code + [assign(self.tangent_name(s.target), expression)]

    def refused_gradient_rule(self, s: ir.Apply) -> TransformError:
        """Forward mode cannot use a gradient rule, and the operator's body may have
        another derivative than its rule gives (a rule that clips or stops the
        gradient): differentiating the body, jvp and jacfwd disagreed with grad and
        jacrev, silently. Refused, as JAX refuses forward mode through custom_vjp."""
        op = s.op
        message = (
            f"ppto.{op.name} has a gradient rule{_defined_at(op.backward_rule.fn)} "
            "but no tangent rule, so forward mode (jvp, jacfwd, hessian) cannot "
            "differentiate it: its body's derivative may not be the one its "
            "gradient rule gives"
        )
        instead = (
            f"give {op.name} a tangent rule agreeing with its gradient rule, "
            f"@{op.name}.jvp_rule (it takes the inputs and returns tangent(dx, ...), "
            "the output's tangent); or use reverse mode (grad, vjp, jacrev)"
        )
        parsed = self.generator.parsed
        found = origins.origin_of(parsed, s.origin)
        if parsed.source.filename.startswith("<") and found:
            # (a gradient differentiated again: the user's line it was made from)
            return origins.error_at(found[0], message, instead)
        return parsed.source.error(s.origin, message, instead)

    def full_shape(self, s: ir.Apply, expression):
        """A broadcasting operator whose other tangents vanished passes an input's
        tangent through unchanged: give it the result's shape."""
        from ppto.ops.shape import broadcast_to
        from ppto.transform.analyze import operand_shape

        if getattr(s.op.signature, "mode", "") != "broadcast":
            return expression
        inner = (
            expression.operand if isinstance(expression, gast.UnaryOp) else expression
        )
        if not isinstance(inner, gast.Name):
            return expression
        for operand in s.inputs:
            if self.has(operand) and self.tangents[operand] == inner.id:
                shapes = self.activity.shapes
                known = operand_shape(operand, shapes, self.activity.dtypes)
                if known is not None and known == shapes.get(s.target):
                    return expression
                shape = call(self.generator.ref(np.shape, "shape"), name(s.target))
                return call(
                    self.generator.ref(broadcast_to, "broadcast_to"), expression, shape
                )
        return expression

    def materialise_zeros(self, node):
        zeros = self.generator.zeros_ref()
        return _WrittenOutZeros(zeros, self.zero_expressions).visit(node)

    def branch(self, s: ir.If) -> list:
        before = dict(self.tangents)
        body = self.block(s.body)
        in_body = dict(self.tangents)
        self.tangents = dict(before)
        orelse = self.block(s.orelse)
        in_else = self.tangents
        merged = dict(in_body)
        merged.update(in_else)
        defined = {
            "body": ir.all_writes(s.body),
            "orelse": ir.all_writes(s.orelse),
        }
        inside = defined["body"] | defined["orelse"]
        for primal in sorted(set(in_body) ^ set(in_else)):
            side, branch = (orelse, "orelse") if primal in in_body else (body, "body")
            if primal in inside and primal not in defined[branch]:
                continue  # not defined on that path, so not used after the if
            side.append(assign(merged[primal], self.zeros_for(primal)))
        self.tangents = merged
        return [gast.If(name(s.test), body or [gast.Pass()], orelse)]

    def loop(self, s) -> list:
        prelude = []
        written = ir.all_writes(s.body) | _appended(s.body)
        for primal in sorted(written & self.activity.varied):
            if primal not in self.tangents and _defined_before(primal, s, self):
                prelude.append(
                    assign(self.tangent_name(primal), self.zeros_for(primal))
                )
        return prelude + [loop_statement(s, self.block(s.body))]

    def call(self, s: ir.CallFunction) -> list:
        arguments = [operand_expr(x) for x in s.inputs]
        keywords = [gast.keyword(k, operand_expr(v)) for k, v in s.keywords.items()]
        positions = [i for i, x in enumerate(s.inputs) if self.has(x)]
        names = [k for k, x in s.keywords.items() if self.has(x)]
        if not positions and not names:
            return self.generator.forward_statement(s)
        specialised = call_specialisation(s, self.activity, self.generator.lists)
        jvp_name, parameters = self.callees(s.function, positions, names, *specialised)
        self.generator.take_result_layout(s, jvp_name)
        tangents = [self.materialised(s.inputs[i]) for i in positions]
        tangents += [self.materialised(s.keywords[k]) for k in names]
        keywords = keywords + [gast.keyword(p, t) for p, t in zip(parameters, tangents)]
        outputs = (
            _targets(s.targets) if len(s.targets) > 1 else name(s.targets[0], True)
        )
        tangent_names = [self.tangent_name(t) for t in s.targets]
        tangent_out = (
            _targets(tangent_names)
            if len(tangent_names) > 1
            else name(tangent_names[0], True)
        )
        both = gast.Tuple([outputs, tangent_out], gast.Store())
        result = gast.Call(name(jvp_name), arguments, keywords)
        return [gast.Assign([both], result, None)]


def _rule_of_its_own(op) -> bool:
    """Whether ``op`` is a user's function whose derivative is its gradient rule,
    not its body's (``@ppto.operator`` with ``@ppto.grad_rule``)."""
    return op.backward_rule is not None and op.differentiated_from_body


def _defined_at(function) -> str:
    """`` (file.py, line 12)``, where ``function`` is defined (its decorator's
    line), for messages; empty where it has no code."""
    code = getattr(function, "__code__", None)
    if code is None:
        return ""
    return f" ({os.path.basename(code.co_filename)}, line {code.co_firstlineno})"


def _appended(body: list) -> set:
    """The lists ``body`` appends to, nested blocks included: one that has no
    tangent before a loop gets it there, not at each turn's append (which would
    drop the items the earlier turns appended)."""
    found = set()
    for statement in body:
        if isinstance(statement, ir.ListAppend):
            found.add(statement.target)
        for block in ir.blocks(statement):
            found |= _appended(block)
    return found


def _defined_before(primal, loop, tangent_generator) -> bool:
    from ppto.transform.reverse import _writes_outside

    body = tangent_generator.generator.function_body
    outside = _writes_outside(body, loop) | set(
        tangent_generator.generator.parsed.parameters
    )
    return primal in outside


_OPERATOR_SYNTAX = {
    "add": gast.Add,
    "sub": gast.Sub,
    "mul": gast.Mult,
    "div": gast.Div,
    "dot": gast.MatMult,
}


class _Simplify(trees.Transformer):
    """Propagates known-zero tangents through an inlined tangent rule. A zero that
    a linear or bilinear operator made of a zero operand stands for zeros of the
    operator's result (``transpose(da)``, ``da @ w``), not of the operand: where it
    is written out (beside a non-zero tangent in a ``where``, a ``concat``), it is
    zeros like the operator applied to the primals. (Elementwise arithmetic keeps
    its zero operand's zero, which costs nothing to write out: a rule's products
    of a tangent keep that tangent's shape, and the operator's result is given its
    own shape in ``full_shape``.)"""

    def __init__(self, namespace: dict, zero_expressions: list) -> None:
        self.namespace = namespace
        self.zero_expressions = zero_expressions  # (the TangentGenerator's)
        self.zeros: dict[str, gast.Name] = {}  # a name's known-zero tangent

    def result_zero(self, node) -> gast.Name:
        """The zero tangent of ``node``, an expression one of whose zero operands
        makes it zero: zeros like ``node`` with each zero read as its primal
        (written out only where the zero cannot be simplified away)."""
        expressions = self.zero_expressions
        expressions.append(_ZerosAsPrimals(expressions).visit(clone(node)))
        return zero_like(len(expressions) - 1)

    def statements(self, body: list) -> list:
        out = []
        for statement in body:
            if isinstance(statement, gast.If):
                out.append(self.branch(statement))
                continue
            statement = self.visit(statement)
            target = single_target(statement)
            if target is not None and is_zero(statement.value):
                self.zeros[target] = statement.value
                continue
            # a name written again (to a tangent not known to be zero) is not zero
            for node in gast.walk(statement):
                if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
                    self.zeros.pop(node.id, None)
            out.append(statement)
        return out

    def branch(self, node: gast.If) -> gast.If:
        """Each path of an ``if`` on its own: a name zero after one path only is
        assigned its zeros at that path's end (the other gives it a value), and
        reads after the ``if`` are zero only where both paths leave it so. (A
        zero left for the whole ``if`` had a rule that reassigned a tangent in a
        branch give zero after it.)"""
        node.test = self.visit(node.test)
        before = dict(self.zeros)
        body = self.statements(node.body)
        after_body, self.zeros = self.zeros, dict(before)
        orelse = self.statements(node.orelse)
        after_else = self.zeros
        for target in sorted(after_body.keys() - after_else.keys()):
            body.append(assign(target, clone(after_body[target])))
        for target in sorted(after_else.keys() - after_body.keys()):
            orelse.append(assign(target, clone(after_else[target])))
        self.zeros = {n: z for n, z in after_body.items() if n in after_else}
        node.body, node.orelse = body or [gast.Pass()], orelse
        return node

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load) and node.id in self.zeros:
            return clone(self.zeros[node.id])
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        left, right = is_zero(node.left), is_zero(node.right)
        if isinstance(node.op, gast.Add):
            if left:
                return node.right
            if right:
                return node.left
        elif isinstance(node.op, gast.Sub):
            if right:
                return node.left
            if left:
                return gast.UnaryOp(gast.USub(), node.right)
        elif isinstance(node.op, gast.MatMult) and (left or right):
            return self.result_zero(node)  # (multiplied out: of neither's shape)
        elif isinstance(node.op, gast.Mult):
            if left:
                return node.left
            if right:
                return node.right
        elif isinstance(node.op, gast.Div) and left:
            return node.left
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.USub) and is_zero(node.operand):
            return node.operand
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        op = trees.called_value(node, self.namespace)
        if not isinstance(op, OperatorDef):
            return node
        symbol = _OPERATOR_SYNTAX.get(op.name)
        if symbol is not None and len(node.args) == 2 and not node.keywords:
            return self.visit_BinOp(gast.BinOp(node.args[0], symbol(), node.args[1]))
        if op.name == "neg" and len(node.args) == 1:
            return self.visit_UnaryOp(gast.UnaryOp(gast.USub(), node.args[0]))
        inputs = trees.operator_inputs(node, op) or node.args[: len(op.input_names)]
        slots = [x for n, x in zip(op.input_names, inputs) if n not in op.nondiff]
        kind = getattr(op, "tangent_kind", "")
        if (
            op.name == "where"
            and len(inputs) == 3
            and is_zero(inputs[1])
            and is_zero(inputs[2])
        ):
            return inputs[1]
        if kind == "linear" and slots and all(is_zero(x) for x in slots):
            return self.result_zero(node)
        if kind == "bilinear" and any(is_zero(x) for x in slots):
            return self.result_zero(node)
        return node


__all__ = ["TangentGenerator", "lists"]


class _WrittenOutZeros(trees.Transformer):
    """Each zero tangent in a tree written out: zeros (``zeros``, the name of the
    zeros operator) like its primal, or the number 0.0 where it has none. (Classes
    made once, not per tree.)"""

    def __init__(self, zeros, expressions: list) -> None:
        self.zeros, self.expressions = zeros, expressions

    def visit_Name(self, child):
        if is_zero(child):
            primal = zero_primal(child, self.expressions)
            if primal is not None:
                return call(self.zeros, primal)
            return gast.Constant(0.0, None)
        return child


class _ZerosAsPrimals(trees.Transformer):
    """Each zero tangent in a tree read as its primal (0.0 where it has none)."""

    def __init__(self, expressions: list) -> None:
        self.expressions = expressions

    def visit_Name(self, child):
        if not is_zero(child):
            return child
        primal = zero_primal(child, self.expressions)
        return gast.Constant(0.0, None) if primal is None else primal
