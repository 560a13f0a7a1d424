"""Reverse mode: the generated forward statements, then the adjoint of every active
statement in reverse order, each block under ``# grad of: <the user's line>``.

Adjoints are named ``d`` + the primal's name. The first contribution to an adjoint
assigns it, later ones add to it; where only one branch of an ``if`` contributes, the
other starts it at zero, so every adjoint is defined on every path.
"""

from __future__ import annotations

import collections

import gast
import numpy as np

from ppto.checkpoint import random_states, replayed
from ppto.ops.primitive import require_rule
from ppto.transform import ir, lists, origins, trees
from ppto.transform.analyze import call_specialisation, operand_rank
from ppto.transform.emit import GENERATED_PREFIX, comment
from ppto.transform.inline import inline_rule, operand_expr
from ppto.transform.origins import GRADIENT
from ppto.transform.source import closure_values, signature
from ppto.transform.trees import called, clone, loads, stores, written_position


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
        self.random_of_call: dict[int, str] = {}  # (random_states before a call)
        self.user_names: set = set()
        self.plans: dict[int, LoopPlan] = {}
        self.carried: set[str] = set()
        self.function_body: list = []
        self.tapes: list[str] = []
        self.reversed_ifs: dict = {}
        self.plan_stack: list = []
        self.lists: set[str] = set()
        # generated function -> its result's layout (Program.result_layouts)
        self.result_layouts: dict = {}
        self.reruns_differ: dict = {}  # (Program.reruns_differ)
        self.origins: dict = {}  # (id of a user statement, role) -> its origins

    def take_result_layout(self, s: ir.CallFunction, generated: str) -> None:
        """A call's single result takes the layout its function's derivative found
        for it (a helper's conv2d of an nhwc image): the analysis, made before
        the callee's, could not tell it (see ``analyze._pass_on_layouts``), and the
        caller's own result may be that value (``return helper(x)``, a method
        differentiated through its wrapper)."""
        layout = self.result_layouts.get(generated)
        if len(s.targets) == 1 and layout in ("nchw", "nhwc"):  # (not a tuple's)
            self.activity.layouts[s.targets[0]] = layout

    def origin_of(self, s, role: str = origins.COMPUTES) -> tuple | None:
        """The origins of the code made for IR statement ``s`` (see origins.py),
        found once per user statement and role."""
        key = (id(s.origin), role)
        if key not in self.origins:
            self.origins[key] = origins.origin_of(self.parsed, s.origin, role)
        return self.origins[key]

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
            out.extend(self.pushes_after(statement))
        return out

    def writes(self, statement) -> tuple:
        """What a statement assigns in generated code (a call also assigns the values
        its backward pass needs)."""
        saved = self.saved_of_call.get(id(statement))
        states = self.random_of_call.get(id(statement))
        plan = self.plans.get(id(statement))
        counter = (plan.counter,) if plan is not None and plan.counter else ()
        kept = tuple(n for n in (states, saved) if n)
        return ir.writes(statement) + kept + counter

    def all_writes(self, body: list) -> set:
        found = set()
        for statement in body:
            found |= set(self.writes(statement))
            if isinstance(statement, ir.For):
                found.add(statement.target)
            for block in ir.blocks(statement):
                found |= self.all_writes(block)
        return found

    def pushes_after(self, statement) -> list:
        """Tape pushes of the values a statement computes that the innermost enclosing
        loop's reverse reads. A value a nested loop writes is pushed once, after that
        loop (its final value is what the enclosing body goes on with)."""
        plan = self.plan_stack[-1] if self.plan_stack else None
        if plan is None:
            return []
        if isinstance(statement, ir.LOOPS):
            writes = sorted(self.all_writes([statement]))
        else:
            writes = [w for w in self.writes(statement) if w not in plan.loop_written]
        code = []
        for written in writes:
            if written in plan.pushed_after:
                code.append(_push(plan.tape(written), name(written)))
            if written in plan.shapes:
                shape = call(self.ref(np.shape, "shape"), name(written))
                code.append(_push(plan.shape_tape(written), shape))
        return code

    def forward_statement(self, s) -> list:
        """The generated statements computing IR statement ``s``, marked with the
        user's line they compute (see origins.py)."""
        return origins.mark(self.forward_code(s), self.origin_of(s))

    def forward_code(self, s) -> list:
        if isinstance(s, ir.Apply):
            return [assign(s.target, self.apply_expr(s))]
        if isinstance(s, ir.Passive):
            return [clone(s.node)]
        if isinstance(s, ir.Copy):
            return [assign(s.target, operand_expr(s.source))]
        if isinstance(s, ir.Pack):
            return [
                assign(
                    s.target,
                    gast.Tuple([operand_expr(i) for i in s.items], gast.Load()),
                )
            ]
        if isinstance(s, ir.Unpack):  # always a tuple target, even for (y,) = f(x)
            names = gast.Tuple([name(t, True) for t in s.targets], gast.Store())
            return [assign(names, name(s.source))]
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
        if isinstance(s, ir.LOOPS):
            return self.forward_loop(s)
        if isinstance(s, ir.ListNew):
            return [assign(s.target, gast.List([], gast.Load()))]
        if isinstance(s, ir.ListAppend):
            return [_push(s.target, operand_expr(s.value))]
        if isinstance(s, ir.ListPop):
            return [assign(s.target, _pop(s.source))]
        if isinstance(s, ir.ListGet):
            element = gast.Subscript(name(s.source), clone(s.index), gast.Load())
            return [assign(s.target, element)]
        if isinstance(s, ir.BreakIf):
            return [gast.If(name(s.test), [gast.Break()], [])]
        return []

    def forward_loop(self, s) -> list:
        """The loop as written, plus what its reverse needs: pushes of values the
        backward pass reads and the loop overwrites, and an iteration counter."""
        plan = self.plans.get(id(s))
        if plan is not None:
            plan.loop_written = {
                written
                for inner in ir.walk(s.body)
                if isinstance(inner, ir.LOOPS)
                for written in self.all_writes([inner])
            }
        self.plan_stack.append(
            plan
        )  # None too: inner statements push for no outer loop
        body = []
        for statement in s.body:
            code = self.forward_statement(statement)
            if (
                plan is not None
                and isinstance(statement, ir.Copy)
                and (statement.target in plan.pushed_before)
            ):
                code = [
                    _push(plan.tape(statement.target), name(statement.target))
                ] + code
            if isinstance(statement, ir.BreakIf) and plan is not None and plan.counter:
                code = [_increment(plan.counter)] + code
            body.extend(code)
            body.extend(self.pushes_after(statement))
        self.plan_stack.pop()
        prelude = []
        if plan is not None and plan.counter:
            prelude.append(assign(plan.counter, gast.Constant(0, None)))
            if not any(isinstance(x, ir.BreakIf) for x in s.body):
                body.append(_increment(plan.counter))
        return prelude + [loop_statement(s, body)]

    def apply_expr(self, s: ir.Apply):
        inputs = [operand_expr(x) for x in s.inputs]
        if s.style == "binop":
            return gast.BinOp(inputs[0], clone(s.syntax), inputs[1])
        if s.style == "unary":
            return gast.UnaryOp(clone(s.syntax), inputs[0])
        if s.style == "attribute":
            return gast.Attribute(inputs[0], s.syntax, gast.Load())
        if s.style == "subscript":
            return gast.Subscript(inputs[0], clone(s.syntax), gast.Load())
        keywords = [gast.keyword(k, clone(s.params[k])) for k in s.given]
        if s.op.positional:  # (its positional order is not its own: by name)
            named = [
                gast.keyword(k, x)
                for k, x in zip(s.op.input_names[1:], inputs[1:])
                if not _is_default_none(x, k, s.op)
            ]
            keywords, inputs = named + keywords, inputs[:1]
        return gast.Call(name(self.op_ref(s.op)), inputs, keywords)

    def op_ref(self, op) -> str:
        preferred = op.name.rsplit(".", 1)[-1]
        return self.ref(op, preferred)

    def forward_call(self, s: ir.CallFunction) -> list:
        arguments = [operand_expr(x) for x in s.inputs]
        keywords = [gast.keyword(k, operand_expr(v)) for k, v in s.keywords.items()]
        targets = _targets(s.targets)
        plan = self.call_plan(s)
        if plan is None or s.checkpoint:  # a checkpointed call saves nothing
            function = self.ref(s.function.fn, s.function.name)
            code = [assign(targets, gast.Call(name(function), arguments, keywords))]
            states = self.random_of_call.get(id(s))
            if states is not None:  # but the random generators' states
                take = call(self.ref(random_states, "random_states"), name(function))
                take.args += [clone(x) for x in arguments]
                take.args += [clone(k.value) for k in keywords]
                code.insert(0, assign(states, take))
            return code
        forward_name, _, _, _, result_rank = plan
        if len(s.targets) == 1:
            self.activity.ranks[s.targets[0]] = result_rank
        self.take_result_layout(s, forward_name)
        if id(s) not in self.saved_of_call:
            self.saved_of_call[id(s)] = self.namer.fresh(f"{s.function.name}_saved")
        saved = self.saved_of_call[id(s)]
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

    def argument_of(self, s: ir.CallFunction, parameter: str):
        """The expression a call gives for ``parameter`` (its default if omitted)."""
        from ppto.transform.normalize import constant_expr

        if parameter in s.keywords:
            return operand_expr(s.keywords[parameter])
        position = s.function.parameters.index(parameter)
        if position < len(s.inputs):
            return operand_expr(s.inputs[position])
        default = signature(s.function.fn).parameters[parameter].default
        return constant_expr(default)

    def call_plan(self, s: ir.CallFunction):
        if not any(self.activity.active(t) for t in s.targets):
            return None
        positions = [i for i, x in enumerate(s.inputs) if self.activity.active(x)]
        keywords = [k for k, x in s.keywords.items() if self.activity.active(x)]
        if not positions and not keywords:
            return None
        specialised = call_specialisation(s, self.activity, self.lists)
        return self.callees(s.function, positions, keywords, *specialised)

    # --- backward -------------------------------------------------------------------

    def adjoint_name(self, primal: str) -> str:
        if primal not in self.adjoints:
            self.adjoints[primal] = self.namer.adjoint(primal)
        return self.adjoints[primal]

    def accumulate(self, operand, value, initialized: set) -> list:
        if not isinstance(operand, str) or not self.activity.active(operand):
            return []
        adjoint = self.adjoint_name(operand)
        if operand in self.lists:
            if operand not in initialized:
                initialized.add(operand)
                return [assign(adjoint, call("list", value))]
            add = self.ref(lists.add_lists, "add_lists")
            return [assign(adjoint, call(add, name(adjoint), value))]
        if operand not in initialized:
            initialized.add(operand)
            return [assign(adjoint, value)]
        if isinstance(value, gast.Tuple):  # a tuple's adjoints, unpacked twice:
            add = self.ref(lists.add_lists, "add_lists")  # item by item, not joined
            return [assign(adjoint, call(add, name(adjoint), value))]
        if called(value, self.ref(lists.stacked_like, "stacked_like")):
            # a tuple's (``+`` would join them) or an array's
            add = self.ref(lists.add_adjoints, "add_adjoints")
            return [assign(adjoint, call(add, name(adjoint), value))]
        return [assign(adjoint, gast.BinOp(name(adjoint), gast.Add(), value))]

    def backward(self, body: list, initialized: set) -> list:
        out, last_origin = [], None
        for statement in reversed(body):
            code = self.adjoint(statement, initialized)
            if not code:
                continue
            origins.mark(code, self.origin_of(statement, GRADIENT))
            origin = statement.origin
            origin = getattr(origin, "split_from", origin)  # one comment per line
            if (
                origin is not None
                and origin is not last_origin
                and not isinstance(statement, (ir.If, *ir.LOOPS))
                and not getattr(origin, "synthetic", False)
            ):
                text = self.parsed.source.statement_text(origin)
                out.append(comment(f"grad of: {text}"))
                last_origin = origin
            out.extend(code)
        return out

    def adjoint(self, s, initialized: set) -> list:
        if isinstance(s, ir.ListCall):
            return self.adjoint_list_call(s, initialized)
        if isinstance(s, ir.Apply):
            return self.adjoint_apply(s, initialized)
        if isinstance(s, ir.Copy):
            if s.target not in initialized:
                return []
            code = self.accumulate(
                s.source, name(self.adjoint_name(s.target)), initialized
            )
            if s.target in self.carried:
                initialized.discard(s.target)  # its earlier value starts afresh
            return code
        if isinstance(s, ir.Pack):
            if s.target not in initialized:
                return []
            return self.adjoint_pack(s, initialized)
        if isinstance(s, ir.Unpack):
            if not any(t in initialized for t in s.targets):
                return []
            parts = self.unpacked_cotangent(s, initialized)
            return self.accumulate(s.source, parts, initialized)
        if isinstance(s, ir.If):
            return self.adjoint_if(s, initialized)
        if isinstance(s, ir.CallFunction):
            return self.adjoint_call(s, initialized)
        if isinstance(s, ir.LOOPS):
            return self.adjoint_loop(s, initialized)
        if isinstance(s, (ir.ListAppend, ir.ListPop, ir.ListGet)):
            return self.adjoint_list(s, initialized)
        return []

    def adjoint_pack(self, s: ir.Pack, initialized: set) -> list:
        """A tuple's adjoint is unpacked into its items' (``dx, t1 = dpair``), not
        indexed: differentiated again, an index of a tuple would be an array's
        ``getitem``, whose adjoint is an array shaped like the tuple, and a tuple of
        a list and a number (a gradient's saved values) has no such shape."""
        if not s.items:
            return []
        holders, added = [], []  # (added: items whose holder is added afterwards)
        for item in s.items:
            if (
                isinstance(item, str)
                and self.activity.active(item)
                and item not in initialized
                and item not in self.lists
            ):
                initialized.add(item)
                holders.append(self.adjoint_name(item))
            else:
                holders.append(self.namer.temporary())
                added.append((item, holders[-1]))
        targets = gast.Tuple([name(h, True) for h in holders], gast.Store())
        code = [assign(targets, name(self.adjoint_name(s.target)))]
        for item, holder in added:
            code += self.accumulate(item, name(holder), initialized)
        return code

    def adjoint_list(self, s, initialized: set) -> list:
        """A list's adjoint is a list: appends pop from it, pops append to it,
        indexing adds into one element."""
        if isinstance(s, ir.ListAppend):
            if s.target not in initialized:
                if not self.activity.active(s.target):
                    return []
                # an item appended after the list's last use: a zero adjoint, but
                # popped all the same, so that the adjoint stays one per item
                start = self.start_list_adjoint(s.target, initialized)
                return start + [gast.Expr(_pop(self.adjoint_name(s.target)))]
            popped = _pop(self.adjoint_name(s.target))
            if isinstance(s.value, str) and self.activity.active(s.value):
                return self.accumulate(s.value, popped, initialized)
            return [gast.Expr(popped)]
        if not self.activity.active(s.source):
            return []
        adjoint = self.adjoint_name(s.source)
        code = []
        if isinstance(s, ir.ListPop):
            code = self.start_list_adjoint(s.source, initialized)
            value = (
                name(self.adjoint_name(s.target))
                if s.target in initialized
                else call(self.zeros_ref(), name(s.target))
            )
            return code + [_push(adjoint, value)]
        if s.target not in initialized:
            return []
        code = self.start_list_adjoint(s.source, initialized)
        add_at = self.ref(lists.add_at, "add_at")
        element = name(self.adjoint_name(s.target))
        return code + [
            assign(adjoint, call(add_at, name(adjoint), clone(s.index), element))
        ]

    def start_list_adjoint(self, primal: str, initialized: set) -> list:
        """The statement starting a list's adjoint where its reverse first meets
        the list (none if started already): see ``zero_adjoint``."""
        if primal in initialized:
            return []
        initialized.add(primal)
        return [assign(self.adjoint_name(primal), self.zero_adjoint(primal))]

    def adjoint_list_call(self, s: ir.ListCall, initialized: set) -> list:
        """The list helpers are linear: ``add_at(xs, i, v)`` passes its adjoint on to
        ``xs`` and element ``i`` of it to ``v``; ``add_lists`` to both lists;
        ``list(t)`` / ``tuple(t)`` its adjoint (as a tuple when ``t`` is the tuple an
        operator returned)."""
        target = s.targets[0]
        if target not in initialized or not self.activity.active(target):
            return []
        adjoint = self.adjoint_name(target)
        code = []
        for kind, operand in zip(s.kinds, s.inputs):
            if kind in ir.PASSED or not isinstance(operand, str):
                continue  # (a constant, such as a list of numbers: no adjoint)
            replaced = s.function in (lists.replace_at, lists.zero_at)
            if s.function is lists.replace_at and called(s.inputs[1], "slice"):
                value = self.slice_replaced_adjoint(s, kind, adjoint)
            elif s.function in (lists.add_at, lists.replace_at) and kind == "value":
                index = clone(s.inputs[1])
                if s.function is lists.replace_at and not (
                    written_position(index) or operand in self.lists
                ):
                    # (hs[i] = h: an item, a slice in i refused when it runs)
                    index = call(self.ref(lists.item_position, "item_position"), index)
                value = gast.Subscript(name(adjoint), index, gast.Load())
            elif replaced and kind == "list":  # (the item replaced: a zero adjoint)
                zeroed = self.ref(lists.zero_at, "zero_at")
                value = call(zeroed, name(adjoint), clone(s.inputs[1]))
            elif s.function is lists.stacked_like:  # its transpose: the rows
                back = self.ref(lists.unstacked, "unstacked")
                value = call(back, name(adjoint), name(operand))
            elif s.function is lists.unstacked:  # (and back: third derivatives)
                stacked = self.ref(lists.stacked_like, "stacked_like")
                value = call(stacked, name(adjoint), name(operand))
            elif s.function is lists.repeat:
                fold = self.ref(lists.fold_repeats, "fold_repeats")
                value = call(fold, name(adjoint), clone(s.inputs[1]))
            elif s.function in (list, tuple) and operand not in self.lists:
                # a tuple (a tuple-valued operator's) or an array (its rows)
                stacked = self.ref(lists.stacked_like, "stacked_like")
                value = call(stacked, name(adjoint), name(operand))
            else:
                value = name(adjoint)
            code += self.accumulate(operand, value, initialized)
        return code

    def slice_replaced_adjoint(self, s: ir.ListCall, kind: str, adjoint: str):
        """The adjoint of ``xs_1 = replace_at(xs, index, values)`` for ``xs`` (kind
        "list") or ``values`` (kind "value") where ``index`` is a slice written
        out, which may grow or shrink the list (``hs[1:] = [a, b, c]``, ``hs[1:1]
        = [v]``, ``del hs[a:b]``; its step, read when it runs, tells):
        the values' adjoints are where they landed in ``xs_1``, not ``xs_1[index]``,
        and ``xs``'s are the others around zeros for the items replaced, one per
        item of ``xs`` (zeroing ``xs_1[index]`` kept ``xs_1``'s length, and the
        pops of ``xs``'s appends took the wrong adjoints, or found none). Only
        there: this code reads ``xs`` itself, of which a loop then keeps a version
        per step; an index in a variable (``hs[i] = h``) keeps the item's code, and
        ``replace_at`` refuses it where it would change the length."""
        before, index = s.inputs[0], s.inputs[1]
        before = name(before) if isinstance(before, str) else operand_expr(before)
        span_of = self.ref(lists.replaced_span, "replaced_span")
        span = call(span_of, clone(index), before, name(adjoint))
        if kind == "value":
            items = gast.Subscript(name(adjoint), span, gast.Load())
            operand = s.inputs[2]
            if operand in self.lists:
                return items
            # a tuple's or an array's (hs[1:] = x[1:]: its rows are the items)
            stacked = self.ref(lists.stacked_like, "stacked_like")
            return call(stacked, items, name(operand))
        zeros_of = self.ref(lists.zeros_replaced, "zeros_replaced")
        zeros = call(zeros_of, clone(before), clone(index))
        replaced = self.ref(lists.replace_at, "replace_at")
        return call(replaced, name(adjoint), span, zeros)

    def cotangent_of(self, targets, initialized):
        parts = [
            name(self.adjoint_name(t)) if t in initialized else self.zero_of_item(t)
            for t in targets
        ]
        return parts[0] if len(parts) == 1 else gast.Tuple(parts, gast.Load())

    def unpacked_cotangent(self, s: ir.Unpack, initialized: set):
        """The adjoint of the value ``a, b = source`` unpacks, from its items': a
        tuple of them for a tuple (an operator's several results), their stack for
        an array (its rows, as the adjoints of ``source[0]`` and ``source[1]``
        would add up to); decided when it runs where the analysis does not know,
        but in ppto's own code (a derivative differentiated again), whose values
        unpacked are its tuples (saved values, a call's results)."""
        from ppto.ops.shape import stack

        parts = self.cotangent_of(s.targets, initialized)
        parts = parts.elts if len(s.targets) > 1 else [parts]
        rank = self.activity.ranks.get(s.source)
        if (
            s.source in self.lists
            or s.source in self.activity.part_ranks
            or (not rank and self.parsed.source.filename.startswith(GENERATED_PREFIX))
        ):
            return gast.Tuple(parts, gast.Load())
        if rank:
            return call(self.ref(stack, "stack"), gast.List(parts, gast.Load()))
        stacked = self.ref(lists.stacked_like, "stacked_like")
        return call(stacked, gast.List(parts, gast.Load()), name(s.source))

    def zero_of_item(self, target: str):
        """The zero adjoint of an item of a tuple (or of a call's results): item by
        item for one whose kind is not known, such as the values a gradient saves,
        taken apart when it is differentiated again (lists, ranges, shapes)."""
        if target in self.lists or self.activity.ranks.get(target) is not None:
            return self.zero_adjoint(target)
        return call(self.ref(lists.zeros_like_items, "zeros_like_items"), name(target))

    def zero_adjoint(self, primal: str):
        """A zero adjoint: zeros shaped like the primal; for a list, a zero for each
        item it holds where the reverse meets it (the function's end or a loop's),
        as the reverse of each pop then appends an entry and that of each append
        pops one: the adjoint stays one per item, and items never popped (``xs =
        [a, b, c]; xs.pop()``) keep theirs, so appends find what they pop."""
        if primal in self.lists:
            helper = self.ref(lists.zeros_like_list, "zeros_like_list")
            return call(helper, name(primal))
        return call(self.zeros_ref(), name(primal))

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
            self.activity.dtypes,
        )
        code = self.known_shapes(list(statements))
        gradients = [self.known_shapes(g) if g is not None else None for g in gradients]
        if not rule.built_in:
            gradients = self.shapes_checked(s, gradients)
        if getattr(s.op.signature, "mode", "") == "broadcast" or s.op.name == "dot":
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

    def shapes_checked(self, s: ir.Apply, gradients: list) -> list:
        """A user's rule's gradients, each checked to have its input's shape where
        it runs (``rule_gradient``): one of another shape, broadcast by the
        operators after it, was a silently wrong gradient."""
        checked = []
        for operand, input_name, gradient in zip(s.inputs, s.op.input_names, gradients):
            if gradient is not None and isinstance(operand, str):
                gradient = shape_checked(self, gradient, operand, s.op.name, input_name)
            checked.append(gradient)
        return checked

    def known_shapes(self, tree):
        """``unbroadcast``/``unreduce`` read their ``like`` argument only for its shape:
        where that shape is known, pass it as a literal, so the value need not be kept
        (and can be fused away)."""
        from ppto.ops.reductions import unreduce
        from ppto.ops.shape import unbroadcast

        helpers = {self.ref(unbroadcast, "unbroadcast"), self.ref(unreduce, "unreduce")}
        shapes = self.activity.shapes
        for node in (
            trees.walk(t) for t in (tree if isinstance(tree, list) else [tree])
        ):
            for call_ in node:
                if (
                    isinstance(call_, gast.Call)
                    and isinstance(call_.func, gast.Name)
                    and call_.func.id in helpers
                    and len(call_.args) > 1
                    and isinstance(call_.args[1], gast.Name)
                    and call_.args[1].id not in self.user_names  # temporaries only
                    and shapes.get(call_.args[1].id) is not None
                ):
                    shape = shapes[call_.args[1].id]
                    call_.args[1] = gast.Tuple(
                        [gast.Constant(size, None) for size in shape], gast.Load()
                    )
        return tree

    def without_trivial_unbroadcast(self, s: ir.Apply, gradients):
        """``unbroadcast(g, a)`` is ``g`` when broadcasting did not change a's shape:
        every other input is a Python number, or the shapes are known and equal (the
        gradient has the result's shape)."""
        from ppto.fusion.kernels import ELEMENTWISE, TERNARY
        from ppto.ops.shape import unbroadcast
        from ppto.transform.analyze import operand_shape

        helper = self.ref(unbroadcast, "unbroadcast")
        result_shape = self.activity.shapes.get(s.target)
        # an elementwise operator's gradients have its result's shape before
        # unbroadcast, so that shape and the input's say what the sum is
        elementwise = s.op.name in ELEMENTWISE or s.op.name in TERNARY
        out = []
        for position, gradient in enumerate(gradients):
            others = [x for i, x in enumerate(s.inputs) if i != position]
            scalar_partners = all(
                isinstance(x, ir.Const) and isinstance(x.value, (int, float))
                for x in others
            )
            own = operand_shape(
                s.inputs[position], self.activity.shapes, self.activity.dtypes
            )
            same_shape = result_shape is not None and own == result_shape
            if s.op.name == "dot":  # matrices: no batch axes were broadcast
                same_shape = all(
                    operand_rank(x, self.activity.ranks) == 2 for x in s.inputs
                )

            def simpler(call_):
                if scalar_partners or same_shape:
                    return call_.args[0]
                if own is not None and result_shape is not None and elementwise:
                    return self.summed_to(call_, own, result_shape)
                return call_

            out.append(_rewrite_calls(gradient, helper, simpler))
        return out

    def summed_to(self, gradient, own: tuple, result: tuple):
        """``unbroadcast(g, a)`` as the sum it is when both shapes are known
        (``reduce_sum(g, axis=0)`` for a bias), where one sum gives ``a``'s shape."""
        from ppto.ops.reductions import reduce_sum

        lead = len(result) - len(own)
        if lead < 0 or any(n != 1 and n != r for n, r in zip(own, result[lead:])):
            return gradient
        inner = [
            lead + i for i, n in enumerate(own) if n == 1 and result[lead + i] != 1
        ]
        if lead and inner:
            return gradient  # leading and inner axes: one sum cannot give the shape
        axes = list(range(lead)) + inner
        if not axes:
            return gradient.args[0]
        axis = (
            gast.Constant(axes[0], None)
            if len(axes) == 1
            else gast.Tuple([gast.Constant(a, None) for a in axes], gast.Load())
        )
        keywords = [gast.keyword("axis", axis)]
        if inner:
            keywords.append(gast.keyword("keepdims", gast.Constant(True, None)))
        function = name(self.ref(reduce_sum, "reduce_sum"))
        return gast.Call(function, [gradient.args[0]], keywords)

    def resolver(self, rule):
        # the rule's closure first: a rule made in a factory reads its variables
        namespace = collections.ChainMap(closure_values(rule.fn), rule.fn.__globals__)

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
                zero = self.zero_adjoint(primal)
                code.append(assign(self.adjoint_name(primal), zero))
        initialized |= (in_body | in_else) - inside
        if not body and not orelse:
            return []
        reversed_if = gast.If(name(s.test), body or [gast.Pass()], orelse)
        self.reversed_ifs[id(s)] = reversed_if
        return [reversed_if]

    def adjoint_loop(self, s, initialized: set) -> list:
        """The reversed loop (see the module docstring of this method's plan)."""
        local = self.all_writes(s.body)
        if isinstance(s, ir.For):
            local.add(s.target)
        outside = _writes_outside(self.function_body, s) | set(self.parsed.parameters)
        carried = local & outside
        body_local = local - carried
        active_reads = {n for n in _all_reads(s.body) if self.activity.active(n)} | {
            n for n in carried if self.activity.active(n)
        }
        external = active_reads - body_local
        prelude = []
        for primal in sorted(external - initialized):
            prelude.append(assign(self.adjoint_name(primal), self.zero_adjoint(primal)))
            initialized.add(primal)
        saved_carried = self.carried
        self.carried = saved_carried | carried
        inner = set(initialized)
        reverse_body = self.backward(s.body, inner)
        self.carried = saved_carried
        # A value the loop body assigns and the code after the loop reads is the last
        # iteration's: once its assignment is reversed, earlier iterations' values
        # (overwritten, never read after the loop) start from a zero adjoint.
        for primal in sorted(body_local & initialized):
            if self.activity.active(primal) and reverse_body:
                reverse_body.append(
                    assign(self.adjoint_name(primal), self.zero_adjoint(primal))
                )
        # inner loops planned just now: their iteration counters are values too
        body_local = self.all_writes(s.body) | local - carried
        for primal in sorted(external - inner):
            reverse_body.append(
                assign(self.adjoint_name(primal), self.zero_adjoint(primal))
            )
        plan = LoopPlan(self.namer, self.tapes)
        self.plans[id(s)] = plan
        restore = plan.decide(s, reverse_body, body_local, carried, self)
        if not reverse_body:
            return prelude
        if isinstance(s, ir.For) and not plan.counter:
            steps = call("reversed", name(s.iterable))
        elif isinstance(s, ir.For):
            sliced = gast.Subscript(
                name(s.iterable),
                gast.Slice(None, name(plan.counter), None),
                gast.Load(),
            )
            steps = call("reversed", sliced)
        else:
            steps = call("range", name(plan.counter))
        target = s.target if isinstance(s, ir.For) else "_"
        loop = gast.For(name(target, True), steps, restore + reverse_body, [], None)
        return prelude + [loop]

    def adjoint_call(self, s: ir.CallFunction, initialized: set) -> list:
        if not any(t in initialized for t in s.targets):
            return []
        plan = self.call_plan(s)
        if plan is None:
            return []
        forward_name, backward_name, wrt, passed, _ = plan
        cotangent = self.cotangent_of(s.targets, initialized)
        code = []
        if s.checkpoint:  # recompute the call's intermediate values now, drawing
            # the same random numbers as the forward pass did
            saved = self.namer.fresh(f"{s.function.name}_saved")
            self.saved_of_call[id(s)] = saved
            arguments = [operand_expr(x) for x in s.inputs]
            keywords = [gast.keyword(k, operand_expr(v)) for k, v in s.keywords.items()]
            recompute = gast.Call(name(forward_name), arguments, keywords)
            if self.reruns_differ.get(forward_name, True):
                states = self.namer.fresh(f"{s.function.name}_random")
                self.random_of_call[id(s)] = states
                replay = self.ref(replayed, "replayed")
                recompute.args[:0] = [name(states), name(forward_name)]
                recompute.func = name(replay)
            recomputed = gast.Tuple([name("_", True), name(saved, True)], gast.Store())
            code.append(gast.Assign([recomputed], recompute, None))
        result = gast.Call(
            name(backward_name),
            [name(self.saved_of_call[id(s)]), cotangent],
            [gast.keyword(p, self.argument_of(s, p)) for p in passed],
        )
        holders = [self.namer.temporary() for _ in wrt]
        target = holders[0] if len(holders) == 1 else _targets(holders)
        code.append(assign(target, result))
        operands = [s.inputs[w] if isinstance(w, int) else s.keywords[w] for w in wrt]
        for operand, holder in zip(operands, holders):
            code += self.accumulate(operand, name(holder), initialized)
        return code


