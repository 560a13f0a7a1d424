"""Fusion: a rewrite of generated code, the same for forward and backward passes.

Each fusion rule's pattern is matched against the data flow of the generated
statements (``ppto.transform.fuse_match``): an assignment's expression, and the
single-purpose temporaries it reads (each definition of a name read only by the
match, earlier in the same block). A match replaces the expression with a call of the
rule's fused kernel (``__fused_<name>``), put there or earlier where a statement in
between reads one of its values, and drops the temporaries it absorbed. What remains
of chains of elementwise operators (three or more) becomes a generated elementwise
kernel. An intermediate another statement still reads is never fused away.
"""

from __future__ import annotations

import math

import gast

from ppto.fusion.cuda import CudaElementwise
from ppto.fusion.kernels import ELEMENTWISE, LARGE, TERNARY, ElementwiseKernel, Node
from ppto.fusion.registry import (
    ALIASES,
    RULES,
    in_tolerance,
    rules_for,
    template_nodes,
)
from ppto.ops.primitive import OperatorDef, registrations
from ppto.symbolic import Operator
from ppto.transform import origins, trees
from ppto.transform.analyze import literal
from ppto.transform.fuse_match import (
    COMMUTATIVE,
    Match,
    candidates,
    definition_reads,
    same,
)
from ppto.transform.fuse_match import Definitions as _Definitions
from ppto.transform.normalize import BINARY_OPERATORS
from ppto.transform.regions import fuse_regions
from ppto.transform.trees import (
    clone,
    loads,
    name_counts,
    nested_blocks,
    single_target,
    stores,
)

_UNARY = {gast.USub: "neg"}
# a comparison written with Python's operator, as the operator it applies (so that
# a pattern's ``where(x > 0, dy, 0.0)`` is matched in the code)
_COMPARED = {
    gast.Gt: "greater",
    gast.GtE: "greater_equal",
    gast.Lt: "less",
    gast.LtE: "less_equal",
    gast.Eq: "equal",
    gast.NotEq: "not_equal",
}
FUSED_KINDS = ("cpu", "cuda")  # the backends with fused kernels; others run unfused


class Decoded:
    """An expression seen as an operator application."""

    def __init__(self, op, inputs, params):
        self.op = op
        self.inputs = inputs
        self.params = params


