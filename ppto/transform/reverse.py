"""Reverse mode: the generated forward statements, then the adjoint of every active
statement in reverse order, each block under ``# grad of: <the user's line>``.

Adjoints are named ``d`` + the primal's name. The first contribution to an adjoint
assigns it, later ones add to it; where only one branch of an ``if`` contributes, the
other starts it at zero, so every adjoint is defined on every path.
"""

from __future__ import annotations

import copy

import gast

from ppto.ops.primitive import require_rule
from ppto.transform import ir
from ppto.transform.analyze import operand_rank
from ppto.transform.emit import comment
from ppto.transform.inline import inline_rule, operand_expr


def name(identifier: str, store: bool = False) -> gast.Name:
    return gast.Name(identifier, gast.Store() if store else gast.Load(), None, None)


def assign(target, value) -> gast.Assign:
    if isinstance(target, str):
        target = name(target, True)
    return gast.Assign([target], value, None)


def call(function: str, *arguments, keywords=()) -> gast.Call:
    return gast.Call(
        name(function), list(arguments), [gast.keyword(k, v) for k, v in keywords]
    )


class References:
    """The module-level objects generated code refers to, each under a readable name
    that no function using it has as a local variable."""

    def __init__(self, global_namer) -> None:
        self.namer = global_namer
        self.namespace: dict = {}
        self._names: dict[int, list[str]] = {}

    def bind(self, label: str, value) -> None:
        """Bind a user global under its own name (the user's code refers to it)."""
        if label not in self.namespace:
            self.namer.reserve(label)
            self.namespace[label] = value
            self._names.setdefault(id(value), []).append(label)

    def ref(self, value, preferred: str, local_names: set) -> str:
        for known in self._names.get(id(value), ()):
            if known not in local_names:
                return known
        label = preferred
        if label in self.namespace or label in self.namer.taken or label in local_names:
            label = self.namer.numbered(preferred)
            while label in local_names:
                label = self.namer.numbered(preferred)
        self.namer.reserve(label)
        self.namespace[label] = value
        self._names.setdefault(id(value), []).append(label)
        return label