_MISSING = object()


def loop_statement(s, body: list):
    """The generated ``for`` or ``while`` statement of IR loop ``s`` with ``body``."""
    if isinstance(s, ir.For):
        target, iterable = name(s.target, True), name(s.iterable)
        return gast.For(target, iterable, body or [gast.Pass()], [], None)
    return gast.While(clone(s.test), body or [gast.Pass()], [])


class LoopPlan:
    """What one loop saves for its reverse: values pushed after they are computed,
    shapes pushed where only a shape is read, carried values pushed before they are
    overwritten, cheap values recomputed, and an iteration counter where needed."""

    def __init__(self, namer, tapes: list) -> None:
        self.namer = namer
        self.tapes = tapes
        self.pushed_after: set = set()
        self.pushed_before: set = set()
        self.shapes: set = set()
        self.loop_written: set = set()  # names nested loops write (pushed after them)
        self.counter = ""
        self._tapes: dict = {}

    def recompute_body(self, loop, restore, copies, generator):
        return _recompute(self, loop, restore, copies, generator)

    def tape(self, key: str) -> str:
        if key not in self._tapes:
            self._tapes[key] = self.namer.fresh(f"{key}_tape")
            self.tapes.append(self._tapes[key])
        return self._tapes[key]

    def shape_tape(self, primal: str) -> str:
        """The tape of ``primal``'s shapes: apart from that of a value named
        ``primal + "_shape"`` (the user's ``a_shape`` next to ``a``)."""
        key = ("shape", primal)
        if key not in self._tapes:
            self._tapes[key] = self.namer.fresh(f"{primal}_shape_tape")
            self.tapes.append(self._tapes[key])
        return self._tapes[key]

    def decide(
        self, loop, reverse_body: list, body_local: set, carried: set, generator
    ):
        needed = free_reads(reverse_body)
        copies = [
            x for x in loop.body if isinstance(x, ir.Copy) and x.target in carried
        ]
        if getattr(loop, "checkpoint", False):  # the recomputation reads values too
            rerun = [
                s
                for s in loop.body
                if s not in copies and not isinstance(s, ir.BreakIf)
            ]
            needed |= free_reads(generator.forward(rerun) + reverse_body)
        if isinstance(loop, ir.While) or any(
            isinstance(x, ir.BreakIf) for x in loop.body
        ):
            self.counter = self.namer.fresh("iterations")
        restore = []
        for copy_ in copies:
            source = copy_.source if isinstance(copy_.source, str) else None
            header = copy_.target
            wants_source = source is not None and source in needed
            if wants_source or header in needed:
                if wants_source:
                    restore.append(assign(source, name(header)))
                restore.append(assign(header, _pop(self.tape(header))))
                self.pushed_before.add(header)
        if getattr(loop, "checkpoint", False):
            return self.recompute_body(loop, restore, copies, generator)
        restored = {x.source for x in copies if isinstance(x.source, str)} | carried
        recomputable = _cheap_statements(loop.body)
        recompute = []
        shape_only = _shape_only(reverse_body, generator)
        branches = _defining_branches(loop.body, generator.all_writes)
        for primal in sorted(needed & body_local - restored):
            if isinstance(loop, ir.For) and primal == loop.target:
                continue
            if primal in shape_only:
                self.shapes.add(primal)
                # a name of its own: x + "_shape" may be the user's, or another
                # value's adjoint (d + "x_shape", the adjoint of a shape tape's
                # items, where a gradient is differentiated again)
                shape = self.namer.fresh(primal + "_shape")
                _rename_shape_uses(reverse_body, primal, shape, generator)
                popped = assign(shape, _pop(self.shape_tape(primal)))
            elif primal in recomputable and primal not in branches:
                recompute.extend(generator.forward_statement(recomputable[primal]))
                continue
            else:
                self.pushed_after.add(primal)
                popped = assign(primal, _pop(self.tape(primal)))
            places = branches.get(primal)
            if places is None:
                restore.append(popped)
            for statement, side in places or ():
                reversed_if = generator.reversed_ifs.get(id(statement))
                if reversed_if is not None:
                    getattr(reversed_if, side).insert(0, clone(popped))
        return restore + recompute