class Fuser:
    """Fuses one generated function (see the module docstring)."""

    def __init__(
        self,
        namespace: dict,
        kernels: dict,
        kind: str = "cpu",
        shapes=None,
        own_only: bool = False,
        before_regions: bool = False,
    ) -> None:
        self.namespace = namespace
        self.kernels = kernels  # kernel name -> kernel object
        self.kind = kind  # the backend kind the kernels are for: cpu or cuda
        self.shapes = shapes or {}  # value name -> its (likely) shape, where known
        # only rules' own elementwise implementations (before regions: see
        # fuse_program)
        self.own_only = own_only
        # only rules matched before regions form (``FusionRule.before_regions``)
        self.before_regions = before_regions
        self.loads: dict[str, int] = {}
        self.stores: dict[str, int] = {}
        self.written: dict[int, set] = {}  # id(statement) -> names it assigns
        # expression -> its Decoded or None (gast nodes hash by identity; they are
        # replaced, never changed in place)
        self.decoded: dict = {}

    def function(self, definition: gast.FunctionDef, copy: bool = True):
        """The fused ``definition``: a copy, or the tree itself changed in place
        where the caller owns it (``copy=False``)."""
        if copy:
            definition = clone(definition)
        self.loads = name_counts(definition, "Load")
        self.stores = name_counts(definition, "Store")
        definition.body = self.block(definition.body)
        return definition

    def block(self, body: list) -> list:
        for statement in body:
            if not isinstance(statement, gast.FunctionDef):
                for field, inner in nested_blocks(statement):
                    setattr(statement, field, self.block(inner))
        out = list(body)
        # (built once, not for every statement's prefix: that was quadratic)
        definitions = _Definitions(out)
        position = len(out) - 1
        while position >= 0:  # from the last statement: larger patterns first
            statement = out[position]
            if single_target(statement):
                self.statements, self.definitions = out, definitions
                self.placement = position
                prefix = definitions.before(position)
                consumed = self.fuse(statement, out[:position], prefix)
                if consumed:  # the fused statement computes their lines too
                    merged = [out[index] for index in consumed] + [statement]
                    origins.mark_joined(statement, merged)
                if self.placement < position:  # the call runs earlier (Match.place)
                    out.insert(self.placement, out.pop(position))
                    consumed = [p + (p >= self.placement) for p in consumed]
                    position += 1  # (the statement before it is now there)
                for index in sorted(consumed, reverse=True):
                    del out[index]
                if consumed:  # (the statements after them moved up)
                    definitions = _Definitions(out)
                position -= len(consumed)
            position -= 1
        return out

    def definition_reads(self, name: str, position: int) -> int | None:
        """How many statements' reads of ``name`` read the value the statement at
        ``position`` of the block being fused assigns (``fuse_match``)."""
        counts = (self.loads, self.stores)
        return definition_reads(self.statements, self.definitions, counts, name,
                                position)  # fmt: skip

    def unchanged_after(self, block: list, position: int) -> bool:
        """Whether nothing after ``block[position]`` assigns a name its value reads, so
        the value may be computed later instead (a loop's carried copies do)."""
        reads = loads(block[position].value)
        for later in block[position + 1 :]:
            written = self.written.get(id(later))
            if written is None:  # statements keep their targets: computed once
                written = self.written[id(later)] = stores(later)
            if written & reads:
                return False
        return True

    # --- decoding --------------------------------------------------------------------

    def decode(self, expression):
        """``expression`` as a ``Decoded`` operator application, or None; found
        once per expression (the matcher asks again for every rule and order)."""
        if expression not in self.decoded:
            self.decoded[expression] = self._decode(expression)
        return self.decoded[expression]

    def _decode(self, expression):
        if isinstance(expression, gast.BinOp):
            op = BINARY_OPERATORS.get(type(expression.op))
            if op is not None:
                return Decoded(op, [expression.left, expression.right], {})
        if isinstance(expression, gast.UnaryOp) and type(expression.op) in _UNARY:
            from ppto.ops.elementwise import neg

            return Decoded(neg, [expression.operand], {})
        if (
            isinstance(expression, gast.Compare)
            and len(expression.ops) == 1
            and type(expression.ops[0]) in _COMPARED
        ):
            from ppto.ops import logic

            op = getattr(logic, _COMPARED[type(expression.ops[0])])
            return Decoded(op, [expression.left, expression.comparators[0]], {})
        if isinstance(expression, gast.Call) and isinstance(expression.func, gast.Name):
            op = self.namespace.get(expression.func.id)
            if isinstance(op, OperatorDef) and hasattr(op, "input_names"):
                if op.positional:  # (ppto.pad(x, 1): NumPy's positional order)
                    expression = trees.passed_by_name(expression, op.positional)
                    if expression is None:
                        return None
                inputs = trees.operator_inputs(expression, op)
                if inputs is None:
                    return None
                arity = len(op.input_names)
                params = dict(getattr(op, "defaults", {}))
                names = list(getattr(op, "param_names", ()))
                for name, value in zip(names, expression.args[arity:]):
                    params[name] = value
                for keyword in expression.keywords:
                    if keyword.arg not in op.input_names:
                        params[keyword.arg] = keyword.value
                return Decoded(op, inputs, params)
        return None

    # --- matching named rules --------------------------------------------------------

    def fuse(self, statement, before: list, definitions: _Definitions) -> list:
        """Positions in ``before`` (every statement up to ``statement``, whose
        single-target ones ``definitions`` indexes) of the temporaries that fusing
        ``statement`` absorbed, to be dropped."""
        self.root_before = before
        root = self.decode(statement.value) if not self.own_only else None
        for rule in rules_for(root.op) if root is not None else ():
            if rule.size() < 2 or rule.kind == "elementwise":
                continue  # one operator is one kernel; chains are fused below
            if self.before_regions and not rule.before_regions:
                continue
            implementation = implementation_for(rule, self.kind)
            if implementation is None:
                continue  # no fused kernel of this rule on this backend
            for match in candidates(self, definitions, before, rule.template,
                                    statement.value):  # fmt: skip
                outputs = _outputs(match, rule, statement.targets[0].id)
                place = self.placed(match, rule, outputs)
                if place is not None:
                    break
            else:
                continue
            self.placement = place
            arguments = [match.bindings[name] for name in rule.parameters]
            label = rule.kernel_name
            self.kernels[label] = implementation
            dropped = sorted(match.consumed | match.copies_left_unread())
            replaced = [statement.value] + [before[p].value for p in dropped]
            statement.value = gast.Call(
                gast.Name(label, gast.Load(), None, None),
                [clone(a) for a in arguments],
                [],
            )
            self.count_reads(replaced, statement.value)
            if rule.outputs:  # each value bound to the name the code gave it
                names = [gast.Name(name, gast.Store(), None, None)
                         for name, _ in outputs]  # fmt: skip
                statement.targets = [gast.Tuple(names, gast.Store())]
            return dropped
        return self.elementwise(statement, before, definitions)

    def count_reads(self, replaced: list, call) -> None:
        """Keep ``loads`` right where a fused call reads other names than the code
        it replaces: a copy's source where the copy stays (``t5_1 = t4`` read by
        the backward code, the call reading t4), which must not then be taken
        for a temporary read once and written into the copy (fuzz seed 102590:
        NameError, t4 gone)."""
        for name, count in name_counts(call, "Load").items():
            self.loads[name] = self.loads.get(name, 0) + count
        for name, count in name_counts(replaced, "Load").items():
            self.loads[name] = self.loads.get(name, 0) - count

    def placed(self, match: Match, rule, outputs: list | None) -> int | None:
        """Where the fused call of a match binding ``outputs`` goes, or None where
        the match does not do (``Match.complete``, ``Match.place``)."""
        if outputs is None or not match.complete(outputs):
            return None
        if rule.outputs and not match.read_elsewhere(outputs[:-1]):
            # its other values would be arrays no one reads (forward-only code):
            # a one-value rule, or the plain code, computes less
            return None
        return match.place(outputs)

    # --- generic elementwise chains ---------------------------------------------------

    def elementwise(self, statement, before, definitions) -> list:
        leaves: list = []
        consumed: set = set()
        tree = self.tree(statement.value, before, definitions, leaves, consumed)
        if tree is None or tree.count() < 2:
            return []
        canonical, order = _canonical(tree)
        rule, positions = _named_elementwise(canonical)
        if self.before_regions and not (rule is not None and rule.before_regions):
            rule = None  # (chains: regions and the later pass fuse them)
        if self.kind == "cpu" and _own(rule):
            if len(positions) < len(rule.parameters):
                rule = None  # its pattern leaves a parameter out: it cannot be called
            else:  # parameter p is the code's leaf order[positions[p]]
                self.kernels[rule.kernel_name] = rule.implementation
                arguments = [leaves[order[position]] for position in positions]
                statement.value = _call(rule.kernel_name, arguments)
                return sorted(consumed)
        if self.own_only or self.before_regions:
            return []
        if self.kind == "cpu" and self.small(statement):
            # the kernel would run its plain NumPy expression: written out instead,
            # a call and a size check (half a microsecond) less at every run
            statement.value = _inlined(statement.value, before, consumed)
            return sorted(consumed)
        name = rule.kernel_name if rule is not None else None
        name = name or f"__fused_chain_{'_'.join(_op_names(tree))}"
        signature = _signature(tree, operators=True)  # the same computation
        label = name
        number = 1
        while (
            label in self.kernels
            and getattr(self.kernels[label], "signature", None) != signature
        ):
            number += 1
            label = f"{name}_{number}"
        if label not in self.kernels:
            kernel = _KERNELS.get((signature, self.kind))
            if kernel is None:  # kernels are shared by every program: compiled once
                make = ElementwiseKernel if self.kind == "cpu" else CudaElementwise
                kernel = make(label, tree, len(leaves))
                kernel.signature = signature
                _KERNELS[signature, self.kind] = kernel
            self.kernels[label] = kernel
        statement.value = _call(label, leaves)
        return sorted(consumed)

    def tree(self, expression, before, definitions, leaves, consumed):
        if isinstance(expression, gast.Constant) and isinstance(
            expression.value, (int, float)
        ):
            return Node(value=expression.value)
        decoded = self.decode(expression)
        name = decoded.op.name if decoded is not None else None
        if (
            decoded is None
            or decoded.params
            or (name not in ELEMENTWISE and name not in TERNARY and name not in ALIASES)
        ):
            inner = self.absorbable(expression, before, definitions)
            if inner is not None:
                position, value = inner
                trial_leaves, trial_consumed = list(leaves), set(consumed)
                subtree = self.tree(
                    value,
                    before[:position],
                    definitions.before(position),
                    trial_leaves,
                    trial_consumed,
                )
                if subtree is not None and subtree.op is not None:
                    leaves[:] = trial_leaves
                    consumed |= trial_consumed | {position}
                    return subtree
            return _leaf(expression, leaves)
        children = []
        for argument in decoded.inputs:
            child = self.tree(argument, before, definitions, leaves, consumed)
            if child is None:
                return None
            children.append(child)
        if name in ALIASES:
            return ALIASES[name](children)
        written = isinstance(expression, (gast.BinOp, gast.UnaryOp))
        return Node(name, children, operator=written)

    def small(self, statement) -> bool:
        """Whether the value ``statement`` assigns is likely smaller than ``LARGE``
        (then so is every array it is computed from). Only speed depends on it: the
        kernel and the expression compute the same values."""
        shape = self.shapes.get(statement.targets[0].id)
        return shape is not None and math.prod(shape) < LARGE

    def absorbable(self, expression, before, definitions):
        """``(position, value)`` of a temporary's definition that may be inlined."""
        if not isinstance(expression, gast.Name):
            return None
        name = expression.id
        position = definitions.get(name)
        if position is None or self.loads.get(name) != 1 or self.stores.get(name) != 1:
            return None
        if not self.unchanged_after(self.root_before, position):
            return None  # its inputs change before the statement that would use it
        return position, before[position].value


