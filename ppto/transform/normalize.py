"""Normalization: statements that touch differentiated values become one operation per
statement (``ir.Apply``, ``ir.CallFunction``, ...); everything else stays as the user
wrote it (``ir.Passive``). Calls are resolved to operators here, so the program that
comes out names every operation by its ppto operator.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
from types import ModuleType

import gast
import numpy as np

from ppto.checkpoint import may_draw
from ppto.errors import PptoError, TransformError
from ppto.ops import (
    elementwise,
    indexing,
    linalg,
    logic,
    numbers,
    reductions,
    shape,
)
from ppto.ops.numpy_map import (
    check_numpy_positionals,
    interleaved_subscripts,
    split_interleaved,
)
from ppto.ops.primitive import Primitive
from ppto.ops.unary_einsum import diagonals_first
from ppto.transform import ir, lists, trees
from ppto.transform.aliases import (
    IN_PLACE_DUNDERS,
    IN_PLACE_METHODS,
    LIST_CHANGES,
    VIEW_ATTRIBUTES,
    may_view,
)
from ppto.transform.constructors import constructed_dtype
from ppto.transform.fence import BITWISE
from ppto.transform.local_functions import localised, passed_callables
from ppto.transform.names import Namer
from ppto.transform.out_arguments import positional_outs
from ppto.transform.resolve import (
    ATTRIBUTE_OPERATORS,
    METADATA_ATTRIBUTES,
    METHOD_KEYWORDS,
    METHOD_OPERATORS,
    METHOD_RANK_CHECKS,
    VARARG_METHODS,
    classify,
    expression_text,
    flag_argument,
    interleaved_call,
    is_library,
    is_numpy_module,
    resolve_call,
    static_value,
)
from ppto.transform.source import ParsedFunction
from ppto.transform.trees import (
    bound_arguments,
    called,
    child_fields,
    clone,
    loads,
    name_counts,
    paired,
    passed_by_name,
    single_target,
    stores,
)

# calls that read only their arguments' shapes; split_points comes from concat's
# gradient rule, so second derivatives meet it in generated code
_SHAPE_QUERIES = {"shape", "ndim", "size", "split_points"}

BINARY_OPERATORS = {
    gast.Add: elementwise.add,
    gast.Sub: elementwise.sub,
    gast.Mult: elementwise.mul,
    gast.Div: elementwise.div,
    gast.Pow: elementwise.pow,
    gast.MatMult: linalg.dot,
    gast.FloorDiv: logic.floor_divide,
    gast.Mod: elementwise.remainder,
}


WHOLE_NUMBER_CALLS = {"argmax", "argmin"}
# NumPy functions of whole-number results (counts and positions): no derivative
# to lose, whatever they read (np.count_nonzero(x > 0), np.nonzero(m))
WHOLE_NUMBER_FUNCTIONS = frozenset(
    {np.count_nonzero, np.nonzero, np.flatnonzero, np.argwhere}
    # positions among sorted values, and indices: piecewise constant (np.bincount
    # is not here: its sums of weights are differentiable in them)
    | {np.searchsorted, np.digitize, np.lexsort, np.unravel_index}
    | {np.ravel_multi_index}
)
_SHAPE_CALLS = {"len", *_SHAPE_QUERIES}


def _bound_to_calls(tree) -> set[str]:
    """Names the function binds to a call's result (``att = MultiHead(2)``)."""
    return {
        target.id
        for node in gast.walk(tree)
        if isinstance(node, gast.Assign) and isinstance(node.value, gast.Call)
        for target in node.targets
        if isinstance(target, gast.Name)
    }


def value_reads(node, through_comparisons: bool = True) -> set[str]:
    """Names whose *values* an expression reads (``x.shape`` reads only metadata);
    with ``through_comparisons=False``, not those only compared (``x > 0`` is
    piecewise constant: no derivative flows through it). (A walk with a stack over
    the fields that may hold names: this runs for every expression, and for its
    parts as they are normalized.)"""
    found: set[str] = set()
    todo = [node]
    pop, push, AST = todo.pop, todo.append, ast.AST
    while todo:
        child = pop()
        if isinstance(child, gast.Name):
            if isinstance(child.ctx, gast.Load):
                found.add(child.id)
        elif isinstance(child, gast.Attribute):
            if child.attr in METADATA_ATTRIBUTES:
                continue
        elif isinstance(child, gast.Compare):
            if not through_comparisons:
                continue
        elif isinstance(child, gast.Call) and _reads_no_values(
            child.func, through_comparisons
        ):
            continue
        attributes = child.__dict__
        for field in child_fields(type(child)):
            value = attributes.get(field)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
    return found


def _reads_no_values(function, through_comparisons: bool) -> bool:
    """Whether a call of ``function`` reads no values of its arguments:
    ``len(x)``, ``np.shape(x)``, ``x.ndim()``... read only a shape; ``argmax(x)``
    and ``x.argmin()`` are whole numbers, piecewise constant like ``x > 0``."""
    if isinstance(function, gast.Name):
        called = function.id
        if called in _SHAPE_CALLS:
            return True
    elif isinstance(function, gast.Attribute):
        called = function.attr
        if called in _SHAPE_QUERIES:
            return True
    else:
        return False
    return not through_comparisons and called in WHOLE_NUMBER_CALLS


def _extreme_items(node: gast.Call) -> list:
    """The numbers a call of Python's max or min compares where ppto writes it as
    a chain (its arguments, or the items of the one list or tuple written out in
    it), or none: a call with key= or default=."""
    items = list(node.args)
    if len(items) == 1 and isinstance(items[0], (gast.List, gast.Tuple)):
        items = list(items[0].elts)
    if node.keywords or any(isinstance(item, gast.Starred) for item in items):
        return []
    return items


def constant_expr(value) -> gast.expr:
    """A gast expression for a Python literal (defaults of operator parameters)."""
    if isinstance(value, tuple):
        return gast.Tuple([constant_expr(v) for v in value], gast.Load())
    return gast.Constant(value, None)


def slice_expr(node) -> gast.expr:
    """A subscript's slice as an expression: ``1:3`` -> ``slice(1, 3, None)``."""
    if isinstance(node, gast.Slice):
        parts = [
            part or gast.Constant(None, None)
            for part in (node.lower, node.upper, node.step)
        ]
        # slice(1, 3) rather than slice(1, 3, None), and slice(None) for ``:``;
        # never slice(1) for ``1:`` (that is stop=1)
        if _is_none(parts[2]):
            parts.pop()
            if _is_none(parts[0]) and _is_none(parts[1]):
                parts.pop()
        return gast.Call(gast.Name("slice", gast.Load(), None, None), parts, [])
    if isinstance(node, gast.Tuple):
        return gast.Tuple([slice_expr(element) for element in node.elts], gast.Load())
    return node


def _is_slice_call(node) -> bool:
    """Whether ``node`` is ``slice(...)`` as ``slice_expr`` writes a slice."""
    return called(node, "slice") and not node.keywords