def _recompute(plan, loop, restore, copies, generator):
    """A checkpointed loop saves only its carried values; each reverse iteration
    runs the body forward again (without its closing copies) to recompute the rest,
    but for what read again could differ (``W = self.W``, a random draw): saved."""
    restore = [
        s
        for s in restore
        if not (isinstance(s, gast.Assign) and isinstance(s.value, gast.Name))
    ]  # the body recomputes what the copies would restore
    body = [s for s in loop.body if s not in copies and not isinstance(s, ir.BreakIf)]
    for s in body:
        if isinstance(s, ir.Passive) and s.rereads:
            for target in s.targets:
                plan.pushed_after.add(target)
                restore.append(assign(target, _pop(plan.tape(target))))
    body = [s for s in body if not (isinstance(s, ir.Passive) and s.rereads)]
    return restore + generator.forward(body)


def _defining_branches(body: list, all_writes) -> dict:
    """For names assigned inside an ``if`` of a loop body: the branches ((if, side)
    pairs) whose reverse pops the name's tape (its pushes follow its assignments).
    The innermost branch holding every assignment; where none does, the branch
    holding the ``if`` where the assignments part (or none: popped before the ifs)
    if every path through that ``if`` assigns the name (both branches, or each of
    an ``elif`` chain), since its reverse and what follows it may read the name;
    else each assigning branch, as pushed on those paths only (``if a: x = ...
    elif b: ... else: x = ...`` assigns x on two paths of three)."""
    paths: dict = {}
    _branch_paths(body, (), paths, all_writes)
    found = {}
    for written, (first, *others) in paths.items():
        common = first
        for other in others:
            size = 0
            while size < min(len(common), len(other)) and _same(
                common[size], other[size]
            ):
                size += 1
            common = common[:size]
        every = [first, *others]
        level = len(common)
        if any(len(path) == level for path in every) or _covered(
            [path[level:] for path in every]
        ):
            if common:
                found[written] = [common[-1]]
        else:
            found[written] = _distinct([path[-1] for path in every])
    return found