def _outputs(match: Match, rule, target: str) -> list | None:
    """The ``(name, position)`` of the statement computing each of a rule's values
    (the last the root, ``target``): a value computed on the way to its last one is
    the name the code gave it, another one a statement of its own
    (``Match.separate``); None where one has no name of its own, or two one name."""
    if not rule.outputs:
        return [(target, match.root)]
    inside = _nodes_of(rule)
    found = []
    for value in rule.outputs[:-1]:
        if id(value) in inside:
            key = match.shared.get(id(value))  # (None: written inside an expression)
        else:
            key = match.separate(value)
        if key is None:
            return None
        found.append(key)
    names = [name for name, _ in found] + [target]
    if len(set(names)) != len(names):
        return None
    return [*found, (target, match.root)]


# id of a rule's template -> (the template, ids of its nodes): a template never
# changes
_NODES_OF_TEMPLATE: dict = {}


def _nodes_of(rule) -> set:
    """``id`` of every operator node of ``rule``'s template (its last value)."""
    template = rule.template
    known = _NODES_OF_TEMPLATE.get(id(template))
    if known is None or known[0] is not template:
        ids = {id(node) for node in template_nodes(template)}
        known = _NODES_OF_TEMPLATE[id(template)] = (template, ids)
    return known[1]


_KERNELS: dict = {}  # (tree signature, backend kind) -> its kernel