class Normalizer:
    """Turns the renamed statements of one function into IR (see module docstring)."""

    def __init__(
        self,
        parsed: ParsedFunction,
        varied: set[str],
        namer: Namer,
        local_names: set[str],
        reference=None,
        generated: bool = False,
    ) -> None:
        """``reference(value, preferred)``: the name generated code reads ``value``
        by (list helpers the user's code turns into, such as ``lists.repeat``);
        ``generated``: the code is ppto's (a gradient differentiated again)."""
        self.parsed = parsed
        self.reference = reference
        self.source = parsed.source
        self.varied = set(varied)
        self.namer = namer
        # a builtin the function never assigns is not local (``abs(x)`` resolves)
        stored = set(parsed.parameters) | {
            node.id
            for node in trees.walk(parsed.tree)
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store)
        }
        self.local_names = {
            name
            for name in local_names
            if name in stored or not hasattr(builtins, name)
        }
        self.out: list = []
        self.origin = None
        # lists: those built here, and names only lists can be whose .pop() or
        # .append(v) is called (a tape a generated backward unpacks from ``saved``)
        self.lists: set[str] = _list_receivers(parsed.tree)
        # lists written out of lists and never appended to or popped from
        # (``pairs = [[w1, b1], [w2, b2]]``): an item read is a list too, its
        # items an adjoint each (read as an array, the adjoints were stacked: a
        # ValueError for a weight and a bias)
        # name -> for each item, whether it is a list (where one is)
        self.list_items: dict[str, tuple] = {}
        self.receivers = set(self.lists)
        self.packed: set[str] = set()  # names of tuples of differentiated values
        # names bound to tuples ppto holds as lists (an adjoint per item): made by
        # tuple(...) or by joining tuples, ``t = t + (v,)``, which joins as tuples
        self.tuples: set[str] = set()
        # the renamed body (the pipeline sets it), whose names bound to tuples
        # written out and to joins of those alone (``t = ()`` before ``t = t +
        # (v,)`` in a loop) are tuples where they are joined: found when a join
        # first asks (see joined_tuples)
        self.body: list = []
        self._joined_tuples: set | None = None
        # a tuple written out and bound once: name -> its items' operands, so that
        # ``pair[0]`` is the item itself (as a subscript of an array, its adjoint
        # stacked the items: a ValueError for items of unlike shapes)
        self.tuple_items: dict = {}
        self.bound_once: set[str] | None = None
        # tuples written out and bound on several paths (or round a loop): taken
        # for lists, an adjoint per item (as an array, the items stacked: a
        # ValueError for items of unlike shapes, an array and a number)
        self.tuples: set[str] = set()
        # the renamed body (the pipeline sets it), whose names bound to tuples
        # written out and to joins of those alone (``t = ()`` before ``t = t +
        # (v,)`` in a loop) are tuples where they are joined: found when a join
        # first asks (see joined_tuples)
        self.body: list = []
        self._joined_tuples: set | None = None
        # parameters given tuples or lists of numbers (in the renamed code, the
        # values as passed): one whose item is replaced is a list
        self.numbers: set[str] = set()
        self.generated = generated

    # --- statements ------------------------------------------------------------------

    def block(self, body: list) -> list:
        if self.bound_once is None:  # (the function's whole body)
            counts = name_counts(body, "Store")
            self.bound_once = {n for n, count in counts.items() if count == 1}
            self.tuples = _merged_tuples(body, counts, self.varied)
            self.lists |= self.tuples
        saved, self.out = self.out, []
        # (the statement holding this block, a loop or branch, is the origin of
        # its own IR statement: not the last statement of its block)
        holder = self.origin
        for statement in body:
            self.origin = statement
            self.statement(statement)
        result, self.out, self.origin = self.out, saved, holder
        return result

    def refuse_lists_made_arrays(self, body: list) -> None:
        """A name that is a list on one path and an array on another (``xs =
        np.stack(xs) * 3.0`` in one branch or turn only) is refused: its adjoint,
        a list, was multiplied as an array (a TypeError) or lost the array path's
        factor. ``body``: the function's, normalized."""
        arrays: dict = {}  # name -> the operation that made it an array
        listed: set = set()
        for s in ir.walk(body):
            if _replaces_an_item(s, self.lists):  # (xs[0] = v: a list still)
                listed.add(s.target)
            elif isinstance(s, ir.Apply):
                arrays[s.target] = s
            elif isinstance(s, (ir.ListNew, ir.ListCall)):
                listed.update(ir.writes(s))
        copies = [s for s in ir.walk(body) if isinstance(s, ir.Copy)]
        changed = True
        while changed:
            before = len(arrays), len(listed)
            for s in copies:
                if s.source in arrays:
                    arrays.setdefault(s.target, arrays[s.source])
                if s.source in self.lists and s.source not in arrays:
                    listed.add(s.target)  # (from a list parameter too)
                elif s.source in listed:
                    listed.add(s.target)
            changed = (len(arrays), len(listed)) != before
        for both in sorted(set(arrays) & listed & self.lists):
            made = arrays[both]
            user = _assigned_name(self.source.statement_text(made.origin)) or both
            raise self.source.error(
                made.origin,
                f"ppto cannot differentiate {user} as a list on one path and an "
                "array on another",
                f"make {user} an array on every path ({user} = np.stack({user}) "
                "where it stays a list), or give the array a name of its own",
            )

    def emit(self, statement: ir.Stmt) -> None:
        statement.origin = self.origin
        if type(statement) is ir.Passive:
            self.mark_image_operators(statement.node)
            statement.dtype = self.constructed_dtype(statement.node)
        self.out.append(statement)

    def constructed_dtype(self, node):
        """The dtype of the array ``t = np.zeros(...)`` makes (see constructors.py),
        else None."""
        if not (isinstance(node, gast.Assign) and isinstance(node.value, gast.Call)):
            return None
        found, function = self.static(node.value.func)
        if not found:
            return None
        return constructed_dtype(node.value, function, self.named_dtype)

    def mark_image_operators(self, node) -> None:
        """Calls of an image operator without a layout in code left as it is (the
        image not differentiated) are given a ``layout=None`` keyword that the
        analysis decides from the image's hint, as for operators it differentiates
        (the operator's own default on raw arrays has no hint to go by: it failed)."""
        for call in trees.walk(node):
            if not isinstance(call, gast.Call) or not call.args:
                continue
            callee = resolve_call(call, self.parsed.namespace, self.local_names)
            op = callee.op if callee.kind == "operator" else None
            if op is None or "layout" not in op.param_names:
                continue
            position = len(op.input_names) + op.param_names.index("layout")
            if len(call.args) > position or any(
                k.arg == "layout" for k in call.keywords
            ):
                continue
            keyword = gast.keyword("layout", gast.Constant(None, None))
            keyword.value.image_of = call.args[0]  # (whose hint decides it)
            keyword.value.image_operator = op.name
            call.keywords.append(keyword)

    def statement(self, node) -> None:
        handler = getattr(self, "statement_" + type(node).__name__, None)
        if handler is None:
            self.emit(ir.Passive(node, reads=frozenset(value_reads(node))))
            return
        handler(node)

    def statement_Assign(self, node) -> None:
        if _is_setitem(node.value):
            self.setitem(node)
            return
        self.refuse_written_in_place(node.value)
        pairs = _separable(node)
        if pairs is not None:  # ``hs, scale = [], 1.0``: one assignment each
            for target, value in pairs:
                single = gast.Assign([target], value, None)
                self.statement_Assign(gast.copy_location(single, node))
            return
        if self.list_statement(node):
            return
        if getattr(node, "in_place_of", None) is not None:
            self.in_place(node, node.in_place_of)
            return
        reads = value_reads(node.value)
        targets = node.targets
        if any(isinstance(t, gast.Subscript) for t in targets):
            chained = any(
                isinstance(t, gast.Subscript) and isinstance(t.value, gast.Subscript)
                for t in targets
            )
            raise self.source.error(
                node,
                "ppto cannot differentiate a subscript assignment here"
                + (": a write into an item of an item" if chained else ""),
                "write it as one subscript of the array (y[0, 1] = v, not y[0][1] = v)"
                if chained
                else "build the value with ppto.setitem",
            )
        names = tuple(
            n.id for t in targets for n in trees.walk(t) if isinstance(n, gast.Name)
        )
        if getattr(node, "synthetic", False) and isinstance(node.value, gast.Name):
            # a renaming copy (ssa.py), varied or not: loops restore the values they
            # carry from these, and a backward pass may read a constant one
            if node.value.id in self.lists:
                self.lists.add(names[0])
            if reads & self.varied:
                self.varied.update(names)
            self.emit(ir.Copy(names[0], node.value.id))
            return
        if not value_reads(node.value, through_comparisons=False) & self.varied:
            # (the statement-level analysis took it for varied where it reads a
            # value made passive since: n = ~m of a mask m = x > s; a name bound
            # elsewhere too, in another branch or a loop, may be varied there)
            self.varied.difference_update(set(names) & self.bound_once)
            rereads = self.reads_object_state(node.value)
            differs = rereads and self.reads_object_state(node.value, may_draw)
            self.emit(
                ir.Passive(
                    node,
                    targets=names,
                    reads=frozenset(reads),
                    rereads=rereads,
                    differs=differs,
                )
            )
            return
        self.varied.update(names)
        first = targets[0]
        if len(targets) > 1 and not all(isinstance(t, gast.Name) for t in targets):
            # ``(a, b) = c = value``: the value once, then each target from it
            held = self.namer.temporary()
            self.varied.add(held)
            self.expression(node.value, held)
            for target in targets:
                if isinstance(target, gast.Name):
                    self.emit(ir.Copy(target.id, held))
                else:
                    self.unpack(target, gast.Name(held, gast.Load(), None, None))
            return
        if isinstance(first, gast.Name):
            result = self.expression(node.value, first.id)
            if result != first.id:
                self.emit(ir.Copy(first.id, result))
        else:
            self.unpack(first, node.value)
        for other in targets[1:]:
            self.emit(ir.Copy(other.id, first.id))

    def in_place(self, node, written: str) -> None:
        """``t_1 = t + v`` from ``t += v`` (ssa.py): the value, then
        ``cast_in_place`` of it to ``written``'s (t's) dtype, as NumPy's in-place
        operators keep it. The analysis removes the cast where the dtypes are known
        to agree (see in_place.py)."""
        target = node.targets[0].id
        # (named apart from the numbered temporaries: those stay numbered in turn
        # where the cast is removed and this name with it)
        value = self.namer.fresh(f"{written}_wide")
        if value_reads(node.value, through_comparisons=False) & self.varied:
            self.varied.add(target)
            value = self.expression(node.value, value)
        else:  # (computed as written; passive, as statement_Assign makes it, and
            # so is its cast: m &= x > s of a mask m, whatever x and s are)
            self.statement_Assign(_assigned(value, self.extension(node.value), node))
            self.varied.difference_update({target} & self.bound_once)
        written_before = gast.Name(written, gast.Load(), None, None)
        self.apply(
            target,
            shape.cast_in_place,
            [value],
            {"target": written_before},
            ("target",),
        )
        self.out[-1].augmented = "cast"

    def extension(self, value):
        """``t + (4,)`` (from ``t += (4,)``) as ``extended(t, (4,))``, which
        extends t where it is a list, as ``+=`` does (``+`` raises there); any
        other value as it is."""
        if not (
            isinstance(value, gast.BinOp)
            and isinstance(value.op, gast.Add)
            and _literal(value.right)
        ):
            return value
        helper = self.reference(lists.extended, "extended")
        call = gast.Call(
            gast.Name(helper, gast.Load(), None, None), [value.left, value.right], []
        )
        return gast.copy_location(call, value)

    def list_statement(self, node) -> bool:
        """Python lists of tensors: ``xs = [...]``, ``x = xs.pop()``, ``x = xs[i]``,
        ``ys = xs``. Returns whether ``node`` was one."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], gast.Name):
            return False
        target, value = node.targets[0].id, node.value
        if _empty_list_call(value):  # ``list()`` is ``[]``
            value = gast.List([], gast.Load())
        if isinstance(value, gast.List):
            self.lists.add(target)
            self.emit(ir.ListNew(target))
            for element in value.elts:
                self.emit(ir.ListAppend(target, self.expression(element)))
            self.note_list_items(
                target,
                tuple(
                    isinstance(element, gast.List) or _names_list(element, self.lists)
                    for element in value.elts
                ),
            )
            return True
        if isinstance(value, gast.Name) and value.id in self.lists:
            self.lists.add(target)
            self.emit(ir.Copy(target, value.id))
            return True
        if _is_list_pop(value, self.lists):
            self.emit(ir.ListPop(target, value.func.value.id))
            return True
        if isinstance(value, gast.BinOp) and isinstance(value.op, gast.Add):
            return self.joined_lists(node, target, value.left, value.right)
        if isinstance(value, gast.BinOp) and isinstance(value.op, gast.Mult):
            return self.repeated_list(node, target, value)
        if isinstance(value, gast.Subscript) and _names_list(value.value, self.lists):
            if self.item_is_list(value) or isinstance(value.slice, gast.Slice):
                self.lists.add(target)  # (a slice of a list is a list: rest = xs[1:])
            self.emit(ir.ListGet(target, value.value.id, slice_expr(value.slice)))
            return True
        kind = self.parts_made(value)
        if kind is not None:
            # ``parts = np.split(x, [1, 4])``: its items may differ in shape, so it
            # is ``list(...)`` of the operator's results (NumPy's list; a tuple's
            # ``tuple(...)``), an adjoint per item (as an array, the adjoints were
            # stacked: a ValueError)
            self.made_list(node, target, value, kind)
            return True
        if self.list_valued(value):
            # ``outs = layers(x, ws)``, a helper of the user's returning a list: an
            # adjoint per item (as an array, the items' adjoints were stacked: a
            # ValueError for items of unlike shapes, [h, np.sum(h)])
            self.made_list(node, target, value, list)
            self.note_list_items(target, _returned_list_items(self.callee_of(value)))
            return True
        helper = self.list_helper(value)
        if helper is not None:
            if getattr(helper[0], "makes_list", True):
                self.lists.add(target)
            self.list_call(node, target, *helper)
            return True
        return False

    def joined_lists(self, node, target: str, left, right) -> bool:
        """``ys = xs + [a] + (b, c)``, ``[a] * 2 + [b]`` (and ``xs += [a]``): a new
        list with the items appended (``ys = list(xs); ys.append(a); ...``), so that
        ``xs`` keeps its items as in Python. A sum without a list or a sequence of
        differentiated values is not this (returns False); other joins are
        refused."""
        parts = _summands(left) + _summands(right)
        if not any(self.sequence(part, joined=True) for part in parts):
            return False
        first, rest = parts[0], parts[1:]
        if not self.listish(first) and self.differentiated_array(first):
            return False  # (``y + (a, b)`` of an array y: NumPy adds elementwise)
        written = [_written_out(part) for part in rest]
        if not self.listish(first) or None in written:
            raise self.source.error(
                node,
                "ppto cannot differentiate joining these lists with +",
                "copy the first list and append the others' items: "
                "items = list(first), then items.append(item) for each",
            )
        # (tuples join into a tuple, as Python's: built as a list, then tuple(...))
        joined = self.namer.temporary() if self.tuple_valued(first) else target
        self.lists.add(joined)
        if _written_out(first) is not None:  # (items appended below mark it varied)
            self.emit(ir.ListNew(joined))
            written.insert(0, _written_out(first))
        else:
            self.made_list(node, joined, self.listed(node, first), list)
        for elements, count in written:
            items = [self.expression(element) for element in elements]
            for item in items * count:
                self.emit(ir.ListAppend(joined, item))
            if any(value_reads(element) & self.varied for element in elements):
                self.varied.add(joined)  # (the first list may hold constants only)
        self.packed.discard(target)
        if joined == target:
            self.tuples.discard(target)
            return True
        self.made_list(node, target, gast.Name(joined, gast.Load(), None, None), tuple)
        self.tuples.add(target)
        return True

    @property
    def joined_tuples(self) -> set:
        if self._joined_tuples is None:
            self._joined_tuples = joined_tuples(self.body)
        return self._joined_tuples

    def tuple_valued(self, node) -> bool:
        """Whether ``node`` is a tuple: written out, or a name bound to one
        (packed, or made by ``tuple(...)`` or by joining tuples)."""
        if isinstance(node, gast.Tuple):
            return True
        return isinstance(node, gast.Name) and node.id in (
            self.packed | self.tuples | self.joined_tuples
        )

    def listish(self, node) -> bool:
        """A list or tuple variable, a list or tuple written out, or a repetition of
        one."""
        if _names_list(node, self.lists | self.packed | self.joined_tuples):
            return True
        if _literal(node):
            return True
        return (
            isinstance(node, gast.BinOp)
            and isinstance(node.op, gast.Mult)
            and (self.listish(node.left) or self.listish(node.right))
            and not self.differentiated_array(node)  # (``y * [a, b]``: NumPy's)
        )

    def sequence(self, node, joined: bool = False) -> bool:
        """Whether ``node`` is a list or tuple whose items are differentiated (a
        list variable, a literal reading differentiated values, or one repeated),
        as opposed to an array or a sequence of constants (``x + [1.0, 2.0]``).
        A tuple variable is one where it is ``joined`` (``t + (v,)``)."""
        if isinstance(node, gast.Name) and node.id in self.packed and joined:
            return True
        if isinstance(node, gast.Name) and node.id in self.packed:
            raise self.source.error(
                node,
                f"ppto cannot differentiate joining or repeating the tuple {node.id}",
                f"make {node.id} a list ([...] instead of (...))",
            )
        if _names_list(node, self.lists):
            return True
        if _literal(node):
            return bool(value_reads(node) & self.varied)
        if isinstance(node, gast.BinOp) and isinstance(node.op, gast.Mult):
            if self.differentiated_array(node):  # (``y * [a, b]``: NumPy's)
                return False
            return self.sequence(node.left) or self.sequence(node.right)
        return False

    def listed(self, node, part) -> gast.Name:
        """A list variable holding ``part`` (a list variable, or a repetition); a
        tuple variable's items in a new list."""
        if _names_list(part, self.lists):
            return part
        if _names_list(part, self.packed | self.joined_tuples):
            return part  # (a tuple: the caller makes the list of it)
        temporary = self.namer.temporary()
        self.repeated_list(node, temporary, part)
        return gast.Name(temporary, gast.Load(), None, None)

    def repeated_list(self, node, target: str, value) -> bool:
        """``ys = [a, b] * 3``, ``(a,) * 3`` or ``xs * 3``: Python's repetition,
        whose adjoint adds each element's copies. The count must be a whole number
        written out: ``[a] * n`` could as well be an elementwise product with an
        array ``n``. A product without a sequence of differentiated values is not
        this (returns False)."""
        if self.differentiated_array(value):
            return False  # (``y * [a, b]`` of an array y: NumPy multiplies)
        listed = [side for side in (value.left, value.right) if self.sequence(side)]
        if not listed:
            return False

        items = listed[0]
        count = value.right if items is value.left else value.left
        if isinstance(count, gast.Constant) and type(count.value) is int:
            if count.value < 1:
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate a list repeated {count.value} times",
                    "leave the empty list out",
                )
        else:
            raise self.source.error(
                node,
                "ppto cannot tell whether this repeats the list or multiplies "
                "elementwise",
                "repeat a list by a whole number written out ([a] * 3), or build "
                "the array with np.stack([...]) first to multiply elementwise",
            )
        if _literal(items):
            source = self.namer.temporary()
            self.lists.add(source)
            self.varied.add(source)  # (it holds differentiated values: see above)
            self.emit(ir.ListNew(source))
            for element in items.elts:
                self.emit(ir.ListAppend(source, self.expression(element)))
            items = gast.Name(source, gast.Load(), None, None)
        elif not _names_list(items, self.lists):
            items = self.listed(node, items)  # ([a] * 2) * 3
        self.lists.add(target)
        helper = self.reference(lists.repeat, "repeat")
        repeated = gast.Call(
            gast.Name(helper, gast.Load(), None, None), [items, count], []
        )
        assign = gast.Assign(
            [gast.Name(target, gast.Store(), None, None)], repeated, None
        )
        self.list_call(
            gast.copy_location(assign, node), target, lists.repeat, ("list", "fixed")
        )
        return True

    def nested_list(self, argument) -> str | None:
        """A list helper's call inside another's (``list(fold_repeats(d, 2))`` in a
        derivative being differentiated again) as a list of its own."""
        if not isinstance(argument, gast.Call) or self.list_helper(argument) is None:
            return None
        temporary = self.namer.temporary()
        statement = _assigned(temporary, argument, argument)
        return temporary if self.list_statement(statement) else None

    def list_helper(self, value):
        """``(function, kinds)`` when a call makes a list: ``list(...)`` or one of the
        list helpers of generated gradients (see ppto/transform/lists.py). None for
        other calls."""
        if not isinstance(value, gast.Call) or value.keywords:
            return None
        function = resolve_call(value, self.parsed.namespace, self.local_names).function
        if function in (list, tuple) and len(value.args) == 1:
            return function, ("value",)  # list(unstack(dY)): linear in its argument
        if getattr(function, "linear_list", None):
            return function, function.linear_list
        return None

    def parts_made(self, value):
        """``tuple`` or ``list`` where ``value`` calls an operator returning parts
        (split, unstack: a tuple, or NumPy's type of them, np.split's list) or a
        user's function returning parts at every return (see ``_returned_parts``),
        else None."""
        if not isinstance(value, gast.Call):
            return None
        callee = self.checkpointed(value) or resolve_call(
            value, self.parsed.namespace, self.local_names
        )
        if (
            not _composite_without_rule(callee)
            and _returns_a_tuple(callee)
            and _single_result(callee.op, value) is None
        ):
            names = " or ".join(getattr(callee.op, "single_result", {}))
            raise self.source.error(
                value,
                f"ppto cannot tell whether {callee.text} returns one array or a "
                f"tuple: its {names} is not written out",
                f"write {names}=True or {names}=False in the call",
            )
        return _parts_called(callee, value)

    def list_valued(self, value) -> bool:
        """Whether ``value`` calls a user's function whose every return is a list
        (written out, or a name only ever bound to one)."""
        function = self.callee_of(value)
        return function is not None and _returns_lists(function)

    def callee_of(self, value):
        """The user's function ``value`` calls, or None."""
        if not isinstance(value, gast.Call):
            return None
        callee = self.checkpointed(value) or resolve_call(
            value, self.parsed.namespace, self.local_names
        )
        if callee.kind != "function" and not _composite_without_rule(callee):
            return None
        return getattr(callee.op, "function", callee.function)

    def note_list_items(self, target: str, items: tuple | None) -> None:
        """Keep which items of ``target``, a list made here, are lists themselves
        (``pairs = [[w1, b1], [w2, b2]]``, or a helper returning one): an item read
        is then a list too, its items an adjoint each (read as an array, the
        adjoints were stacked: a ValueError for a weight and a bias). Only for a
        list bound once and never appended to or popped from."""
        if (
            items
            and any(items)
            and target not in self.receivers
            and target in self.bound_once
        ):
            self.list_items[target] = items

    def item_is_list(self, node) -> bool:
        """Whether ``node`` reads an item of a list that ``list_items`` knows to be
        a list: by a constant position, or any position where every item is."""
        if not _item_of(node, self.list_items):
            return False
        items = self.list_items[node.value.id]
        index = node.slice
        sign = 1
        if isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub):
            index, sign = index.operand, -1  # (parts[-1])
        if isinstance(index, gast.Constant) and type(index.value) is int:
            position = sign * index.value
            return -len(items) <= position < len(items) and items[position]
        return all(items)

    def made_list(self, node, target: str, value, kind) -> None:
        """``target = kind(value)``, ``kind`` list or tuple (a list of ppto's: an
        adjoint per item), at ``node``'s place."""
        callee = gast.Name(kind.__name__, gast.Load(), None, None)
        made = _assigned(target, gast.Call(callee, [value], []), node)
        self.lists.add(target)
        self.list_call(made, target, kind, ("value",))

    def list_call(self, node, target: str, helper, kinds: tuple) -> None:
        from ppto.transform.inline import operand_expr

        call_ = node.value
        inputs, arguments = [], []
        for kind, argument in zip(kinds, call_.args):
            if kind in ir.PASSED:
                if kind == "fixed":  # (metadata: only its type and shape are read)
                    self.check_not_varied(argument, "a list position")
                inputs.append(argument)
                arguments.append(argument)
            else:
                operand = self.nested_list(argument) or self.expression(argument)
                inputs.append(operand)
                arguments.append(operand_expr(operand))
        if any(  # from what the arguments read: an opaque call inside still counts
            kind not in ir.PASSED and value_reads(argument) & self.varied
            for kind, argument in zip(kinds, call_.args)
        ):
            self.varied.add(target)
        else:
            self.varied.discard(target)
        value = gast.Call(call_.func, arguments, [])
        assign = _assigned(target, value, node)
        self.emit(
            ir.ListCall(
                assign,
                targets=(target,),
                reads=frozenset(value_reads(value)),
                function=helper,
                inputs=inputs,
                kinds=kinds,
            )
        )

    def statement_Expr(self, node) -> None:
        value = node.value
        if isinstance(value, gast.Constant):
            return  # a docstring
        if (
            isinstance(value, gast.Call)
            and isinstance(value.func, gast.Attribute)
            and value.func.attr == "append"
            and _names_list(value.func.value, self.lists)
            and len(value.args) == 1
        ):
            self.emit(
                ir.ListAppend(value.func.value.id, self.expression(value.args[0]))
            )
            if value_reads(value.args[0]) & self.varied:
                self.varied.add(value.func.value.id)  # (it may have held constants)
            return
        if (
            isinstance(value, gast.Call)
            and isinstance(value.func, gast.Attribute)
            and value.func.attr in ("append", "extend", "insert", "pop")
            and isinstance(value.func.value, gast.Subscript)
            and value_reads(value) & self.varied
        ):  # ``rows[0].append(h)``: an AttributeError in generated code
            raise self.source.error(
                node,
                "ppto cannot differentiate changing a list held in another list",
                "build the inner list under a name of its own (row = [...]; "
                "row.append(h)), then put it in the outer list",
            )
        if _is_list_pop(value, self.lists):  # a pop whose value is not used
            self.emit(ir.ListPop(self.namer.temporary(), value.func.value.id))
            return
        if (
            isinstance(value, gast.Call)
            and isinstance(value.func, gast.Attribute)
            and _names_list(value.func.value, self.lists)
            and (value_reads(value) & self.varied)
        ):  # ``hs.extend(gs)``, ``hs.insert(0, h)``: not followed, so refused
            raise self.source.error(
                node,
                f"ppto cannot differentiate the list method .{value.func.attr}() on "
                "differentiated values",
                "append the items one by one (for item in items: hs.append(item))",
            )
        if isinstance(value, gast.Call):
            self.refuse_rebinding_read_names(value)
        if isinstance(value, gast.Call) and value_reads(value) & self.varied:
            self.dropped_call(value)
        self.refuse_written_in_place(value)
        self.emit(ir.Passive(node, reads=frozenset(value_reads(node))))

    def refuse_rebinding_read_names(self, node) -> None:
        """``set_g(v)`` of a function of the user's that rebinds a global (``global
        G; G = v``) which this function reads: the generated code reads the value
        G had when it was made (a zero gradient, and the value of the call before),
        so it is refused. (A rebound name this function does not read, a counter,
        changes as in Python.)"""
        from ppto.transform.source import parse_function

        callee = resolve_call(node, self.parsed.namespace, self.local_names)
        parsed = _parsed_function_of(callee)
        if parsed is None:
            return
        caller = parse_function(self.parsed.fn).tree  # (as written: not lifted)
        read = set(_rebound_outer_names(parsed)) & trees.loads(caller.body)
        if read:
            raise self.source.error(
                node,
                f"ppto cannot differentiate the call {callee.text}: it rebinds "
                f"{', '.join(sorted(read))} (global or nonlocal), which this function "
                "reads, and the generated code would read the value from when it "
                "was made",
                "return the value from the function, and assign it",
            )

    def static(self, node) -> tuple:
        """``(True, value)`` where ``node`` names a value outside the function."""
        return static_value(node, self.parsed.namespace, self.local_names)

    def refuse_written_in_place(self, value) -> None:
        resolved = self.static
        self.refuse_object_change(value)
        written = _written_in_place(value, self.varied, resolved)
        if written is not None:
            raise self.source.error(
                written,
                "ppto cannot differentiate a call that writes into an array in place "
                "(out=, np.copyto, ufunc.at, .fill(), .sort(), shuffle, ...): the "
                "derivative would miss the change",
                _new_value_instead(written),
            )

    def refuse_object_change(self, value) -> None:
        """Refuse a call in ``value`` that puts differentiated values into what an
        object or a module-level value holds (``self.acts.append(h)``,
        ``self.buf.update(h=h)``, ``setattr(self, "h", h)``): it runs as written,
        and what is read back from the object has no derivative (a zero
        gradient)."""
        for call in trees.walk(value):
            if not isinstance(call, gast.Call) or not value_reads(call) & self.varied:
                continue
            found, called = self.static(call.func)
            if found and any(called is setter for setter in OBJECT_SETTERS):
                held = gast.unparse(call.args[0]).strip() if call.args else "it"
                raise self.source.error(
                    call,
                    f"ppto cannot differentiate {expression_text(call.func)}() on "
                    f"differentiated values: it keeps them in {held}, and what is "
                    "read back from it has no derivative",
                    "keep the value in a local name and return it; set the "
                    "attribute outside the differentiated function",
                )
            function = call.func
            if found and call.args and _changes_its_first_argument(called):
                # ``operator.setitem(self.buf, "h", h)``, ``dict.update(self.buf,
                # h=h)``: the object changed is the first argument
                receiver, method = call.args[0], expression_text(function)
            elif (
                isinstance(function, gast.Attribute)
                and function.attr in CHANGING_METHODS
            ):
                receiver, method = function.value, f".{function.attr}"
            else:
                continue
            held = self.held_by_an_object(receiver)
            if held is not None:
                raise self.source.error(
                    call,
                    f"ppto cannot differentiate {method}() on {held}, "
                    "which an object or a module-level value holds: it keeps or "
                    "changes differentiated values there, which ppto's generated "
                    "code does not follow, so what is read back from it has no "
                    "derivative",
                    "keep the values in a local list or array (hs = []; "
                    "hs.append(h)) and return them; change the object outside "
                    "the differentiated function",
                )

    def held_by_an_object(self, receiver) -> str | None:
        """The text of ``receiver`` where it is (an item of) what an object holds
        in an attribute (``self.acts``, ``self.buf["h"]``, ``self.__dict__``), a
        module-level value (``STATE``) or ``vars(obj)``; not a module or a class
        (whose method is called unbound: ``np.ndarray.fill(z, 1.0)``); else
        None."""
        node, through_attribute = receiver, False
        if isinstance(receiver, gast.Call) and receiver.args:  # vars(self).update
            found, called = self.static(receiver.func)
            if found and called is builtins.vars:
                return gast.unparse(receiver).strip()
        while isinstance(node, (gast.Attribute, gast.Subscript)):
            if isinstance(node, gast.Attribute) and node.attr not in VIEW_ATTRIBUTES:
                through_attribute = True
            node = node.value
        if not isinstance(node, gast.Name):
            return None
        if not through_attribute and node.id in self.local_names:
            return None  # (a local list or array: its own checks)
        found, value = self.static(receiver)
        if found and isinstance(value, (ModuleType, type)):
            return None
        return gast.unparse(receiver).strip()

    def dropped_call(self, node) -> None:
        """A call of the user's function on differentiated values whose result is
        dropped (``scale_in_place(y)``) runs as it is: refused where the function
        changes an argument in place, which the derivative would miss."""
        from ppto.transform.source import parse_function

        # (a shuffle or NumPy's in-place functions: refused at the user's line,
        # not inside the library's source)
        self.refuse_written_in_place(node)
        callee = resolve_call(node, self.parsed.namespace, self.local_names)
        owner = getattr(node.func, "value", None)
        if (  # ``tracker = TRACKER; tracker.record(h)``: an object ppto cannot see
            callee.kind == "method"
            and isinstance(owner, gast.Name)
            and owner.id not in self.lists | self.varied
        ):
            raise self.source.error(
                node,
                f"ppto cannot differentiate the method call {callee.text} on "
                f"differentiated values: it cannot tell what {owner.id} is, so what "
                "the method keeps or changes would be missed",
                "call the method on the module-level object itself, or use a "
                "function that returns the value",
            )
        if inspect.ismethod(callee.function):  # ``tracker.record(h)``
            try:
                parsed = parse_function(callee.function.__func__)
            except TransformError:
                self.refuse_unread_callee(node, callee)
                return
            caller = parse_function(self.parsed.fn).tree  # (as written: not lifted)
            method = getattr(node.func, "attr", "")
            if isinstance(owner, gast.Name) and owner.id in self.local_names:
                owner = None  # (a local name for the object: others may reach it)
            if _keeps_an_argument(parsed) and _read_besides_calls(
                caller, owner, {method}, 0
            ):
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the method call {callee.text} on "
                    "differentiated values: it keeps an argument (self.last = v), "
                    "and what is read back later has no derivative",
                    "use a module-level function that returns the value, and assign it",
                )
            own = (parsed.parameters[0], callee.function.__self__)  # (its self)
            self.check_call_arguments(node, parsed, offset=1, own=own)
            return
        parsed = _parsed_function_of(callee)
        if parsed is None:
            if callee.kind == "function":
                self.refuse_unread_callee(node, callee)
            self.check_partial_call(node, callee)
            return
        self.check_call_arguments(node, parsed)
        caller = parse_function(self.parsed.fn).tree  # (as written: not lifted)
        for holder, argument in bound_arguments(node, parsed.parameters):
            if holder is None:
                continue
            position = parsed.parameters.index(holder)
            root = argument
            while isinstance(root, (gast.Attribute, gast.Subscript)):
                root = root.value
            if not isinstance(root, gast.Name) or root.id in self.varied:
                continue  # (an array it is given: the in-place checks' business)
            if root is not argument or argument.id in self.local_names:
                # (a local name for the object, or an object reached through
                # another, NS.layer as a method's self: others may reach it)
                argument = None
            names = {getattr(node.func, "id", None), callee.function.__name__}
            if _keeps_an_argument(parsed, holder) and _read_besides_calls(
                caller, argument, names, position, holder
            ):
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the call {callee.text} on "
                    f"differentiated values: it keeps an argument in {holder} "
                    f"({holder}.last = v), and what is read back later has no "
                    "derivative",
                    "return the value from the function, and assign it",
                )

    def check_calls_inside(self, node) -> None:
        """Refuse the user's functions called inside a statement that needs no
        derivative (``n = len(shrunk(x))``, a condition) where they change an
        argument in place: they run as written, and the derivative would miss
        the change NumPy makes to the caller's value."""
        from ppto.transform.source import parse_function

        for call in trees.walk(node):
            if not isinstance(call, gast.Call):
                continue
            try:
                callee = resolve_call(call, self.parsed.namespace, self.local_names)
            except PptoError:
                continue
            if callee.kind == "opaque":
                self.check_partial_call(call, callee)
                continue
            if callee.kind != "function" or inspect.ismethod(callee.function):
                continue
            try:
                parsed = parse_function(callee.function)
            except PptoError:
                if any(value_reads(a) & (self.varied | self.lists) for a in call.args):
                    self.refuse_unread_callee(call, callee)
                continue
            self.check_call_arguments(call, parsed)

    def refuse_unread_callee(self, node, callee) -> None:
        """A user's function whose source ppto cannot read (made by ``exec``, or
        compiled), called on differentiated values or lists with its result
        unused: it runs as written, and what it changes in them (``ls[0] = x *
        3``) the derivative would miss; ppto cannot look, so it refuses. (A
        stand-in ppto made for a function given dicts is read through it.)"""
        from ppto.transform.source import STOOD_FOR

        if _hashable_in(callee.function, STOOD_FOR):
            return
        raise self.source.error(
            node,
            f"ppto cannot read the source of {callee.text}, called here on "
            "differentiated values with its result unused: it runs as written, "
            "and a change it makes to its arguments would be missed by the "
            "derivative",
            "define it in a file ppto can read (or with exec and linecache), or "
            "have it return the new value and assign that",
        )

    def check_partial_call(self, node, callee) -> None:
        """Refuse, as ``check_call_arguments`` does, the call of a
        ``functools.partial`` of the user's function (its result unused: run as
        written) that changes an argument it is given in place: NumPy changes
        the caller's value, which the derivative would miss (``fill =
        partial(fill_first, k=3); fill(ls, x)``)."""
        import functools

        from ppto.transform.source import parse_function

        made = callee.function
        if not isinstance(made, functools.partial):
            return
        if not inspect.isfunction(made.func) or is_library(made.func):
            return
        try:
            parsed = parse_function(made.func)
        except PptoError:
            return  # (its source cannot be read: it cannot be checked either)
        self.check_call_arguments(node, parsed, offset=len(made.args))

    @staticmethod
    def check_call_arguments(
        node, parsed, lists_only: bool = False, offset: int = 0, own=None
    ) -> None:
        """Refuse the call if ``parsed`` changes an argument it is passed in place
        (``offset``: its parameters bound already, a method's self; ``own``:
        ``(self's name, the object)`` of a method, whose attributes are known)."""
        from ppto.transform import aliases

        bound = bound_arguments(node, parsed.parameters[offset:])
        passed = [parameter for parameter, _ in bound if parameter is not None]
        aliases.check(parsed, None, passed, lists_only=lists_only, own=own)

    def setitem(self, node) -> None:
        """``x_1 = setitem(x, v, index)`` from a subscript write (see ssa)."""
        base, value, index = node.value.args
        target = node.targets[0].id
        listed = _names_list(base, self.lists | self.numbers)
        if listed and not isinstance(index, gast.Slice):
            self.replace_item(node, base, value, index)
            return
        if getattr(node, "deletes", False):  # (del x[a:b] taken for x[a:b] = [])
            raise self.source.error(
                node,
                "ppto cannot differentiate del of a slice of an array, or of a "
                "value not known to be a list (NumPy deletes no elements in place)",
                "build a new array without them (x = np.concatenate([x[:a], x[b:]]))",
            )
        if value_reads(node.value) & self.varied:
            self.varied.add(target)
        if getattr(node, "in_place_of", None) is not None:
            inputs = [self.expression(base), self.written_in_place(base, value)]
        else:
            inputs = [self.expression(base), self.expression(value)]
        self.apply(target, indexing.setitem, inputs, {"index": index}, ("index",))

    def replace_item(self, node, base, value, index) -> None:
        """``xs_1 = replace_at(xs, index, v)`` from ``xs[index] = v`` on a list: a
        list still, an adjoint per item (as an array's write, its adjoint was
        shaped like the items stacked: a ValueError for an array and a number)."""
        from ppto.transform.inline import operand_expr

        target = node.targets[0].id
        if getattr(node, "in_place_of", None) is not None:  # (xs[i] += v)
            cast = self.written_in_place(base, value)
            if isinstance(cast, str) and value_reads(value) & self.varied:
                self.varied.add(cast)  # (so that the list's item is differentiated)
            value = operand_expr(cast)
        helper = self.reference(lists.replace_at, "replace_at")
        arguments = [base, index, value]
        if not (trees.written_position(index) or trees.called(index, "slice")):
            # (hs[i] = h: the gradient takes i for an item's position, or a slice
            # that keeps the length; see lists.replace_at)
            arguments.append(gast.Constant(True, None))
        replaced = gast.Call(gast.Name(helper, gast.Load(), None, None), arguments, [])
        self.lists.add(target)
        self.list_call(
            _assigned(target, replaced, node),
            target,
            lists.replace_at,
            lists.replace_at.linear_list,
        )

    def written_in_place(self, base, value):
        """The operand ``x[i] += v`` writes: ``cast_in_place(x[i] + v,
        target=x[i])``, which checks what NumPy checks writing into the part x[i]
        (the subscript write converts the value to x's dtype): the analysis removes
        it where the dtypes tell (see in_place.py)."""
        part = self.expression(value.left)
        if isinstance(part, str):
            if value_reads(value.left) & self.varied:
                self.varied.add(part)  # (so that the sum is differentiated)
            left = gast.Name(part, gast.Load(), None, None)
        else:
            left = part.expr
        summed = gast.copy_location(gast.BinOp(left, value.op, value.right), value)
        wide = self.expression(summed, self.namer.fresh("part_wide"))
        cast = self.apply(
            None, shape.cast_in_place, [wide], {"target": clone(left)}, ("target",)
        )
        # (an array's write converts the value to its dtype: the cast only checks;
        # a list's or dict's holds the value itself, the item's array converted)
        self.out[-1].augmented = "cast" if _names_list(base, self.lists) else "check"
        return cast

    def unpack(self, target, value) -> None:
        if not all(isinstance(element, gast.Name) for element in target.elts):
            raise self.source.error(
                target,
                "ppto cannot differentiate nested unpacking",
                "unpack in two steps: first the outer tuple, then the inner one",
            )
        names = [element.id for element in target.elts]
        if isinstance(value, (gast.Tuple, gast.List)) and len(value.elts) == len(names):
            for name, element in zip(names, value.elts):
                result = self.expression(element, name)
                if result != name:
                    self.emit(ir.Copy(name, result))
            return
        if isinstance(value, gast.Call) and len(names) > 1:
            callee = resolve_call(value, self.parsed.namespace, self.local_names)
            if callee.kind == "function" or _composite_without_rule(callee):
                self.call_function(value, callee, names)
                return
        source = self.expression(value)
        self.emit(ir.Unpack(names, source))

    def statement_For(self, node) -> None:
        body = self.block(node.body)
        checkpoint = getattr(node, "checkpoint", False)
        self.emit(ir.For(node.target.id, node.iter.id, body, checkpoint))

    def statement_While(self, node) -> None:
        body = self.block(node.body)
        reads = frozenset(value_reads(node.test))
        self.emit(ir.While(node.test, reads, body))

    def statement_If(self, node) -> None:
        if len(node.body) == 1 and isinstance(node.body[0], gast.Break):
            self.emit(ir.BreakIf(node.test.id))
            return
        test = node.test
        if isinstance(test, gast.Name):
            name = test.id
        else:
            name = self.namer.fresh("cond")
            assign = gast.Assign(
                [gast.Name(name, gast.Store(), None, None)], test, None
            )
            self.emit(
                ir.Passive(
                    gast.copy_location(assign, node),
                    targets=(name,),
                    reads=frozenset(value_reads(test)),
                )
            )
        body, orelse = self.block(node.body), self.block(node.orelse)
        self.emit(ir.If(name, body, orelse))

    def statement_Return(self, node) -> None:
        value = node.value if node.value is not None else gast.Constant(None, None)
        self.emit(
            ir.Return(
                self.expression(value)
                if value_reads(value) & self.varied
                else ir.Verbatim(value, frozenset(value_reads(value)))
            )
        )

    def statement_Pass(self, node) -> None:
        pass

    # --- expressions -----------------------------------------------------------------

    def expression(self, node, target: str | None = None):
        """An operand for ``node``; operations write into ``target`` if given."""
        reads = value_reads(node)
        if not reads & self.varied:
            if isinstance(node, gast.Constant):
                return ir.Const(node.value)
            if not isinstance(node, gast.Name) and loads(node) & self.lists:
                # ``len(hs)`` of a list that grows: its value now, as a name the
                # backward pass reads (saved per turn in a loop), not re-evaluated
                return self.passive(node, target)
            if self.reads_object_state(node):
                # read once, where the user's code reads it, as a name the backward
                # pass takes (saved by vjp's forward): evaluated again there, an
                # attribute rebound after the forward pass (model.W = ...) or a
                # random draw would give the backward another value than the forward
                return self.read_once(node, target)
            return ir.Verbatim(node, frozenset(reads))
        if isinstance(node, gast.Name):
            return node.id
        handler = getattr(self, "expression_" + type(node).__name__, None)
        if handler is None:
            return self.passive(node, target)
        return handler(node, target)

    def read_once(self, node, target: str | None = None) -> str:
        """``node``'s value bound to a name where the code reads it: ``W = self.W``
        (an attribute is named after itself)."""
        if target is None and isinstance(node, gast.Attribute):
            target = self.namer.fresh(node.attr)
        return self.passive(node, target)

    def reads_object_state(self, node, differs=None) -> bool:
        """Whether evaluating ``node`` again may give another value: it reads an
        object's attribute (``self.W``, ``config.scale``: an array's shape and dtype
        aside), draws random numbers (``rng.normal(...)``, ``np.random.rand(2)``)
        or calls a function of the user's (``counter.next()``, made a function;
        with ``differs``, only one for which ``differs(function)`` holds).
        A module's names (``np.pi``, ``np.float64``) stay as written."""
        for child in gast.walk(node):
            if isinstance(child, gast.Call) and isinstance(child.func, gast.Name):
                function = self.parsed.namespace.get(child.func.id)
                if (
                    child.func.id not in self.local_names
                    and inspect.isfunction(function)
                    and not is_library(function)
                    and (differs is None or differs(function))
                ):
                    return True  # a function of the user's (a method, made one)
            if not isinstance(child, gast.Attribute):
                continue
            if child.attr in METADATA_ATTRIBUTES or child.attr == "__self__":
                continue  # (a bound method's object is the one it was bound to)
            path, root = [child.attr], child.value
            while isinstance(root, gast.Attribute):
                path.append(root.attr)
                root = root.value
            module = (
                isinstance(root, gast.Name)
                and root.id not in self.local_names
                and isinstance(self.parsed.namespace.get(root.id), ModuleType)
            )
            if not module or "random" in path:
                return True
        return False

    def passive(self, node, target: str | None, opaque: bool = False):
        """A value that is not differentiated although it reads differentiated ones."""
        name = target or self.namer.temporary()
        assign = _assigned(name, node, node if hasattr(node, "lineno") else self.origin)
        self.varied.discard(name)  # its value carries no derivative
        self.emit(
            ir.Passive(
                assign,
                targets=(name,),
                reads=frozenset(value_reads(node)),
                opaque=opaque,
                rereads=self.reads_object_state(node),
                differs=self.reads_object_state(node, may_draw),
            )
        )
        return name

    def apply(
        self,
        target,
        op,
        inputs,
        params=None,
        given=(),
        style="call",
        syntax=None,
        at=None,
    ):
        target = target or self.namer.temporary()
        params = dict(params or {})
        for name in getattr(op, "param_names", ()):
            if name not in params:
                if name not in getattr(op, "defaults", {}):
                    raise self.source.error(
                        at or self.origin,
                        f"ppto.{op.name} needs the argument {name!r}",
                        f"pass {name}=...",
                    )
                params[name] = constant_expr(op.defaults[name])
        statement = ir.Apply(target, op, inputs, params, tuple(given), style, syntax)
        if "dtype" in params:  # (x.astype(int) carries no derivative: see analyze)
            statement.result_dtype = self.named_dtype(params["dtype"])
        whole = (
            statement.result_dtype is not None and statement.result_dtype.kind in "biu"
        )
        if whole or not getattr(op, "differentiable", True):
            # (argsort, argmax, floor, x.astype(int): no derivative passes, so such a
            # value may index a differentiated array, as x > 0 may mask one)
            self.varied.discard(target)
        self.emit(statement)
        return target

    def named_dtype(self, node):
        """The NumPy dtype a ``dtype=`` argument names where it is a literal or a
        name outside the function (``int``, ``np.float32``, ``"int32"``), else
        None."""
        if isinstance(node, gast.Constant):
            value = node.value
        else:
            found, value = static_value(node, self.parsed.namespace, self.local_names)
            if not found and isinstance(node, gast.Name):
                if node.id in self.local_names:
                    return None
                value = getattr(builtins, node.id, None)
                found = value is not None
            if not found:
                return None
        if value is None:
            return None
        try:
            return np.dtype(value)
        except TypeError:
            return None

    def expression_BinOp(self, node, target):
        if isinstance(node.op, (gast.Add, gast.Mult)) and any(
            self.sequence(part) for part in _summands(node) + [node.left, node.right]
        ):  # a list made inside an expression: np.stack(xs + [a]), [a] * 3
            target = target or self.namer.temporary()
            statement = gast.Assign(
                [gast.Name(target, gast.Store(), None, None)], node, None
            )
            gast.copy_location(statement, node)
            if self.list_statement(statement):
                return target
        op = BINARY_OPERATORS.get(type(node.op))
        if isinstance(node.op, BITWISE):  # (masks combined: no derivative)
            return self.passive(node, target)
        if op is None:
            raise self.source.error(
                node,
                f"ppto cannot differentiate the {_symbol(node.op)} operator",
                "bitwise operators have no derivative: build masks with comparisons "
                "and combine them with ppto.where",
            )
        inputs = [self.expression(node.left), self.expression(node.right)]
        return self.apply(target, op, inputs, style="binop", syntax=node.op)

    def expression_UnaryOp(self, node, target):
        if isinstance(node.op, gast.USub):
            return self.apply(
                target,
                elementwise.neg,
                [self.expression(node.operand)],
                style="unary",
                syntax=node.op,
            )
        if isinstance(node.op, gast.UAdd):
            return self.expression(node.operand, target)
        return self.passive(node, target)

    def expression_Compare(self, node, target):
        return self.passive(node, target)

    def expression_BoolOp(self, node, target):
        return self.passive(node, target)

    def saved_index(self, index):
        """``index``, with each part that reads a list (``hs[len(hs) - 5]``,
        ``m[len(hs), 0]``) or an object's attribute (``x[cfg.rows]``) computed now
        into a name the backward pass reads: the list or object may change before
        then."""
        if isinstance(index, gast.Tuple):
            parts = [self.saved_index(part) for part in index.elts]
            if all(new is old for new, old in zip(parts, index.elts)):
                return index
            return gast.Tuple(parts, gast.Load())
        if _is_slice_call(index):  # (each bound: a slice stays one to the analysis)
            parts = [self.saved_index(part) for part in index.args]
            if all(new is old for new, old in zip(parts, index.args)):
                return index
            return gast.Call(index.func, parts, [])
        if self.reads_object_state(index):
            return gast.Name(self.read_once(index), gast.Load(), None, None)
        if isinstance(index, gast.Slice) or not loads(index) & self.lists:
            return index
        return gast.Name(self.passive(index, None), gast.Load(), None, None)

    def tuple_item(self, value, index):
        """The operand of item ``index`` of a tuple written out and bound once
        (``pair = (x * 2.0, 3.0)``, ``pair[0]``), or None."""
        items = self.tuple_items.get(getattr(value, "id", None))
        negative = isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub)
        number = index.operand if negative else index
        if (
            items is None
            or not isinstance(number, gast.Constant)
            or type(number.value) is not int
        ):
            return None
        position = -number.value if negative else number.value
        return items[position] if -len(items) <= position < len(items) else None

    def expression_Tuple(self, node, target):
        items = [self.expression(element) for element in node.elts]
        if target in self.bound_once:
            self.tuple_items[target] = items
        target = target or self.namer.temporary()
        self.packed.add(target)
        self.emit(ir.Pack(target, items))
        return target

    def expression_List(self, node, target):
        # a list written out inside an expression (``return h, [a, b]``) stays a list:
        # packed as a tuple, the caller got a tuple back where the code made a list
        target = target or self.namer.temporary()
        self.lists.add(target)
        self.emit(ir.ListNew(target))
        for element in node.elts:
            self.emit(ir.ListAppend(target, self.expression(element)))
        return target

    def expression_Attribute(self, node, target):
        op = ATTRIBUTE_OPERATORS.get(node.attr)
        if op is None:
            fields = self.result_fields(node.value)
            if node.attr in fields:  # np.linalg.eigh(A).eigenvalues: its item 0
                return self.result_part(
                    node.value, len(fields), fields.index(node.attr)
                )
            named = linalg.RESULT_FIELDS.get(node.attr)
            raise self.source.error(
                node,
                f"ppto cannot differentiate the attribute .{node.attr}",
                "use a ppto operator"
                if named is None
                else f"unpack the result where it is made, {named}, or read "
                f".{node.attr} from the call itself",
            )
        return self.apply(
            target,
            op,
            [self.expression(node.value)],
            style="attribute",
            syntax=node.attr,
        )

    def result_fields(self, value) -> tuple:
        """The fields of the tuple the operator call ``value`` returns
        (``np.linalg.slogdet(A)``: sign, logabsdet), or none."""
        if not isinstance(value, gast.Call):
            return ()
        callee = resolve_call(value, self.parsed.namespace, self.local_names)
        return getattr(callee.op, "result_fields", ()) if callee.op else ()

    def result_count(self, value) -> int | None:
        """How many parts the tuple the operator call ``value`` returns has, where
        that is fixed (np.linalg.lstsq's 4; not np.split's)."""
        if not isinstance(value, gast.Call) or self.parts_made(value) is None:
            return None
        callee = resolve_call(value, self.parsed.namespace, self.local_names)
        fields = getattr(callee.op, "result_fields", ())
        return len(fields) if fields else getattr(callee.op, "result_count", None)

    def result_part(self, value, count: int, position: int) -> str:
        """Part ``position`` of the tuple the call ``value`` returns, the call
        unpacked as ``w, V = np.linalg.eigh(A)`` is: the parts' adjoints stay
        apart (an index of the tuple stacked them, and parts can differ in shape)."""
        source = self.expression(value)
        parts = [self.namer.temporary() for _ in range(count)]
        self.emit(ir.Unpack(parts, source))
        return parts[position]

    def expression_Subscript(self, node, target):
        index = slice_expr(node.slice)
        written = index
        index = self.saved_index(index)
        syntax = node.slice if index is written else index  # (as saved: m[t3, 0])
        self.refuse_values_in_an_index(node, index)
        self.check_index(index)
        if _names_list(node.value, self.lists):
            target = target or self.namer.temporary()
            if isinstance(node.slice, gast.Slice):  # (np.stack(xs[1:]): a list)
                self.lists.add(target)
            self.emit(ir.ListGet(target, node.value.id, index))
            return target
        if self.item_is_list(node.value):  # pairs[0][1]: pairs[0] a list
            inner = self.expression(node.value)
            self.lists.add(inner)
            target = target or self.namer.temporary()
            self.emit(ir.ListGet(target, inner, index))
            return target
        item = self.tuple_item(node.value, index)
        if item is not None:
            target = target or self.namer.temporary()
            self.emit(ir.Copy(target, item))
            return target
        count = self.result_count(node.value)
        if (
            count is not None
            and isinstance(index, gast.Constant)
            and type(index.value) is int
            and 0 <= index.value < count
        ):  # np.linalg.lstsq(a, b)[0]: a part of an operator's tuple
            return self.result_part(node.value, count, index.value)
        if self.parts_made(node.value) is not None:
            # ``np.array_split(x, 5)[1]``: its parts may differ in shape, so the
            # call is named as a tuple first, as ``parts = np.split(...)`` is (as an
            # array, the parts' adjoints were stacked: a ValueError)
            parts = self.namer.fresh("parts")
            self.list_statement(_assigned(parts, node.value, node))
            target = target or self.namer.temporary()
            if isinstance(node.slice, gast.Slice):  # (np.split(x, 3)[1:]: a tuple)
                self.lists.add(target)
            self.emit(ir.ListGet(target, parts, index))
            return target
        return self.apply(
            target,
            indexing.getitem,
            [self.expression(node.value)],
            {"index": index},
            style="subscript",
            syntax=syntax,
        )

    def refuse_values_in_an_index(self, node, index) -> None:
        """An object outside the function that is no array, whose subscript reads
        differentiated values (``np.r_[x[:2], y]``, ``np.c_[...]``: arrays built
        from the index): ppto indexes arrays, where an index gets no gradient, so
        the values would get none (a zero gradient, silently)."""
        if self.generated or not (
            value_reads(index, through_comparisons=False) & self.varied
        ):
            return
        found, base = self.static(node.value)
        if not found or isinstance(base, (list, tuple, dict, str)):
            return
        if hasattr(base, "__array__"):  # (NumPy's, CuPy's arrays, tensors)
            return
        if isinstance(base, ModuleType) or not hasattr(type(base), "__getitem__"):
            return
        text = expression_text(node.value)
        raise self.source.error(
            node,
            f"ppto cannot differentiate {text}[...]: {text} is not an array, and "
            "its subscript reads differentiated values, which ppto would give no "
            "gradient (an index has none)",
            "build the array with ppto's operators instead: np.concatenate for "
            "np.r_, np.column_stack for np.c_",
        )

    def expression_Call(self, node, target):
        checkpointed = self.checkpointed(node)
        if checkpointed is not None and (
            checkpointed.kind == "function" or _composite_without_rule(checkpointed)
        ):
            return self.call_function(node, checkpointed, [target], checkpoint=True)[0]
        if checkpointed is not None and checkpointed.kind != "operator":
            raise self.source.error(
                node,
                f"ppto cannot checkpoint {checkpointed.text}: ppto.checkpoint "
                "runs again a function of yours (a def), an object's method or a "
                f"layer object, and {checkpointed.text} is none of these",
                "checkpoint a function of yours calling it "
                "(def step(h): return ...; ppto.checkpoint(step)(h))",
            )
        # (an operator checkpointed, ppto.checkpoint(np.tanh)(x): its rule keeps
        # only what its gradient reads, so it is called as it is)
        callee = checkpointed or resolve_call(
            node, self.parsed.namespace, self.local_names
        )
        if callee.kind == "method":
            return self.method_call(node, callee.method, target)
        if callee.kind == "function" or _composite_without_rule(callee):
            return self.call_function(node, callee, [target])[0]
        if (
            callee.function is builtins.max or callee.function is builtins.min
        ) and _extreme_items(node):  # (with key= or default=: opaque, as before)
            return self.builtin_extreme(node, callee, target)
        if callee.kind == "operator":
            if callee.op.flags:
                self.check_flag_written_out(node, callee)
            if callee.numpy:
                self.numpy_positionals(node, callee.op, len(node.args), callee.text)
            if callee.leading:
                node = self.leading_parameters(node, callee)
            if callee.op.positional:
                node = self.numpy_positional_names(node, callee)
            if callee.variadic:
                node = self.variadic_arrays(node, callee)
            if callee.rest:
                node = self.rest_as_tuple(node, callee)
            if callee.defaults:
                node = self.numpy_defaults(node, callee)
            if callee.numpy and _reduction_options(node, callee.op):
                return self.reduction_with_options(
                    node, callee.op, callee.renames, callee.text, target
                )
            result = self.operator_call(node, callee.op, callee.renames, target)
            if callee.rank_check is not None:
                self.out[-1].rank_check = (callee.rank_check, node)
            return result
        if callee.function is not None and (
            _is_constant_constructor(callee.function)
            or getattr(callee.function, "reads_metadata_only", False)
            # whole numbers, with no derivative to lose: a while loop's reverse in
            # a gradient differentiated again, range(iterations) of a count read
            # from its saved values, which count as differentiated there
            or callee.function is range
            or _hashable_in(callee.function, WHOLE_NUMBER_FUNCTIONS)
        ):
            return self.passive(node, target)
        # Not differentiable; an error only if the result depends on it (analysis).
        name = self.passive(node, target, opaque=callee.text)
        self.out[-1].calls_local = (
            isinstance(node.func, gast.Name)
            and node.func.id in self.local_names
            and node.func.id in _bound_to_calls(self.parsed.tree)
        )
        return name

    def reduction_with_options(self, node, op, renames, text, target):
        """NumPy's reduction with ``where=``, ``initial=`` and ``dtype=``
        (``np.sum(x, where=m, initial=v)``) as ppto's operators: x converted to
        ``dtype`` (in which NumPy reduces), its entries left out replaced by the
        reduction's identity (max's and min's by ``initial``, which NumPy asks for
        with ``where``), reduced, then joined with ``initial``; the mean, the sum
        of the entries kept over their count."""
        options = {k.arg: k.value for k in node.keywords if k.arg in _OPTIONS}
        mask, initial = options.get("where"), options.get("initial")
        identity, join = _REDUCTION_OPTIONS[op]
        if mask is not None and identity is None and initial is None:
            raise self.source.error(
                node,
                f"{text} with where= and no initial=: the entries left "
                "out need a value to lose to (NumPy asks for it too, where a "
                "reduction is empty)",
                "pass initial=... (-np.inf for a maximum, np.inf for a minimum)",
            )
        keywords = [k for k in node.keywords if k.arg not in _OPTIONS]
        given = self.expression(node.args[0])
        if isinstance(given, str) and value_reads(node.args[0]) & self.varied:
            self.varied.add(given)  # (read below through its name alone)
        x = given
        if options.get("dtype") is not None:
            dtype_node = options["dtype"]
            converted = self.apply(
                None, shape.cast, [x], {"dtype": dtype_node}, ("dtype",), at=node
            )
            dtype = self.named_dtype(dtype_node)
            whole = dtype is not None and dtype.kind in "biu"
            if x in self.varied and not whole:
                self.varied.add(converted)
            given = x = converted
        if mask is not None:
            fill_node = constant_expr(identity) if identity is not None else initial
            fill = self.expression(fill_node)
            condition = self.expression(mask)
            x = self.apply(None, elementwise.where, [condition, x, fill], at=node)
            if (value_reads(node.args[0]) | value_reads(fill_node)) & self.varied:
                self.varied.add(x)
        reduced_node = gast.Call(node.func, [_name(x)] + node.args[1:], keywords)
        reduced_node = gast.copy_location(reduced_node, node)
        last = target if initial is None and op is not reductions.reduce_mean else None
        if op is reductions.reduce_mean and mask is not None:
            total = self.operator_call(
                reduced_node, reductions.reduce_sum, renames, None
            )
            ones = self.apply(None, shape.ones_like, [given], at=node)
            kept = self.apply(
                None,
                elementwise.where,
                [condition, ones, ir.Verbatim(constant_expr(0.0))],
                at=node,
            )
            counted = gast.Call(node.func, [_name(kept)] + node.args[1:], keywords)
            count = self.operator_call(
                gast.copy_location(counted, node),
                reductions.reduce_sum,
                renames,
                None,
            )
            return self.apply(target, elementwise.div, [total, count], at=node)
        result = self.operator_call(reduced_node, op, renames, last)
        if initial is None:
            return result
        return self.apply(target, join, [result, self.expression(initial)], at=node)

    def builtin_extreme(self, node, callee, target):
        """Python's ``max(a, b, ...)`` (``min``) of numbers as a chain of
        ``larger`` (``smaller``): ``larger(larger(a, b), c)``, the first of equal
        ones kept as Python keeps it. ``max(items)`` of a list is a loop by now
        (comprehensions.py); of a list written out, a chain of its items."""
        op = numbers.larger if callee.function is builtins.max else numbers.smaller
        items = _extreme_items(node)
        best = self.expression(items[0])
        for position, item in enumerate(items[1:], start=2):
            last = target if position == len(items) else None
            best = self.apply(last, op, [best, self.expression(item)], at=node)
        if len(items) == 1 and target is not None:
            self.emit(ir.Copy(target, best))
            return target
        return best

    def numpy_defaults(self, node, callee):
        """The call with NumPy's defaults that are not the operator's written out
        where it leaves them out (``np.maximum.reduce(x)`` reduces axis 0); a new
        node: the user's tree is left as it is."""
        op, named = callee.op, {k.arg for k in node.keywords}
        added = [
            gast.keyword(name, constant_expr(value))
            for name, value in callee.defaults.items()
            if name not in named
            and len(node.args) <= len(op.input_names) + op.param_names.index(name)
        ]
        call = gast.Call(node.func, node.args, node.keywords + added)
        return gast.copy_location(call, node)

    def leading_parameters(self, node, callee):
        """A call written NumPy's way with parameters before the arrays
        (``np.einsum("ij,jk->ik", a, b)``) as the operator takes them (the arrays,
        then ``subscripts=...``); a new node: the user's tree is left as it is."""
        if interleaved_call(node):  # (np.einsum(a, [0, 1], b, [1, 2], [0, 2]))
            node = self.interleaved_as_subscripts(node, callee)
        count, arity = len(callee.leading), len(callee.op.input_names)
        arrays = node.args[count:]
        if len(arrays) != arity or any(isinstance(a, gast.Starred) for a in arrays):
            raise self.source.error(
                node,
                f"{callee.text} with {len(arrays)} array(s) written out: ppto."
                f"{callee.op.name} takes {arity}",
                "compute it in steps of two arrays (or with @, * and np.sum)",
            )
        leading = node.args[:count]
        written = isinstance(leading[0], gast.Constant) and isinstance(
            leading[0].value, str
        )
        if callee.op is linalg.einsum and written:
            leading, arrays = self.diagonals_first(node, leading[0], arrays)
        keywords = [
            gast.keyword(name, argument)
            for name, argument in zip(callee.leading, leading)
        ]
        call = gast.Call(node.func, arrays, keywords + node.keywords)
        return gast.copy_location(call, node)

    def interleaved_as_subscripts(self, node, callee):
        """np.einsum's interleaved form (each operand followed by its axes as
        whole numbers, the result's last) in its subscript form:
        ``np.einsum(a, [0, 1], b, [1, 2], [0, 2])`` as ``np.einsum('ab,bc->ac', a,
        b)``; a new node."""
        operands, sublists, output = split_interleaved(node.args)
        try:
            written = [self.sublist_written(sublist) for sublist in sublists]
            result = None if output is None else self.sublist_written(output)
            subscripts = interleaved_subscripts(written, result)
        except PptoError as error:
            raise self.source.error(
                node,
                f"{callee.text}'s interleaved form: {error}",
                "write each operand's axes out as a list of whole numbers, or "
                "give the subscripts as a string ('ij,jk->ik')",
            ) from None
        arguments = [gast.Constant(subscripts, None), *operands]
        return gast.copy_location(gast.Call(node.func, arguments, node.keywords), node)

    @staticmethod
    def sublist_written(node) -> list:
        """The whole numbers (and ``...`` or Ellipsis) of a list or tuple written
        out."""
        items = node.elts if isinstance(node, (gast.List, gast.Tuple)) else [None]
        values = [
            Ellipsis
            if isinstance(item, gast.Name) and item.id == "Ellipsis"
            else getattr(item, "value", None)
            if isinstance(item, gast.Constant)
            else None
            for item in items
        ]
        if None in values:
            raise PptoError(
                f"its axes {gast.unparse(node).strip()} are not a list of numbers "
                "written out"
            )
        return values

    def diagonals_first(self, node, subscripts, arrays) -> tuple[list, list]:
        """np.einsum of two arrays where one repeats an index (``'ii,i->i'``) as
        the einsum of their diagonals, each taken first by np.einsum of one array
        (``np.einsum('i,i->i', np.einsum('ii->i', M), v)``); else as written."""
        plan = diagonals_first(subscripts.value)
        if plan is None:
            return [subscripts], arrays
        product, firsts = plan
        arrays = [
            array
            if first is None
            else gast.copy_location(
                gast.Call(clone(node.func), [gast.Constant(first, None), array], []),
                node,
            )
            for first, array in zip(firsts, arrays)
        ]
        return [gast.copy_location(gast.Constant(product, None), subscripts)], arrays

    def check_flag_written_out(self, node, callee) -> None:
        """A flag that makes the call another operator (see
        ``OperatorDef.flags``) must be known when the code is made."""
        for flag in callee.op.flags:
            given = flag_argument(node, callee.op, flag)
            if given is not None and not isinstance(given, gast.Constant):
                raise self.source.error(
                    given,
                    f"{callee.text}'s {flag}= decides what the call returns (a "
                    "pair when True), so it must be written out",
                    f"write {flag}=True or {flag}=False (an if/else for each)",
                )

    def numpy_positional_names(self, node, callee):
        """A call written with NumPy's positional order where it is not the
        operator's (``np.average(x, 1, w)``) with the arguments after the first
        passed by NumPy's names; a new node: the user's tree is left as it is."""
        names = callee.op.positional
        call = passed_by_name(node, names)
        if call is None:
            raise self.source.error(
                node,
                f"{callee.text} takes at most {len(names)} positional arguments "
                f"({', '.join(names)}), written out",
                "pass the others by name",
            )
        return call

    def variadic_arrays(self, node, callee):
        """A call giving its arrays one by one (``np.meshgrid(x, y)``) as the
        operator takes them, one list (``meshgrid([x, y])``); a new node."""
        if any(isinstance(a, gast.Starred) for a in node.args):
            raise self.source.error(
                node,
                f"{callee.text} with its arrays unpacked from a sequence",
                "write the arrays out one by one",
            )
        arrays = gast.List(list(node.args), gast.Load())
        call = gast.Call(node.func, [arrays], node.keywords)
        return gast.copy_location(call, node)

    def rest_as_tuple(self, node, callee):
        """A call giving by position, after its arrays, what the operator takes
        as one tuple (``np.gradient(f, hy, hx)``: ``spacing=(hy, hx)``); a new
        node."""
        arity = len(callee.op.input_names)
        rest = node.args[arity:]
        if any(isinstance(a, gast.Starred) for a in node.args):
            raise self.source.error(
                node,
                f"{callee.text} with its arguments unpacked from a sequence",
                "write them out one by one",
            )
        if not rest:
            return node
        spacings = gast.copy_location(gast.Tuple(list(rest), gast.Load()), rest[0])
        keyword = gast.keyword(callee.rest, spacings)
        call = gast.Call(node.func, node.args[:arity], node.keywords + [keyword])
        return gast.copy_location(call, node)

    def numpy_positionals(self, node, op, count: int, spelled: str) -> None:
        try:
            check_numpy_positionals(op, count, spelled)
        except PptoError as error:
            raise self.source.error(
                node, str(error), "pass keepdims=... by name"
            ) from None

    def operator_call(self, node, op, renames, target):
        if op is elementwise.where and len(node.args) == 1 and not node.keywords:
            return self.passive(node, target)  # np.where(m): m's positions
        if op is elementwise.clip:
            bounds = self.varied_clip_bounds(node, renames, 1)
            named = {renames.get(k.arg, k.arg): k.value for k in node.keywords}
            given = node.args[0] if node.args else named.get("x")
            if bounds is not None and given is not None:
                x = self.input_operand(op, 0, given)
                return self.clip_as_extremes(x, bounds, target, node)
        arity = len(op.input_names)
        inputs, params, given = [], {}, []
        for position, argument in enumerate(node.args):
            if position < arity:
                self.refuse_string_input(op, position, argument)
                inputs.append(self.input_operand(op, position, argument))
            else:
                names = op.param_names
                if position - arity >= len(names):
                    raise self.source.error(
                        node,
                        f"ppto.{op.name} takes at most "
                        f"{arity + len(names)} positional arguments",
                    )
                name = names[position - arity]
                params[name] = self.parameter(argument, name, op)
                given.append(name)
        for keyword in node.keywords:
            name = renames.get(keyword.arg, keyword.arg)
            if name in op.input_names:
                index = op.input_names.index(name)
                while len(inputs) <= index:
                    inputs.append(None)
                inputs[index] = self.input_operand(op, index, keyword.value)
            elif name in op.param_names:
                params[name] = self.parameter(keyword.value, name, op)
                given.append(name)
            else:
                raise self.source.error(
                    keyword.value,
                    f"ppto.{op.name} has no argument {keyword.arg!r}",
                    f"its arguments are {', '.join(op.input_names + op.param_names)}",
                )
        if op is shape.reshape or op is shape.flatten:
            self.check_order(node, op, renames)
        defaults = {**getattr(op, "defaults", {}), **getattr(op, "input_defaults", {})}
        inputs += [None] * (arity - len(inputs))
        for index, name in enumerate(op.input_names):
            if inputs[index] is None and name in defaults:
                # an input left out takes its default (a user operator's keepdims,
                # np.average's weights)
                inputs[index] = ir.Verbatim(constant_expr(defaults[name]))
        if any(value is None for value in inputs):
            raise self.source.error(
                node,
                f"ppto.{op.name} needs {arity} input(s): {', '.join(op.input_names)}",
            )
        return self.apply(target, op, inputs, params, given, at=node)

    def refuse_string_input(self, op, position: int, argument) -> None:
        """A string written where the operator takes an array: a call in NumPy's
        order (``ppto.einsum("ij,jk", a, b)``, whose subscripts go last), which
        folded the operator's shape helpers on the arrays at transform time (a
        raw AttributeError)."""
        if not (
            isinstance(argument, gast.Constant) and isinstance(argument.value, str)
        ):
            return
        example = ", ".join(op.input_names)
        if op.param_names:
            example += f", {op.param_names[0]}=..."
        raise self.source.error(
            argument,
            f"ppto.{op.name}{op.python_signature} takes an array as "
            f"{op.input_names[position]}, not the string {argument.value!r}",
            f"pass the arrays first and the parameters by name: ppto.{op.name}"
            f"({example})",
        )

    def check_order(self, node, op, renames) -> None:
        """A reshape's or flatten's ``order`` must be 'C' or 'F', written out (see
        ``shape.ORDERS``)."""
        place = (op.input_names + op.param_names).index("order")
        named = {renames.get(k.arg, k.arg): k.value for k in node.keywords}
        given = node.args[place] if place < len(node.args) else named.get("order")
        if given is None or (
            isinstance(given, gast.Constant) and given.value in shape.ORDERS
        ):
            return
        raise self.source.error(
            given,
            f"ppto.{op.name} takes order='C' (row-major, the default) or 'F' "
            "(column-major) written out, not "
            f"{gast.unparse(given).strip()}: 'A' and 'K' follow how an array is "
            "laid out in memory, which the generated code does not keep",
            "write the order meant, order='C' or order='F'",
        )

    def varied_clip_bounds(self, node, renames, first: int):
        """The bounds (lo, hi: expressions, None where not given) of a call of
        clip whose bounds are at ``node.args[first:]`` or named, where one depends
        on a differentiated value; else None."""
        given = dict(zip(("lo", "hi"), node.args[first:]))
        given.update({renames.get(k.arg, k.arg): k.value for k in node.keywords})
        bounds = [given.get("lo"), given.get("hi")]
        bounds = [
            None if isinstance(b, gast.Constant) and b.value is None else b
            for b in bounds
        ]
        varied = [
            b
            for b in bounds
            if b is not None and value_reads(b, through_comparisons=False) & self.varied
        ]
        return bounds if varied else None

    def clip_as_extremes(self, x, bounds, target, node):
        """np.clip(x, lo, hi) as NumPy defines it, minimum(maximum(x, lo), hi), where
        a bound is differentiated: clip's rule is x's alone, and the extremes' rules
        send the gradient to whichever of x and a bound is taken."""
        lo, hi = bounds
        if lo is not None:
            x = self.apply(
                None if hi is not None else target,
                elementwise.maximum,
                [x, self.expression(lo)],
                at=node,
            )
        if hi is not None:
            x = self.apply(
                target, elementwise.minimum, [x, self.expression(hi)], at=node
            )
        return x

    def input_operand(self, op, position, argument):
        pattern = op.signature.inputs[position] if hasattr(op, "signature") else None
        if pattern is not None and pattern.is_list:
            if self.differentiated_array(argument):
                # (NumPy reads an array given for a list as its rows: np.stack(X),
                # np.concatenate(X ** 2); passed as it is, the rule's list of
                # gradients met the array's, ``dX * 2`` repeating the list)
                rows = self.namer.temporary()
                self.made_list(argument, rows, argument, list)
                return rows
            if not isinstance(argument, (gast.List, gast.Tuple)):
                return self.expression(argument)
            return [self.expression(element) for element in argument.elts]
        if isinstance(op, Primitive) and self.array_of_items(argument):
            return self.stacked(argument)
        return self.expression(argument)

    def differentiated_array(self, node) -> bool:
        """Whether ``node`` surely is an array of differentiated values, not a list
        or tuple: a differentiated name that holds no list, arithmetic or a
        subscript of one, or its ``.T``."""
        if not value_reads(node) & self.varied:
            return False
        sequences = self.lists | self.packed | self.joined_tuples
        if isinstance(node, gast.Name):
            return node.id not in sequences
        if isinstance(node, gast.Attribute):
            return node.attr in ("T", "mT") and self.differentiated_array(node.value)
        if isinstance(node, gast.Subscript):
            return self.differentiated_array(node.value) and not self.item_is_list(node)
        if isinstance(node, gast.UnaryOp):
            return self.differentiated_array(node.operand)
        if isinstance(node, gast.BinOp):
            # (an array and a list or tuple: NumPy's elementwise arithmetic)
            return any(map(self.differentiated_array, (node.left, node.right)))
        return False

    def array_of_items(self, node) -> bool:
        """Whether ``node``, given where an operator takes an array, is a Python
        list or tuple NumPy would read as one: of differentiated values, of numbers
        written out, or a name bound to a list (the rules read their input as an
        array: ``A.ndim`` failed for np.linalg.solve's, ``y * y`` for
        np.arctan2's, and np.average took a list of weights for one number)."""
        if self.varied_sequence(node) or numbers_written_out(node):
            return True
        return isinstance(node, gast.Name) and node.id in self.lists | self.packed

    def varied_sequence(self, node) -> bool:
        """Whether ``node`` is a list or tuple of differentiated values (written out,
        or a name only ever bound to one)."""
        if isinstance(node, (gast.List, gast.Tuple)):
            return bool(value_reads(node) & self.varied)
        sequences = self.lists | self.packed
        return isinstance(node, gast.Name) and node.id in sequences & self.varied

    def stacked(self, node):
        """A list or tuple given where an operator takes an array, as NumPy reads
        it: its items stacked. (Passed as it is, rules read the tuple as an array,
        ``.dtype`` failing, and forward mode added two tuples' tangents with +,
        joining them: np.mean(np.add([a, b], [c, d])) pushed forward over 4 items.)"""
        if isinstance(node, gast.Name):
            items = node.id
        else:
            items = [
                self.stacked(e) if self.varied_sequence(e) else self.expression(e)
                for e in node.elts
            ]
        return self.apply(None, shape.stack, [items], at=node)

    def parameter(self, argument, name, op):
        if name == "like":  # a "like" parameter is read only for its shape
            return argument
        self.check_not_varied(argument, f"the {name!r} argument of ppto.{op.name}")
        if name != "dtype" and self.reads_object_state(argument):
            # (as operands are: the backward pass reads the forward's, axis=cfg.axis
            # rebound after it does not change it; a dtype is read here, statically)
            bound = self.read_once(argument, self.namer.fresh(name))
            return gast.Name(bound, gast.Load(), None, None)
        return argument

    def check_index(self, index):
        """A differentiated value used directly as an index has no gradient there."""
        parts = index.elts if isinstance(index, gast.Tuple) else [index]
        for part in parts:
            if isinstance(part, gast.Name) and part.id in self.varied:
                self.check_not_varied(part, "an index")

    def check_not_varied(self, expression, what):
        if self.generated:
            # a gradient differentiated again was checked as written; there an
            # integer read from a helper's ``saved`` (a turn's index, an inner
            # loop's range) is taken for a differentiated value, as ``saved`` is
            return
        if value_reads(expression, through_comparisons=False) & self.varied:
            raise self.source.error(
                expression,
                f"ppto does not differentiate {what}, but "
                "it depends on a differentiated value",
                "compute it from values that are not differentiated",
            )

    def refuse_method_of_an_argument(self, node) -> None:
        """A method called on an object the function is given (``self.layer.forward``
        in a method differentiated as a function): which function it runs is known
        only for objects ppto sees, so the error says how to show it one."""
        root = node.func.value
        while isinstance(root, (gast.Attribute, gast.Subscript)):
            root = root.value
        if not isinstance(root, gast.Name) or root.id in self.varied:
            return
        text = gast.unparse(node.func).strip()
        if root.id in self.local_names and root.id not in self.parsed.parameters:
            raise self.source.error(
                node,
                f"ppto cannot differentiate the method call {text}(): {root.id} is "
                "made inside the function, and ppto follows the methods only of "
                "objects it can read before the call runs (a module-level object, "
                "a closure's, self of a bound method)",
                f"make {root.id} outside the function (a module-level object, or "
                "self's attribute), or write the computation as a function of "
                "arrays",
            )
        if root.id not in self.parsed.parameters:
            return
        raise self.source.error(
            node,
            f"ppto cannot differentiate the method call {text}(): {root.id} is an "
            "argument, so ppto cannot tell which object it is, nor which function "
            "the call runs",
            "call the method on the object itself (MODEL.loss(x)), or differentiate "
            "the bound method (ppto.grad(MODEL.loss)): calls through self in it are "
            "followed",
        )

    def method_call(self, node, method, target):
        if _is_list_pop(node, self.lists):  # xs.pop() inside an expression
            target = target or self.namer.temporary()
            self.emit(ir.ListPop(target, node.func.value.id))
            return target
        op = METHOD_OPERATORS.get(method)
        if op is None:
            self.refuse_method_of_an_argument(node)
            raise self.source.error(
                node,
                f"ppto cannot differentiate the method .{method}()",
                "use a ppto operator",
            )
        self.numpy_positionals(node, op, 1 + len(node.args), f".{method}()")
        as_function = gast.Call(node.func, [node.func.value, *node.args], node.keywords)
        if _reduction_options(as_function, op):  # x.sum(where=m), x.max(initial=v)
            return self.reduction_with_options(
                gast.copy_location(as_function, node), op, {}, f".{method}()", target
            )
        receiver = self.expression(node.func.value)
        if op is elementwise.clip:
            renames = METHOD_KEYWORDS.get(method, {})
            bounds = self.varied_clip_bounds(node, renames, 0)
            if bounds is not None:
                return self.clip_as_extremes(receiver, bounds, target, node)
        arguments = list(node.args)
        if method in VARARG_METHODS and len(arguments) > 1:
            arguments = [gast.Tuple(arguments, gast.Load())]
        call = gast.Call(node.func, [gast.Constant(0, None)] + arguments, node.keywords)
        gast.copy_location(call, node)
        renames = METHOD_KEYWORDS.get(method, {})
        inputs_call = self.operator_call(call, op, renames, target)
        statement = self.out[-1]
        statement.inputs[0] = receiver
        if method in METHOD_RANK_CHECKS:
            statement.rank_check = (METHOD_RANK_CHECKS[method], node)
        return inputs_call

    def checkpointed(self, node):
        """The Callee of ``ppto.checkpoint(step)(...)`` or of a call to a function
        wrapped with ``ppto.checkpoint``, else None."""
        from ppto.checkpoint import Checkpointed, checkpoint

        function = node.func
        if isinstance(function, gast.Call):
            found, value = static_value(
                function.func, self.parsed.namespace, self.local_names
            )
            if found and value is checkpoint and len(function.args) == 1:
                found, wrapped = static_value(
                    function.args[0], self.parsed.namespace, self.local_names
                )
                if found:
                    return classify(wrapped, gast.unparse(function.args[0]).strip())
            return None
        found, value = static_value(function, self.parsed.namespace, self.local_names)
        if found and isinstance(value, Checkpointed):
            return classify(value.function, gast.unparse(function).strip())
        return None

    def argument(self, node, returned: bool = False):
        """The operand a call of a user's function is passed; for a list, a copy:
        the function's backward pass reads what it was given, which later appends
        to the caller's list would otherwise change (unless the function may return
        the list itself: the caller may change it through the result)."""
        if returned or not _names_list(node, self.lists) or node.id in self.tuples:
            return self.expression(node)  # (a tuple cannot change: no copy)
        copy = self.namer.temporary()
        self.made_list(node, copy, node, list)
        return copy

    def call_function(self, node, callee, targets, checkpoint=False):
        from ppto.transform.aliases import returned_parameters
        from ppto.transform.source import parse_function

        function = getattr(callee.op, "function", None) or callee.function
        passes_lists = any(
            _names_list(argument, self.lists)
            for argument in node.args + [k.value for k in node.keywords]
        )
        if passes_lists:
            names, returned = returned_parameters(function)
        else:
            names, returned = [], {}
        whole = {name for name, kept in returned.items() if kept}
        operands = [  # (in the order written: a list passed is copied here)
            self.argument(argument, parameter in whole)
            for parameter, argument in bound_arguments(node, names)
        ]
        inputs = operands[: len(node.args)]
        keywords = dict(zip((k.arg for k in node.keywords), operands[len(node.args) :]))
        targets = [t or self.namer.temporary() for t in targets]
        try:
            parsed = parse_function(function)
        except TransformError as error:
            # (a stand-in taking a dict's values is named as the user wrote it)
            written = self.parsed.stand_ins.get(callee.text, (callee.text,))[0]
            raise self.source.error(
                node,
                f"cannot differentiate the call to "
                f"{written}: {error.msg.splitlines()[0]}",
            ) from error
        # (a callable passed, helper(x, np.tanh): its code is made for it)
        statics = passed_callables(node, parsed, self.static)
        if statics:
            parsed = localised(parsed, statics)
        arguments = parsed.tree.args
        if arguments.vararg is not None or arguments.kwarg is not None:
            written = getattr(function, "__qualname__", "")
            if "." in written and "<locals>" not in written:  # (a method: Net.__call__)
                raise self.source.error(
                    node,
                    f"ppto cannot differentiate the call to {written}: it takes "
                    "*args or **kwargs parameters",
                    f"list {written}'s parameters explicitly, or let it only pass "
                    "its call on, without defaults of its own (return "
                    "self.forward(*args, **kwargs): followed)",
                )
            raise self.source.error(
                node,
                f"ppto cannot differentiate the call to {callee.text}: it takes "
                "*args or **kwargs parameters",
                f"list {callee.text}'s parameters explicitly, or pass the values "
                "in one list",
            )
        if passes_lists:
            # a list the function changes is the caller's, whether or not the
            # function's result is used
            self.check_call_arguments(node, parsed, lists_only=True)
        self.emit(ir.CallFunction(targets, parsed, inputs, keywords, checkpoint))
        return targets