def _covered(paths: list) -> bool:
    """Whether assignments at the ends of ``paths`` (each starting at one ``if``)
    happen on every path through that ``if``: each side assigns at its top, or
    holds an ``if`` covered in turn."""
    if not paths or not all(paths):
        return False
    statement = paths[0][0][0]
    for side in ("body", "orelse"):
        inside = [path[1:] for path in paths if _same(path[0], (statement, side))]
        if not inside:
            return False
        if any(not rest for rest in inside):
            continue
        nested = _distinct([rest[0][0] for rest in inside])
        if not any(
            _covered([rest for rest in inside if rest[0][0] is inner])
            for inner in nested
        ):
            return False
    return True


def _distinct(items: list) -> list:
    """``items`` without repeats (by identity of their statements), in order."""
    out = []
    for item in items:
        if not any(
            (item is seen) or (isinstance(item, tuple) and _same(item, seen))
            for seen in out
        ):
            out.append(item)
    return out


def _same(a: tuple, b: tuple) -> bool:
    return a[0] is b[0] and a[1] == b[1]


def _branch_paths(body: list, path: tuple, paths: dict, all_writes) -> None:
    """Record, for every name ``body`` assigns, the chain of (if, side) around each
    assignment."""
    for statement in body:
        if isinstance(statement, ir.If):
            for side in ("body", "orelse"):
                inner = path + ((statement, side),)
                _branch_paths(getattr(statement, side), inner, paths, all_writes)
        else:
            for name_ in all_writes([statement]):  # saved values, nested loops too
                paths.setdefault(name_, []).append(path)