def implementation_for(rule, kind: str):
    """A rule's fused implementation on backend ``kind``: its own on the CPU, the
    CuPy kernel derived from its pattern on CUDA (None where there is none)."""
    if kind == "cpu":
        return rule.implementation
    return rule.cuda_kernel if kind == "cuda" else None


# (registrations counted when indexed, {root operator -> {tree signature with
# leaves numbered by first appearance -> (the rule with that pattern, each used
# parameter's number there, in parameter order)}}), replaced whole when rules
# change; a root's index is built the first time a tree of that root is looked up
# (a process fuses trees of a few roots: indexing every rule's pattern up front was
# a tenth of a first fusion), and added whole, so that a thread reading it never
# sees one half built
_NAMED: tuple = (-1, {})


def _own(rule) -> bool:
    """Whether an elementwise rule has an implementation of its own (a user's), which
    runs on the CPU (on CUDA, the kernel derived from its pattern does)."""
    return rule is not None and not isinstance(rule.implementation, ElementwiseKernel)


def _call(label: str, arguments: list):
    return gast.Call(
        gast.Name(label, gast.Load(), None, None), [clone(a) for a in arguments], []
    )


def _named_elementwise(signature: str) -> tuple:
    """``(rule, positions)`` for the elementwise rule whose pattern is the tree of
    ``signature`` (its leaves numbered by first appearance: ``_canonical``), where
    ``positions[p]`` is parameter ``p``'s leaf there (parameters the pattern does not
    read are left out); ``(None, ())`` where no rule's pattern is."""
    global _NAMED
    indexed, by_root = _NAMED
    if indexed != registrations():  # rules may have changed: index them again
        by_root = {}
        _NAMED = (registrations(), by_root)
    root = signature.partition("(")[0]
    index = by_root.get(root)
    if index is None:
        index = by_root[root] = _elementwise_rules_at(root)
    return index.get(signature, (None, ()))