def _assigned(name: str, value, at) -> gast.Assign:
    """``name = value``, at the place in the user's code of ``at`` (a node)."""
    return gast.copy_location(
        gast.Assign([gast.Name(name, gast.Store(), None, None)], value, None), at
    )


def _hashable_in(value, known: frozenset) -> bool:
    try:
        return value in known
    except TypeError:  # (an unhashable callable)
        return False


def _symbol(operator) -> str:
    from ppto.transform.fence import _SYMBOLS

    return _SYMBOLS.get(type(operator), type(operator).__name__)


def _literal(node) -> bool:
    return isinstance(node, (gast.List, gast.Tuple))


def numbers_written_out(node) -> bool:
    """Whether ``node`` is a list or tuple of numbers written out (``[1.0, 2.0]``,
    ``[[3.0, 1.0], [1.0, 4.0]]``)."""
    return (
        isinstance(node, (gast.List, gast.Tuple))
        and bool(node.elts)
        and all(
            numbers_written_out(element) or _number(element) for element in node.elts
        )
    )


def _number(node) -> bool:
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, (gast.USub, gast.UAdd)):
        node = node.operand
    return (
        isinstance(node, gast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    )


def _empty_list_call(node) -> bool:
    return called(node, "list") and not node.args and not node.keywords


def _separable(node) -> list | None:
    """``[(target, value), ...]`` for ``a, b = x, y`` where no value reads a target
    (``a, b = b, a`` swaps: it must stay one statement), so that each name is bound
    as if alone (a list made this way is a list: its appends were lost in forward
    mode); else None."""
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0], node.value
    if not (
        isinstance(target, (gast.Tuple, gast.List))
        and _literal(value)
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, gast.Name) for t in target.elts)
    ):
        return None
    names = {t.id for t in target.elts}
    if len(names) < len(target.elts) or value_reads(value) & names:
        return None
    return list(zip(target.elts, value.elts))