class Generator:
    """Builds the forward and backward statements of one function."""

    def __init__(self, parsed, activity, namer, refs: References, callees) -> None:
        self.parsed = parsed
        self.activity = activity
        self.namer = namer
        self.refs = refs
        self.callees = callees  # (parsed, wrt, ranks) -> (forward, backward, names)
        self.adjoints: dict[str, str] = {}
        self.saved_of_call: dict[int, str] = {}
        self.user_names: set = set()

    def ref(self, value, preferred: str) -> str:
        local = self.user_names | (self.namer.taken - self.refs.namer.taken)
        name_ = self.refs.ref(value, preferred, local)
        self.namer.reserve(name_)
        return name_

    # --- forward --------------------------------------------------------------------

    def forward(self, body: list) -> list:
        out = []
        for statement in body:
            out.extend(self.forward_statement(statement))
        return out

    def forward_statement(self, s) -> list:
        if isinstance(s, ir.Apply):
            return [assign(s.target, self.apply_expr(s))]
        if isinstance(s, ir.Passive):
            return [copy.deepcopy(s.node)]
        if isinstance(s, ir.Copy):
            return [assign(s.target, operand_expr(s.source))]
        if isinstance(s, ir.Pack):
            return [
                assign(
                    s.target,
                    gast.Tuple([operand_expr(i) for i in s.items], gast.Load()),
                )
            ]
        if isinstance(s, ir.Unpack):
            return [assign(_targets(s.targets), name(s.source))]
        if isinstance(s, ir.If):
            return [
                gast.If(
                    name(s.test),
                    self.forward(s.body) or [gast.Pass()],
                    self.forward(s.orelse),
                )
            ]
        if isinstance(s, ir.CallFunction):
            return self.forward_call(s)
        return []

    def apply_expr(self, s: ir.Apply):
        inputs = [operand_expr(x) for x in s.inputs]
        if s.style == "binop":
            return gast.BinOp(inputs[0], copy.deepcopy(s.syntax), inputs[1])
        if s.style == "unary":
            return gast.UnaryOp(copy.deepcopy(s.syntax), inputs[0])
        if s.style == "attribute":
            return gast.Attribute(inputs[0], s.syntax, gast.Load())
        if s.style == "subscript":
            return gast.Subscript(inputs[0], copy.deepcopy(s.syntax), gast.Load())
        keywords = [gast.keyword(k, copy.deepcopy(s.params[k])) for k in s.given]
        return gast.Call(name(self.op_ref(s.op)), inputs, keywords)

    def op_ref(self, op) -> str:
        preferred = op.name.rsplit(".", 1)[-1]
        return self.ref(op, preferred)

    def forward_call(self, s: ir.CallFunction) -> list:
        arguments = [operand_expr(x) for x in s.inputs]
        keywords = [gast.keyword(k, operand_expr(v)) for k, v in s.keywords.items()]
        targets = _targets(s.targets)
        plan = self.call_plan(s)
        if plan is None:
            function = self.ref(s.function.fn, s.function.name)
            return [assign(targets, gast.Call(name(function), arguments, keywords))]
        forward_name, _, _, result_rank = plan
        if len(s.targets) == 1:
            self.activity.ranks[s.targets[0]] = result_rank
        saved = self.namer.fresh(f"{s.function.name}_saved")
        self.saved_of_call[id(s)] = saved
        both = gast.Tuple(
            [
                targets if len(s.targets) > 1 else name(s.targets[0], True),
                name(saved, True),
            ],
            gast.Store(),
        )
        return [
            gast.Assign(
                [both], gast.Call(name(forward_name), arguments, keywords), None
            )
        ]

    def call_plan(self, s: ir.CallFunction):
        if not any(self.activity.active(t) for t in s.targets):
            return None
        positions = [i for i, x in enumerate(s.inputs) if self.activity.active(x)]
        keywords = [k for k, x in s.keywords.items() if self.activity.active(x)]
        if not positions and not keywords:
            return None
        ranks = [operand_rank(x, self.activity.ranks) for x in s.inputs]
        return self.callees(s.function, positions, keywords, ranks)

    # --- backward -------------------------------------------------------------------

    def adjoint_name(self, primal: str) -> str:
        if primal not in self.adjoints:
            self.adjoints[primal] = self.namer.adjoint(primal)
        return self.adjoints[primal]

    def accumulate(self, operand, value, initialized: set) -> list:
        if not isinstance(operand, str) or not self.activity.active(operand):
            return []
        adjoint = self.adjoint_name(operand)
        if operand not in initialized:
            initialized.add(operand)
            return [assign(adjoint, value)]
        return [assign(adjoint, gast.BinOp(name(adjoint), gast.Add(), value))]

    def backward(self, body: list, initialized: set) -> list:
        out, last_origin = [], None
        for statement in reversed(body):
            code = self.adjoint(statement, initialized)
            if not code:
                continue
            origin = statement.origin
            if (
                origin is not None
                and origin is not last_origin
                and not isinstance(statement, ir.If)
            ):
                text = self.parsed.source.statement_text(origin)
                out.append(comment(f"grad of: {text}"))
                last_origin = origin
            out.extend(code)
        return out

    def adjoint(self, s, initialized: set) -> list:
        if isinstance(s, ir.Apply):
            return self.adjoint_apply(s, initialized)
        if isinstance(s, ir.Copy):
            if s.target in initialized:
                return self.accumulate(
                    s.source, name(self.adjoint_name(s.target)), initialized
                )
            return []
        if isinstance(s, ir.Pack):
            if s.target not in initialized:
                return []
            code = []
            for position, item in enumerate(s.items):
                element = gast.Subscript(
                    name(self.adjoint_name(s.target)),
                    gast.Constant(position, None),
                    gast.Load(),
                )
                code += self.accumulate(item, element, initialized)
            return code
        if isinstance(s, ir.Unpack):
            if not any(t in initialized for t in s.targets):
                return []
            return self.accumulate(
                s.source, self.cotangent_of(s.targets, initialized), initialized
            )
        if isinstance(s, ir.If):
            return self.adjoint_if(s, initialized)
        if isinstance(s, ir.CallFunction):
            return self.adjoint_call(s, initialized)
        return []

    def cotangent_of(self, targets, initialized):
        parts = [
            name(self.adjoint_name(t))
            if t in initialized
            else call(self.zeros_ref(), name(t))
            for t in targets
        ]
        return parts[0] if len(parts) == 1 else gast.Tuple(parts, gast.Load())

    def zeros_ref(self) -> str:
        from ppto.ops.shape import zeros_like

        return self.ref(zeros_like, "zeros_like")

    def adjoint_apply(self, s: ir.Apply, initialized: set) -> list:
        if s.target not in initialized or not self.activity.active(s.target):
            return []
        needed = [
            bool(ir.operand_names(x) & self.activity.varied & self.activity.useful)
            and name_ not in s.op.nondiff
            for name_, x in zip(s.op.input_names, s.inputs)
        ]
        if not any(needed):
            return []
        rule = require_rule(s.op, "backward")
        statements, gradients = inline_rule(
            rule,
            s,
            self.adjoint_name(s.target),
            needed,
            self.namer,
            self.resolver(rule),
            self.activity.ranks,
        )
        code = list(statements)
        if getattr(s.op.signature, "mode", "") == "broadcast":
            gradients = self.without_trivial_unbroadcast(s, gradients)
        for operand, gradient in zip(s.inputs, gradients):
            if gradient is None:
                continue
            if isinstance(operand, list):
                holder = self.namer.temporary()
                code.append(assign(holder, gradient))
                for position, item in enumerate(operand):
                    element = gast.Subscript(
                        name(holder), gast.Constant(position, None), gast.Load()
                    )
                    code += self.accumulate(item, element, initialized)
            else:
                code += self.accumulate(operand, gradient, initialized)
        return code

    def without_trivial_unbroadcast(self, s: ir.Apply, gradients):
        """``unbroadcast(g, a)`` is ``g`` when every other input is a Python number:
        broadcasting against a scalar leaves a's shape unchanged."""
        from ppto.ops.shape import unbroadcast

        helper = self.ref(unbroadcast, "unbroadcast")
        out = []
        for position, gradient in enumerate(gradients):
            others = [x for i, x in enumerate(s.inputs) if i != position]
            scalar_partners = all(
                isinstance(x, ir.Const) and isinstance(x.value, (int, float))
                for x in others
            )
            if (
                scalar_partners
                and isinstance(gradient, gast.Call)
                and isinstance(gradient.func, gast.Name)
                and gradient.func.id == helper
            ):
                gradient = gradient.args[0]
            out.append(gradient)
        return out

    def resolver(self, rule):
        namespace = rule.fn.__globals__

        def resolve(node):
            value = _static(node, namespace)
            if value is _MISSING:
                return None
            if isinstance(node, gast.Name) and _is_builtin(node.id, value):
                return None
            preferred = node.id if isinstance(node, gast.Name) else node.attr
            if hasattr(value, "name") and hasattr(value, "signature"):
                return name(self.op_ref(value))
            return name(self.ref(value, preferred))

        return resolve

    def adjoint_if(self, s: ir.If, initialized: set) -> list:
        in_body, in_else = set(initialized), set(initialized)
        body = self.backward(s.body, in_body)
        orelse = self.backward(s.orelse, in_else)
        inside = _written_inside(s)
        for names, code in ((in_body - in_else, orelse), (in_else - in_body, body)):
            for primal in sorted(names - inside):
                code.append(
                    assign(
                        self.adjoint_name(primal), call(self.zeros_ref(), name(primal))
                    )
                )
        initialized |= (in_body | in_else) - inside
        if not body and not orelse:
            return []
        return [gast.If(name(s.test), body or [gast.Pass()], orelse)]

    def adjoint_call(self, s: ir.CallFunction, initialized: set) -> list:
        if not any(t in initialized for t in s.targets):
            return []
        plan = self.call_plan(s)
        if plan is None:
            return []
        _, backward_name, wrt, _ = plan
        cotangent = self.cotangent_of(s.targets, initialized)
        result = gast.Call(
            name(backward_name), [name(self.saved_of_call[id(s)]), cotangent], []
        )
        holders = [self.namer.temporary() for _ in wrt]
        target = holders[0] if len(holders) == 1 else _targets(holders)
        code = [assign(target, result)]
        operands = [s.inputs[w] if isinstance(w, int) else s.keywords[w] for w in wrt]
        for operand, holder in zip(operands, holders):
            code += self.accumulate(operand, name(holder), initialized)
        return code


_MISSING = object()


def _written_inside(statement: ir.If) -> set:
    """Names assigned within an ``if`` (their adjoints are not needed after it)."""
    found = set()
    for branch in (statement.body, statement.orelse):
        for inner in branch:
            found |= set(ir.writes(inner))
            if isinstance(inner, ir.If):
                found |= _written_inside(inner)
    return found


def _static(node, namespace):
    import builtins

    if isinstance(node, gast.Name):
        if node.id in namespace:
            return namespace[node.id]
        return getattr(builtins, node.id, _MISSING)
    if isinstance(node, gast.Attribute):
        base = _static(node.value, namespace)
        if base is _MISSING:
            return _MISSING
        return getattr(base, node.attr, _MISSING)
    return _MISSING


def _is_builtin(identifier, value) -> bool:
    import builtins

    return getattr(builtins, identifier, _MISSING) is value


def _targets(names):
    if isinstance(names, str):
        return name(names, True)
    if len(names) == 1:
        return name(names[0], True)
    return gast.Tuple([name(n, True) for n in names], gast.Store())