def _elementwise_rules_at(root: str) -> dict:
    """``_named_elementwise``'s index of the elementwise rules whose pattern's
    outermost operation is ``root``."""
    from ppto.fusion.registry import RULES, elementwise_tree, in_tolerance

    index = {}
    for rule in RULES:
        template = rule.template
        if rule.kind != "elementwise" or not isinstance(template, Operator):
            continue
        if not in_tolerance(rule):
            continue
        if template.op.name != root and template.op.name not in ALIASES:
            continue  # (an alias's tree has another root: built to see which)
        pattern = elementwise_tree(template, rule.parameters)
        if pattern is None or pattern.op != root:
            continue
        signature, order = _canonical(pattern)
        positions = tuple(
            order.index(p) for p in range(len(rule.parameters)) if p in order
        )
        index[signature] = (rule, positions)  # later wins
    return index


# the elementwise operations whose two operands may be swapped without changing a
# value, bit for bit (``fuse_match.COMMUTATIVE``, by kernel tree name)
_COMMUTATIVE = frozenset(op.name for op in COMMUTATIVE)


def _canonical(tree: Node) -> tuple[str, tuple]:
    """``_signature`` of ``tree`` with a commutative operation's operands in a
    canonical order and the leaves then numbered by first appearance, and the old
    number of each new one: the same computation over the same values has one such
    signature whatever order its parameters were listed in, and whichever order a
    commutative operation's operands were written in (``a * b + c``, ``c + b * a``).
    Operands are ordered by what they compute, each leaf seen as the places it is
    read at (its paths from the root, operand positions counted under the
    non-commutative operations only): numbers, which differ with the order, play no
    part. Where two operands compute alike even so, the code's order is kept: a rule
    may then be missed, never bound wrongly (the signature is one way of writing
    the code's computation). Subtraction and division keep their order."""
    written = _signature(tree)  # (the tree, its leaves numbered as they are)
    known = _CANONICAL.get(written)
    if known is None:
        if len(_CANONICAL) >= 4096:  # (a bound: shapes of chains recur, few differ)
            _CANONICAL.clear()
        known = _CANONICAL[written] = _canonical_of(tree)
    return known


# ``_signature`` of a tree -> its ``_canonical``: sorting operands walks the tree
# three times, five times as long as writing it out (8.5 vs 1.7 us for a five-node
# tree), and a process fuses trees of the same few shapes again and again
_CANONICAL: dict = {}


def _canonical_of(tree: Node) -> tuple[str, tuple]:
    """``_canonical``, found anew."""
    places: dict = {}  # leaf -> the paths to its reads

    def read_at(node: Node, path: str) -> None:
        if node.leaf is not None:
            places.setdefault(node.leaf, []).append(path)
        elif node.op in _COMMUTATIVE:
            path = f"{path}{node.op}/"
            for child in node.children:
                read_at(child, path)
        elif node.op is not None:
            for position, child in enumerate(node.children):
                read_at(child, f"{path}{node.op}{position}/")

    read_at(tree, "")
    roles = {leaf: "|".join(sorted(paths)) for leaf, paths in places.items()}
    operands: dict = {}  # id(node) -> its children in canonical order

    def key(node: Node) -> str:
        if node.leaf is not None:
            return roles[node.leaf]
        if node.op is None:
            return repr(node.value)
        keys = [key(child) for child in node.children]
        children = node.children
        if node.op in _COMMUTATIVE and keys[0] > keys[-1]:  # (two operands)
            keys.reverse()
            children = children[::-1]
        operands[id(node)] = children
        return f"{node.op}({','.join(keys)})"

    key(tree)
    order: list = []

    def text(node: Node) -> str:
        if node.leaf is not None:
            if node.leaf not in order:
                order.append(node.leaf)
            return f"a{order.index(node.leaf)}"
        if node.op is None:
            return repr(node.value)
        return f"{node.op}({','.join(map(text, operands[id(node)]))})"

    return text(tree), tuple(order)