def _keeps_an_argument(parsed, holder: str | None = None) -> bool:
    """Whether a method keeps what a parameter other than self (``holder``, for a
    function: the parameter holding an object) holds, or a value computed from it,
    in an object (``self.last = v``, ``self.seen.append(v)``, ``t.last = v``)."""
    holder = parsed.parameters[0] if holder is None else holder
    parameters = set(parsed.parameters) - {holder}
    for node in trees.walk(parsed.tree):
        if isinstance(node, (gast.Assign, gast.AugAssign)):
            targets = node.targets if isinstance(node, gast.Assign) else [node.target]
            stored = any(
                isinstance(part, gast.Attribute)
                for target in targets
                for part in trees.walk(target)
            )
            if stored and value_reads(node.value) & parameters:
                return True
        if (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and node.func.attr in KEEPING_METHODS
            and isinstance(node.func.value, (gast.Attribute, gast.Subscript))
            and value_reads(node) & parameters
        ):
            return True  # self.seen.append(v): into a list (dict, set) it holds
    return False


def _read_besides_calls(
    tree, owner, names: set, position: int, keyword: str | None = None
) -> bool:
    """Whether ``tree`` may read back what a call of a function or method (called
    by one of ``names``) kept in the object it passes at ``position``: it uses
    ``owner`` otherwise than by passing it there again (``record(tracker, h)`` then
    ``tracker.last``) or calling the method on it again (``tracker.record(h)``, the
    object first; ``keyword``: the parameter's name, passed by it)."""
    if not isinstance(owner, gast.Name):
        return True  # (an object reached otherwise: assume so)
    passed = set()
    for node in trees.walk(tree):
        if not isinstance(node, gast.Call):
            continue
        if isinstance(node.func, gast.Name) and node.func.id in names:
            if len(node.args) > position:
                passed.add(id(node.args[position]))
            passed |= {id(k.value) for k in node.keywords if k.arg == keyword}
        elif isinstance(node.func, gast.Attribute) and node.func.attr in names:
            if position == 0:
                passed.add(id(node.func.value))
    return any(
        isinstance(node, gast.Name)
        and isinstance(node.ctx, gast.Load)
        and node.id == owner.id
        and id(node) not in passed
        for node in trees.walk(tree)
    )