def _writes_outside(body: list, loop) -> set:
    """Names assigned in ``body`` anywhere except inside ``loop``."""
    found = set()
    for statement in body:
        if statement is loop:
            continue
        found |= set(ir.writes(statement))
        if isinstance(statement, ir.For):
            found.add(statement.target)
        for block in ir.blocks(statement):
            found |= _writes_outside(block, loop)
    return found


def _push(tape: str, value) -> gast.Expr:
    method = gast.Attribute(name(tape), "append", gast.Load())
    return gast.Expr(gast.Call(method, [value], []))


def _pop(tape: str):
    return gast.Call(gast.Attribute(name(tape), "pop", gast.Load()), [], [])


def _increment(counter: str) -> gast.Assign:
    return assign(
        counter, gast.BinOp(name(counter), gast.Add(), gast.Constant(1, None))
    )


def _all_reads(body: list) -> set:
    found = set()
    for statement in body:
        found |= ir.reads(statement)
        for block in ir.blocks(statement):
            found |= _all_reads(block)
    return found


def free_reads(statements: list) -> set:
    """Names a block of generated statements reads before assigning them."""
    stored: set = set()
    found: set = set()

    def visit(block, stored):
        for statement in block:
            if isinstance(statement, gast.If):
                found.update(loads(statement.test) - stored)
                visit(statement.body, set(stored))
                visit(statement.orelse, set(stored))
                continue
            if isinstance(statement, (gast.For, gast.While)):
                header = (
                    statement.iter
                    if isinstance(statement, gast.For)
                    else statement.test
                )
                found.update(loads(header) - stored)
                inner = set(stored)
                if isinstance(statement, gast.For):
                    inner |= stores(statement.target)
                visit(statement.body, inner)
                continue
            value = statement.value if hasattr(statement, "value") else statement
            found.update(loads(value) - stored)
            if isinstance(statement, gast.Assign):
                for target in statement.targets:
                    found.update(loads(target) - stored)
                    stored |= stores(target)

    visit(statements, stored)
    return found