def _inlined(expression, before: list, consumed: set):
    """``expression`` with the temporaries defined at ``consumed`` positions of
    ``before`` (each read once, by it or by one another) written in place."""
    values = {before[p].targets[0].id: before[p].value for p in consumed}
    return _Inline(values).visit(expression)


class _Inline(trees.Transformer):
    """Reads of temporaries replaced by copies of their values (``_inlined``)."""

    def __init__(self, values: dict) -> None:
        self.values = values  # temporary's name -> its value

    def visit_Name(self, node):
        value = self.values.get(node.id)
        if value is None or not isinstance(node.ctx, gast.Load):
            return node
        return self.visit(clone(value))


def _leaf(expression, leaves: list) -> Node:
    for index, existing in enumerate(leaves):
        if same(existing, expression):
            return Node(leaf=index)
    leaves.append(expression)
    return Node(leaf=len(leaves) - 1)


def _op_names(tree: Node) -> list:
    names = []

    def walk(node):
        for child in node.children:
            walk(child)
        if node.op and node.op not in names:
            names.append(node.op)

    walk(tree)
    return names[:4]


def _signature(tree: Node, operators: bool = False) -> str:
    """The tree as text; with ``operators``, marking nodes written as Python
    operators (the same pattern, computed differently for Python numbers)."""
    if tree.leaf is not None:
        return f"a{tree.leaf}"
    if tree.op is None:
        return repr(tree.value)
    mark = "'" if operators and tree.operator else ""
    inner = ",".join(_signature(c, operators) for c in tree.children)
    return f"{tree.op}{mark}({inner})"


def fuse_program(
    functions: list,
    namespace: dict,
    shapes: dict | None = None,
    kind: str = "cpu",
    hints: dict | None = None,
    copied: bool = False,
    later: dict | None = None,
) -> tuple[list, dict]:
    """The functions with fused kernels for backend ``kind`` (``cpu`` or ``cuda``),
    and the kernels by name; ``shapes`` gives per function the shapes its values are
    known to have, ``hints`` the shapes they most likely have (``Program.size_hints``:
    they only choose between equivalent code). Regions of elementwise statements
    become chunked NumPy passes on the CPU and CUDA kernels on a GPU; rules marked
    ``before_regions`` (batch norm, convolution epilogues) are matched first.
    ``copied``: the functions are the caller's own copies, fused in place.
    ``later``: where given, regions' fallbacks (their original statements, run only
    where a region's code does not apply) are left out, unfused, and kept in it by
    name with their functions' likely shapes, for ``fuse_later``."""
    kernels: dict = {}
    fused = []
    own_rules = kind == "cpu" and any(  # (built-in ones before regions: below)
        rule.kind == "elementwise"
        and _own(rule)
        and in_tolerance(rule)
        and not (rule.builtin and rule.before_regions)
        for rule in RULES
    )
    for definition in functions:
        known = (shapes or {}).get(definition.name, {})
        likely = {**(hints or {}).get(definition.name, {}), **known}
        if own_rules:  # a region would compute them itself: they are taken first
            own = Fuser(namespace, kernels, kind, likely, own_only=True)
            definition = own.function(definition)
        if _first_rules_may_match(definition, namespace):
            first = Fuser(namespace, kernels, kind, likely, before_regions=True)
            definition = first.function(definition)
        # (a gradient's likely shape, its value's, lets a region follow it; one
        # that is not costs the region its pass: it checks its arguments' shapes)
        regions, fallbacks = fuse_regions(definition, namespace, kernels, likely, kind)
        if later is not None:
            later.update((fallback.name, (fallback, likely)) for fallback in fallbacks)
            fallbacks = []
        for function in [regions, *fallbacks]:  # new trees but the original
            fuser = Fuser(namespace, kernels, kind, likely)
            copy = function is definition and not copied
            fused.append(fuser.function(function, copy=copy))
    return fused, kernels


def fuse_later(fallback, namespace: dict, kernels: dict, kind: str, likely: dict):
    """A fallback ``fuse_program`` left in ``later``, fused in place as it would
    have fused it (new kernels added to ``kernels``)."""
    return Fuser(namespace, kernels, kind, likely).function(fallback, copy=False)