KEEPING_METHODS = {"append", "extend", "insert", "add", "update", "setdefault"}
IN_PLACE_FUNCTIONS = {
    "copyto", "fill_diagonal", "put", "place", "putmask", "put_along_axis",
}  # fmt: skip
# ``operator``'s functions that change their first argument in place (where it is
# an array: ``operator.imul(z, 3.0)`` is ``z *= 3.0``)
IN_PLACE_OPERATORS = {"setitem", "delitem"} | {
    name.strip("_") for name in IN_PLACE_DUNDERS
}
# methods that change a list, dict, set or array in place (what an object holds:
# ``self.acts.append(h)``)
CHANGING_METHODS = (
    LIST_CHANGES
    | {"update", "setdefault", "popitem", "add", "discard"}
    | IN_PLACE_METHODS
    | IN_PLACE_DUNDERS
)
# what sets an object's attribute (``setattr(self, "h", h)``)
OBJECT_SETTERS = (
    builtins.setattr,
    builtins.delattr,
    object.__setattr__,
    object.__delattr__,
)
# NumPy's and Python's, whatever they are reached through (np.random.shuffle,
# rng.shuffle, random.shuffle of a list): it reorders its argument in place
SHUFFLING = "shuffle"


def _written_in_place(value, varied: set, resolved):
    """In a statement, a call that changes an array in place and reads or writes
    differentiated values: anything with ``out=``, NumPy's in-place functions
    (``np.copyto``, ``np.add.at``; also imported by name, or from NumPy under
    another name: ``resolved(node)`` is ``static_value``'s answer for it), a shuffle,
    and the in-place methods of a differentiated value (``z.fill(0.0)``,
    ``z.sort()``). Else None."""
    for node in trees.walk(value):
        if not isinstance(node, gast.Call):
            continue
        function, reads = node.func, value_reads(node) & varied
        found, called_value = resolved(function)
        outs = [k.value for k in node.keywords if k.arg == "out"]
        outs += _positional_outs(node, found, called_value, resolved)
        outs = [
            o for o in outs if not (isinstance(o, gast.Constant) and o.value is None)
        ]
        if outs and (reads or any(value_reads(out) for out in outs)):
            return node
        if not reads:
            continue
        if found and _writes_its_first_argument(called_value):
            # ``np.ndarray.fill(z, 1.0)``, ``operator.imul(z, 3.0)``: the method
            # (or operator) called with the array first, which it changes
            if node.args and may_view(node.args[0]) & varied:
                return node
        if isinstance(function, gast.Name):
            if found and _in_place_library_function(called_value):
                return node  # ``from numpy import copyto``: copyto(z, x)
            continue
        if not isinstance(function, gast.Attribute):
            continue
        owner = function.value
        if function.attr == SHUFFLING:
            return node
        if function.attr in IN_PLACE_FUNCTIONS and (
            _module(owner) or is_numpy_module(resolved(owner)[1])
        ):
            return node
        if function.attr == "at" and (
            (isinstance(owner, gast.Attribute) and _module(owner.value))
            or isinstance(resolved(owner)[1], np.ufunc)  # from numpy import add
        ):
            return node  # np.add.at(z, i, v), add.at(z, i, v)
        # (on the value itself or on a view of it, which writes into it: z.fill(2.0),
        # z.__iadd__(y), Z[0].fill(0.0), z[1:].sort(), z.T.sort(), hs[0].sort())
        if _in_place_method(function.attr) and may_view(owner) & varied:
            return node
    return None