_CHEAP = {
    "getitem",
    "transpose",
    "matrix_transpose",
    "reshape",
    "expand_dims",
    "squeeze",
}


def _cheap_statements(body: list) -> dict:
    """Views of other values (indexing, transposes, reshapes): recomputed in the
    reverse loop rather than saved."""
    return {
        s.target: s for s in body if isinstance(s, ir.Apply) and s.op.name in _CHEAP
    }


def _shape_uses(statements, generator):
    """Yield (node, parent-kind) for each load; used to find shape-only reads."""
    from ppto.ops.reductions import unreduce
    from ppto.ops.shape import unbroadcast

    helpers = {
        generator.ref(unbroadcast, "unbroadcast"),
        generator.ref(unreduce, "unreduce"),
    }
    for statement in statements:
        for node in trees.walk(statement):
            if (
                isinstance(node, gast.Call)
                and isinstance(node.func, gast.Name)
                and (node.func.id in helpers)
                and len(node.args) > 1
                and isinstance(node.args[1], gast.Name)
            ):
                yield node.args[1], "like"


def _shape_only(statements, generator) -> set:
    shape_loads: dict = {}
    for node, _ in _shape_uses(statements, generator):
        shape_loads[node.id] = shape_loads.get(node.id, 0) + 1
    all_loads: dict = {}
    for statement in statements:
        for node in trees.walk(statement):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load):
                all_loads[node.id] = all_loads.get(node.id, 0) + 1
    return {n for n, count in shape_loads.items() if all_loads.get(n) == count}