def _first_rules_may_match(definition: gast.FunctionDef, namespace: dict) -> bool:
    """Whether ``definition`` calls every operator, but those written as Python
    operators, of some rule matched before regions (along the axes the rule reduces
    along, where it names them): else none can match, and the pass is not made (it
    cost a function's fusion a third more time)."""
    called = set()
    for node in trees.walk(definition):
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name):
            op = namespace.get(node.func.id)
            called.add(op)
            if isinstance(op, OperatorDef):
                called.add((op, _axis_of(node, op)))
    for rule in RULES:
        if not rule.before_regions:
            continue
        first = _first_called_by(rule)
        if first is not _NONE_CALLED and first not in called:
            continue  # (no need of all its operators: the first is missing)
        if _operators_called_by(rule) <= called:
            return True
    return False


def _axis_of(call, op):
    """The axis a call of operator ``op`` passes, where it is a number or a tuple
    written out (else None)."""
    found = None
    for keyword in call.keywords:
        if keyword.arg == "axis":
            found = keyword.value
    names = list(getattr(op, "param_names", ()))
    if found is None and "axis" in names:
        index = len(getattr(op, "input_names", ())) + names.index("axis")
        found = call.args[index] if index < len(call.args) else None
    value = literal(found) if found is not None else None
    return value if isinstance(value, (int, tuple)) else None


# id of a rule's template -> (the template, ``_called_operators`` of it): read for
# every function fused, and a template never changes
_CALLED_BY_TEMPLATE: dict = {}


def _operators_called_by(rule) -> set:
    """``_called_operators`` of ``rule``'s template, found once."""
    return _of_template(_CALLED_BY_TEMPLATE, rule.template, _called_operators)


def _of_template(cache: dict, template, work):
    """``work(template)``, kept in ``cache`` by the template's id (with the
    template itself, so that a new template given a freed one's id is not
    answered for it)."""
    known = cache.get(id(template))
    if known is None or known[0] is not template:
        known = cache[id(template)] = (template, work(template))
    return known[1]


_NONE_CALLED = object()  # a pattern calling no operator by name
# id of a rule's template -> (the template, ``_first_called`` of it)
_FIRST_CALLED_BY_TEMPLATE: dict = {}


def _first_called_by(rule):
    """``_first_called`` of ``rule``'s template, found once."""
    return _of_template(_FIRST_CALLED_BY_TEMPLATE, rule.template, _first_called)


def _first_called(template):
    """One of ``_called_operators(template)``, found in a few of the pattern's
    nodes (the first called by name, with its literal axes where it reduces along
    some), or ``_NONE_CALLED``: a function that does not call it calls not all of
    them, and the full set, read from every node of the pattern, is needed only
    where it does (a process's first fusion read the full sets of forty rules)."""
    written = set(BINARY_OPERATORS.values())
    pending = [template]
    while pending:
        node = pending.pop()
        if not isinstance(node, Operator):
            continue
        if node.op not in written and node.op.name not in _UNARY.values():
            axis = node.params.get("axis")
            return (node.op, axis) if isinstance(axis, (int, tuple)) else node.op
        pending.extend(reversed(node.inputs))
    return _NONE_CALLED


def _called_operators(template) -> set:
    """The operators of a pattern that code calls by name (not those it writes as
    Python operators: ``a + b``, ``-a``), and ``(operator, axis)`` where the pattern
    reduces along literal axes. Each node of the pattern is read once (patterns share
    nodes)."""
    written = set(BINARY_OPERATORS.values())
    found = set()
    for node in template_nodes(template):
        if node.op not in written and node.op.name not in _UNARY.values():
            found.add(node.op)
            axis = node.params.get("axis")
            if isinstance(axis, (int, tuple)):  # (a parameter's: any axis)
                found.add((node.op, axis))
    return found


def count_operators(functions: list, namespace: dict) -> int:
    """Operator applications in generated functions (fused kernels count as one)."""
    fuser = Fuser(namespace, {})
    total = 0
    for definition in functions:
        if definition.name.endswith("_unfused"):
            continue  # a region's original statements, run only where it cannot be
        for node in trees.walk(definition):
            if isinstance(node, (gast.BinOp, gast.UnaryOp)) and fuser.decode(node):
                total += 1
            elif (
                isinstance(node, gast.Call)
                and isinstance(node.func, gast.Name)
                and (
                    fuser.decode(node) is not None or node.func.id.startswith("__fused")
                )
            ):
                total += 1
    return total