def _changes_its_first_argument(value) -> bool:
    """Whether ``value`` changes its first argument in place: as
    ``_writes_its_first_argument``, or a changing method of a list, dict or set
    reached through its class (``dict.update``, ``list.append``)."""
    if _writes_its_first_argument(value):
        return True
    name = getattr(value, "__name__", None)
    return name in CHANGING_METHODS and any(
        getattr(kind, name, None) is value for kind in (list, dict, set)
    )


def _in_place_method(name: str) -> bool:
    """Whether ``name`` is an array method that changes its array in place."""
    return name in IN_PLACE_METHODS or name in IN_PLACE_DUNDERS


def _writes_its_first_argument(value) -> bool:
    """Whether ``value`` is a function that changes its first argument in place:
    an in-place method of ``np.ndarray`` reached through the class
    (``np.ndarray.fill``), or ``operator``'s in-place functions
    (``operator.setitem``, ``operator.imul``)."""
    if any(value is getattr(operator, name, None) for name in IN_PLACE_OPERATORS):
        return True
    name = getattr(value, "__name__", None)
    return (
        isinstance(name, str)
        and _in_place_method(name)
        and getattr(np.ndarray, name, None) is value
    )


def _parsed_function_of(callee):
    """The parsed function a call of the user's function calls, else None (an
    operator, a method, a library function, or one whose source cannot be read,
    which cannot be checked either)."""
    from ppto.transform.source import parse_function

    if callee.kind != "function":
        return None
    try:
        return parse_function(callee.function)
    except TransformError:
        return None