def _rename_shape_uses(statements, primal: str, shape_name: str, generator) -> None:
    for node, _ in list(_shape_uses(statements, generator)):
        if node.id == primal:
            node.id = shape_name


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


def _is_default_none(argument, name: str, op) -> bool:
    """Whether ``argument`` is None where the input ``name`` of ``op`` is None
    when not given (np.average's weights): left out of the call."""
    return (
        isinstance(argument, gast.Constant)
        and argument.value is None
        and name in op.input_defaults
        and op.input_defaults[name] is None
    )


def _targets(names):
    if isinstance(names, str):
        return name(names, True)
    if len(names) == 1:
        return name(names[0], True)
    return gast.Tuple([name(n, True) for n in names], gast.Store())


def _rewrite_calls(expression, function: str, rewrite):
    """``expression`` with each call of ``function`` at its top or under arithmetic
    (``-unbroadcast(g, b)``, ``-unbroadcast(g, b) / b``) replaced by
    ``rewrite(call)``."""
    if called(expression, function):
        return rewrite(expression)
    if isinstance(expression, gast.UnaryOp):
        expression.operand = _rewrite_calls(expression.operand, function, rewrite)
    elif isinstance(expression, gast.BinOp):
        expression.left = _rewrite_calls(expression.left, function, rewrite)
        expression.right = _rewrite_calls(expression.right, function, rewrite)
    return expression


def shape_checked(generator, value, like: str, op_name: str, input_name: str):
    """``rule_gradient(value, like, op_name, input_name)``: a user's rule's gradient
    for ``input_name`` (none: its tangent of the result), checked where it runs to
    have the shape of ``like`` (see ``shape.rule_gradient``)."""
    from ppto.ops.shape import rule_gradient

    helper = generator.ref(rule_gradient, "rule_gradient")
    return call(
        helper,
        value,
        name(like),
        gast.Constant(op_name, None),
        gast.Constant(input_name, None),
    )