def _rebound_outer_names(parsed) -> list:
    """The names a function declares ``global`` or ``nonlocal`` and assigns (the
    declarations of names it only reads were dropped when it was parsed)."""
    return sorted(
        name
        for node in trees.walk(parsed.tree)
        if isinstance(node, (gast.Global, gast.Nonlocal))
        for name in node.names
    )


def _positional_outs(node: gast.Call, found: bool, callee, resolved) -> list:
    """The outputs ``node`` gives by position (``np.exp(x, y)``, ``z.clip(0, 1,
    z)``: see ``out_arguments``), ``(found, callee)`` what its function resolves
    to; a method's only where its object is a value of the function (an array),
    not something named outside it."""
    function = node.func
    on_a_value = isinstance(function, gast.Attribute) and not found
    if on_a_value:
        on_a_value = not resolved(function.value)[0]
    return positional_outs(node, callee if found else None, on_a_value)


def _in_place_library_function(value) -> bool:
    """Whether ``value`` is one of NumPy's in-place functions, or a shuffle."""
    name = getattr(value, "__name__", None)
    if name == SHUFFLING:
        return True
    return name in IN_PLACE_FUNCTIONS and getattr(np, name, None) is value


def _new_value_instead(written) -> str:
    """The suggestion for a call that writes in place: ``z = np.sort(z)`` for
    ``z.sort()`` (np.sort is an operator), else the general form."""
    function = written.func
    if (
        isinstance(function, gast.Attribute)
        and function.attr == "sort"
        and isinstance(function.value, gast.Name)
    ):
        name = function.value.id
        return f"sort into a new array: {name} = np.sort({name}), not {name}.sort()"
    if (  # ``m[0].fill(0.0)``, ``z[1:].sort()``: a subscript assignment does it
        isinstance(function, gast.Attribute)
        and isinstance(function.value, gast.Subscript)
        and (
            (function.attr == "fill" and len(written.args) == 1)
            or (function.attr == "sort" and not written.args and not written.keywords)
        )
    ):
        part = gast.unparse(function.value).strip()
        value = (
            gast.unparse(written.args[0]).strip()
            if function.attr == "fill"
            else f"np.sort({part})"
        )
        return (
            f"assign into the part: {part} = {value}, not "
            f"{gast.unparse(written).strip()}"
        )
    return (
        "assign the new value instead (z = np.sin(x), not np.sin(x, out=z); "
        "z = z[rng.permutation(len(z))], not rng.shuffle(z))"
    )


def _module(node) -> bool:
    return isinstance(node, gast.Name) and node.id in ("np", "numpy")


WRITTEN_OUT = 64  # items of a joined repetition appended one by one, at most


def _written_out(node) -> tuple | None:
    """``(items, count)`` of a list or tuple written out (count 1) or repeated by a
    whole number written out (``[a, b] * 3``), where its items, repeated, are few
    enough to append one by one; else None."""
    if _literal(node):
        return node.elts, 1
    if not (isinstance(node, gast.BinOp) and isinstance(node.op, gast.Mult)):
        return None
    for items, count in ((node.left, node.right), (node.right, node.left)):
        if (
            _literal(items)
            and isinstance(count, gast.Constant)
            and type(count.value) is int
            and 0 <= count.value * len(items.elts) <= WRITTEN_OUT
        ):
            return items.elts, count.value
    return None


def joined_tuples(body: list) -> set:
    """The names (of the renamed ``body``) every binding of which is a tuple
    written out, another such name (a loop's copies), or a join of one with
    tuples written out: ``t = ()`` before ``t = t + (v,)`` in a loop. A name bound
    otherwise anywhere (``t = x``, unpacked, a loop's target, a parameter) is
    left out, and so are the names bound from it: it may be an array, which
    ``+`` adds to elementwise."""
    values: dict = {}
    other: set = set()
    assigned = set()  # (the Name nodes of ``t = ...``)
    for node in (n for statement in body for n in trees.walk(statement)):
        if isinstance(node, gast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, gast.Name):
                values.setdefault(target.id, []).append(node.value)
                assigned.add(id(target))
        elif isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
            if id(node) not in assigned:
                other.add(node.id)

    def joined(value, names) -> bool:
        if isinstance(value, gast.Tuple) or getattr(value, "id", None) in names:
            return True
        parts = _summands(value)
        return (
            isinstance(value, gast.BinOp)
            and isinstance(value.op, gast.Add)
            and joined(parts[0], names)
            and not isinstance(parts[0], gast.BinOp)
            and all(isinstance(part, gast.Tuple) for part in parts[1:])
        )

    names = set(values) - other
    while True:  # (until no name is bound to one left out)
        kept = {n for n in names if all(joined(v, names) for v in values[n])}
        if kept == names:
            return names
        names = kept


def _summands(node) -> list:
    """``a + b + c`` -> ``[a, b, c]``."""
    if isinstance(node, gast.BinOp) and isinstance(node.op, gast.Add):
        return _summands(node.left) + _summands(node.right)
    return [node]


def _names_list(node, lists) -> bool:
    return isinstance(node, gast.Name) and node.id in lists


def _replaces_an_item(statement, lists: set) -> bool:
    """Whether ``statement`` is ``xs_1 = setitem(xs, v, index)`` for a list ``xs``."""
    return (
        isinstance(statement, ir.Apply)
        and statement.op is indexing.setitem
        and isinstance(statement.inputs[0], str)
        and statement.inputs[0] in lists
    )


def _assigned_name(text: str) -> str | None:
    """The name a user's assignment statement binds (``xs = ...``), or None."""
    try:
        statement = ast.parse(text).body[0]
    except (SyntaxError, IndexError):
        return None
    targets = getattr(statement, "targets", None) or [
        getattr(statement, "target", None)
    ]
    return targets[0].id if isinstance(targets[0], ast.Name) else None


def _merged_tuples(body: list, counts: dict, varied: set) -> set[str]:
    """Names of differentiated values bound only to tuples written out or to each
    other, that some path binds twice (``t = (x, 1.0)``, then ``t = (x * 2.0,
    3.0)`` in a branch or a loop), and the names copied into those."""
    values: dict[str, list] = {}
    for node in trees.walk(gast.Module(body=body, type_ignores=[])):
        target = single_target(node)
        if target is not None:
            values.setdefault(target, []).append(node.value)
    candidates = {
        n
        for n, found in values.items()
        if len(found) == counts.get(n)  # (bound by nothing else: a for loop...)
        and all(isinstance(v, (gast.Tuple, gast.Name)) for v in found)
    }
    changed = True
    while changed:
        changed = False
        for n in list(candidates):
            if any(
                isinstance(v, gast.Name) and v.id not in candidates for v in values[n]
            ):
                candidates.discard(n)
                changed = True
    merged = {n for n in candidates if counts[n] > 1 and n in varied}
    pending = list(merged)
    while pending:
        for value in values[pending.pop()]:
            if isinstance(value, gast.Name) and value.id not in merged:
                merged.add(value.id)
                pending.append(value.id)
    return merged


def _list_receivers(tree) -> set[str]:
    found = set()
    for node in trees.walk(tree):
        if (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and isinstance(node.func.value, gast.Name)
            and (
                (node.func.attr == "pop" and not node.args)
                or (node.func.attr == "append" and len(node.args) == 1)
            )
            and not node.keywords
        ):
            found.add(node.func.value.id)
    return found


def _is_list_pop(value, lists) -> bool:
    return (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "pop"
        and not value.args
        and _names_list(value.func.value, lists)
    )


def _is_none(node) -> bool:
    return isinstance(node, gast.Constant) and node.value is None


def _is_setitem(value) -> bool:
    from ppto.transform.ssa import SETITEM

    return called(value, SETITEM)


def _single_result(op, call: gast.Call) -> bool | None:
    """Whether the call of an operator that returns a tuple asks for one value by a
    parameter written out (``np.linalg.svd(A, compute_uv=False)``:
    ``op.single_result`` holds ``{"compute_uv": False}``), by name or by position;
    None where that parameter is given but not written out (only a run tells)."""
    single = getattr(op, "single_result", {})
    if not single:
        return False
    given = {keyword.arg: keyword.value for keyword in call.keywords}
    arity = len(getattr(op, "input_names", ()))
    for name, position in zip(op.param_names, range(arity, len(call.args))):
        given[name] = call.args[position]
    for name, value in single.items():
        if name not in given:
            continue
        if not isinstance(given[name], gast.Constant):
            return None
        if given[name].value == value:
            return True
    return False


_OPTIONS = ("where", "initial", "dtype")
# a reduction's identity (None: max's and min's, initial's instead) and the
# operator joining its result with ``initial`` (the mean takes no initial)
_REDUCTION_OPTIONS = {
    reductions.reduce_sum: (0.0, elementwise.add),
    reductions.reduce_prod: (1.0, elementwise.mul),
    reductions.reduce_max: (None, elementwise.maximum),
    reductions.reduce_min: (None, elementwise.minimum),
    reductions.reduce_mean: (0.0, None),
}


def _reduction_options(node, op) -> bool:
    """Whether ``node`` calls a NumPy reduction with ``where=``, ``initial=`` or
    ``dtype=`` by name, its array written first (the mean: no ``initial=``; the
    maximum and minimum: no ``dtype=``)."""
    if op not in _REDUCTION_OPTIONS or not node.args:
        return False
    named = {k.arg for k in node.keywords}
    if op is reductions.reduce_mean and "initial" in named:
        return False  # (np.mean has none: refused as an argument it lacks)
    if op in (reductions.reduce_max, reductions.reduce_min) and "dtype" in named:
        return False  # (nor have np.max and np.min a dtype)
    return bool(named & set(_OPTIONS))


def _name(name: str):
    return gast.Name(name, gast.Load(), None, None)


def _returned_parts(function):
    """``tuple`` or ``list`` where ``function`` returns a sequence of parts at every
    return: a tuple written out (``return a, b``), the parts of an operator
    returning them (``return np.split(x, [1, 3])``: arrays of unlike shapes, a list
    as NumPy's), or those of a function returning them so; ``list`` where every
    return is a list, else ``tuple``. None where some return is not such, or the
    source cannot be read (refused where it is called)."""
    from ppto.transform.source import parse_function

    if function in _READING_PARTS:  # (a recursion: refused where planned)
        return None
    try:
        parsed = parse_function(function)
    except PptoError:
        return None
    nodes = list(trees.walk(parsed.tree))
    returns = [node for node in nodes if isinstance(node, gast.Return)]
    local_names = stores(parsed.tree.body) | set(parsed.parameters)
    _READING_PARTS.add(function)
    try:
        kinds = {
            _parts_made(r.value, parsed.namespace, local_names)
            or _bound_once_to_parts(r.value, nodes, parsed.namespace, local_names)
            for r in returns
        }
    finally:
        _READING_PARTS.discard(function)
    if not kinds or None in kinds:
        return None
    return list if kinds == {list} else tuple


_READING_PARTS: set = set()  # functions whose returns are being read


def _bound_once_to_parts(value, nodes: list, namespace, local_names):
    """``tuple`` or ``list`` where ``value`` is a name the function binds once, to
    parts (``parts = np.split(x, [1, 3])``, then ``return parts``), else None."""
    if not isinstance(value, gast.Name):
        return None
    bindings = [
        node
        for node in nodes
        if isinstance(node, gast.Name)
        and isinstance(node.ctx, gast.Store)
        and node.id == value.id
    ]
    if len(bindings) != 1:
        return None
    statement = next((node for node in nodes if single_target(node) == value.id), None)
    if statement is None:
        return None
    return _parts_made(statement.value, namespace, local_names)


def _parts_made(value, namespace, local_names: set):
    """``tuple`` or ``list``, the type of the parts ``value`` makes where it is a
    tuple written out, ``tuple(...)`` of anything, a call of an operator returning
    parts (and not asked for one value: a tuple, or NumPy's type of them, np.split's
    list) or of a function returning parts at every return, or a slice of one of
    those; else None."""
    if isinstance(value, gast.Tuple):
        return tuple
    if isinstance(value, gast.Subscript) and isinstance(value.slice, gast.Slice):
        return _parts_made(value.value, namespace, local_names)  # (its slice)
    if not isinstance(value, gast.Call):
        return None
    callee = resolve_call(value, namespace, local_names)
    if callee.function is tuple:
        return tuple if len(value.args) == 1 and not value.keywords else None
    return _parts_called(callee, value)


def _parts_called(callee, call):
    """``tuple`` or ``list`` where ``call`` of ``callee`` gives parts: an operator
    returning a tuple, not asked for one value (NumPy's spelling: its type of them,
    np.split's list), or a function returning parts at every return; else None."""
    if callee.kind == "function" or _composite_without_rule(callee):
        return _returned_parts(getattr(callee.op, "function", callee.function))
    if _returns_a_tuple(callee) and _single_result(callee.op, call) is False:
        return callee.parts_type or tuple
    return None


def _returns_a_tuple(callee) -> bool:
    """Whether ``callee`` is an operator whose signature gives a tuple."""
    output = getattr(getattr(callee.op, "signature", None), "output", "")
    return callee.kind == "operator" and output.endswith(" tuple")


def _item_of(node, names: set) -> bool:
    """Whether ``node`` reads one item (not a slice) of a name in ``names``."""
    return (
        isinstance(node, gast.Subscript)
        and _names_list(node.value, names)
        and not isinstance(node.slice, gast.Slice)
    )


def _returns_lists(function) -> bool:
    """Whether ``function`` returns a list at every return: one written out, a
    comprehension, or a name bound only to those (``out = []``, appended to);
    False where its source cannot be read (refused where it is called)."""
    from ppto.transform.source import parse_function

    try:
        parsed = parse_function(function)
    except PptoError:
        return False
    nodes = list(trees.walk(parsed.tree))
    returns = [node for node in nodes if isinstance(node, gast.Return)]
    bound: dict = {}  # name -> whether every binding of it makes a list
    for node in nodes:
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
            bound.setdefault(node.id, False)
    for node in nodes:
        name = single_target(node)
        if name is not None:
            makes = _makes_a_list(node.value)
            count = sum(
                isinstance(other, gast.Name)
                and isinstance(other.ctx, gast.Store)
                and other.id == name
                for other in nodes
            )
            bound[name] = makes and count == 1
    return bool(returns) and all(
        _makes_a_list(r.value)
        or (isinstance(r.value, gast.Name) and bound.get(r.value.id, False))
        or _passes_on_a_list(r.value, parsed, bound)
        or _list_of_one_argument(r.value, parsed)
        for r in returns
    )


def _list_of_one_argument(value, parsed) -> bool:
    """Whether ``value`` is ``list(...)`` of one argument, ``list`` the builtin
    (``return list(np.split(x, [2, 5]))``)."""
    return (
        called(value, "list")
        and len(value.args) == 1
        and not value.keywords
        and "list" not in stores(parsed.tree.body)
        and "list" not in parsed.parameters
        and parsed.namespace.get("list", list) is list
    )


# functions whose returns _returns_lists is reading (a recursion returns no list
# known so: ppto refuses it when it plans the derivative)
_READING_RETURNS: set = set()


def _passes_on_a_list(value, parsed, local) -> bool:
    """Whether ``value`` calls, by a global or closure name, another function of the
    user's that returns a list at every return (``return layers(x, ws)``)."""
    if not (isinstance(value, gast.Call) and isinstance(value.func, gast.Name)):
        return False
    if value.func.id in local:
        return False
    function = parsed.namespace.get(value.func.id)
    code = getattr(function, "__code__", None)
    if code is None or code in _READING_RETURNS:
        return False
    _READING_RETURNS.add(code)
    try:
        return _returns_lists(function)
    finally:
        _READING_RETURNS.discard(code)


def _returned_list_items(function) -> tuple | None:
    """For each item of the list ``function`` returns, whether it is a list, where
    every return writes out a list of the same length and kinds of items (a
    helper's ``return [[w1, b1], [x, np.sum(x)]]``), else None."""
    from ppto.transform.source import parse_function

    if function is None:
        return None
    try:
        tree = parse_function(function).tree
    except PptoError:
        return None
    found = {
        tuple(_makes_a_list(item) for item in node.value.elts)
        if isinstance(node.value, gast.List)
        else None
        for node in trees.walk(tree)
        if isinstance(node, gast.Return)
    }
    return found.pop() if len(found) == 1 else None


def _makes_a_list(node) -> bool:
    return isinstance(node, (gast.List, gast.ListComp)) or _empty_list_call(node)


def _composite_without_rule(callee) -> bool:
    op = callee.op
    return (
        callee.kind == "operator"
        and getattr(op, "function", None) is not None
        and op.backward_rule is None
    )


def _is_constant_constructor(function) -> bool:
    module = getattr(function, "__module__", "") or ""
    return module.startswith("ppto.runtime.constructors")


def varied_names(body: list, wrt: set[str]) -> set[str]:
    """Names that may depend on the differentiated parameters (statement level)."""
    varied = set(wrt)

    def visit(statements):
        for node in statements:
            if isinstance(node, gast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (gast.For, gast.While)):
                before = None
                while before != len(varied):  # values flow round the loop: fixpoint
                    before = len(varied)
                    visit(node.body)
            elif (
                isinstance(node, gast.Expr)
                and isinstance(node.value, gast.Call)
                and isinstance(node.value.func, gast.Attribute)
                and node.value.func.attr == "append"
                and isinstance(node.value.func.value, gast.Name)
                and value_reads(node.value) & varied
            ):
                varied.add(node.value.func.value.id)  # appending to a list
            elif isinstance(node, gast.Assign) and value_reads(node.value) & varied:
                for target in node.targets:
                    for name, value, _ in paired(target, node.value):
                        if value_reads(value) & varied:  # (``i, v = 2, x[0]``: v)
                            varied.add(name)

    visit(body)
    return varied


__all__ = ["Normalizer", "varied_names", "shape"]
