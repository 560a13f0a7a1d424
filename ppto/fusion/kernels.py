"""Fused CPU kernels for elementwise expressions.

A kernel evaluates one expression tree over its leaf arrays. Small arrays run the
plain NumPy expression (compiled once). Large ones may avoid temporaries: numexpr
(arithmetic-only trees: multithreaded, one pass, no intermediate arrays) or a NumPy
sequence over blocks of rows that worker threads claim, each block's intermediate
values written over one another and into the block of the result (``out=``; NumPy's
SIMD routines compute transcendental functions faster than numexpr). Threads do not
always pay where the code runs, so each kernel times its ways, plain NumPy's
included, on its first calls and keeps the fastest (``_Plan.run``).
"""

from __future__ import annotations

import operator
import statistics
import time

import numpy as np

from ppto.fusion.parallel import run_chunks, thread_count
from ppto.runtime.backends import where_into
from ppto.transform.emit import compile_source

try:  # numexpr is optional: without it, large kernels use the out= sequence
    import numexpr
except ImportError:  # pragma: no cover - exercised where numexpr is absent
    numexpr = None

LARGE = 1 << 15  # elements from which avoiding temporaries pays off
# a region's chunk: its few buffers stay in cache, and each ufunc call does enough
# work that the call itself costs little (512 KB measured faster than 256 KB). A
# chunk per array sized to share a core's 2 MB level 2 cache among the chain
# gradient's nine arrays (224 KB) was 10-15% faster on one thread but 20% slower on
# two: every ufunc call takes the GIL back when its loop ends, and when the other
# thread holds it, the wait costs a thread wake-up; two threads of 4096-element calls
# ran slower than one (see the commit reverting 8dfba7b)
CHUNK_BYTES = 1 << 19

# op name -> (NumPy ufunc, numexpr spelling or None, arity)
ELEMENTWISE = {
    "add": (np.add, "({0} + {1})", 2),
    "sub": (np.subtract, "({0} - {1})", 2),
    "mul": (np.multiply, "({0} * {1})", 2),
    "div": (np.true_divide, "({0} / {1})", 2),
    "neg": (np.negative, "(-{0})", 1),
    "pow": (np.power, "({0} ** {1})", 2),
    "square": (np.square, "({0} * {0})", 1),
    "abs": (np.absolute, "abs({0})", 1),
    "sqrt": (np.sqrt, "sqrt({0})", 1),
    "reciprocal": (np.reciprocal, None, 1),
    "cbrt": (np.cbrt, None, 1),
    "exp": (np.exp, None, 1),
    "log": (np.log, None, 1),
    "exp2": (np.exp2, None, 1),
    "log2": (np.log2, None, 1),
    "log10": (np.log10, None, 1),
    "log1p": (np.log1p, None, 1),
    "expm1": (np.expm1, None, 1),
    "sin": (np.sin, None, 1),
    "cos": (np.cos, None, 1),
    "tan": (np.tan, None, 1),
    "tanh": (np.tanh, None, 1),
    "sinh": (np.sinh, None, 1),
    "cosh": (np.cosh, None, 1),
    "arcsin": (np.arcsin, None, 1),
    "arccos": (np.arccos, None, 1),
    "arctan": (np.arctan, None, 1),
    "arctan2": (np.arctan2, None, 2),
    "hypot": (np.hypot, None, 2),
    "fmod": (np.fmod, None, 2),
    # as NumPy's: NaN propagates, a tie gives the second operand (signed zeros)
    "maximum": (np.maximum, "where(({0} > {1}) | ({0} != {0}), {0}, {1})", 2),
    "minimum": (np.minimum, "where(({0} < {1}) | ({0} != {0}), {0}, {1})", 2),
    "greater": (np.greater, "({0} > {1})", 2),
    "less": (np.less, "({0} < {1})", 2),
    "greater_equal": (np.greater_equal, "({0} >= {1})", 2),
    "less_equal": (np.less_equal, "({0} <= {1})", 2),
    "equal": (np.equal, "({0} == {1})", 2),
}
TERNARY = {"where": (np.where, "where({0}, {1}, {2})")}
# op name -> (Python's operator, its spelling), for nodes the code wrote with one
OPERATORS = {
    "add": (operator.add, "({0} + {1})"),
    "sub": (operator.sub, "({0} - {1})"),
    "mul": (operator.mul, "({0} * {1})"),
    "div": (operator.truediv, "({0} / {1})"),
    "pow": (operator.pow, "({0} ** {1})"),
    "neg": (operator.neg, "(-{0})"),
}
COMPARISONS = {"greater", "less", "greater_equal", "less_equal", "equal"}


def ufunc(op: str):
    """The NumPy function of an elementwise op name (``where`` included)."""
    return (ELEMENTWISE.get(op) or TERNARY[op])[0]


class Unsupported(Exception):
    """A tree or operand types a single-typed evaluation (numexpr, CUDA C) does not
    take: the caller runs the operators with NumPy's (or CuPy's) own rules instead."""


def result_kind(node: Node, kinds) -> str:
    """``'f'`` (the floating type ``T``), ``'w'`` (a Python number or constant: weak,
    it takes the arrays' type) or ``'b'`` (bool) for ``node`` over leaves of
    ``kinds``; raises ``Unsupported`` where NumPy's result type is not what C's would
    be (see ``combined_kind``): there, evaluating in one type (numexpr's, CUDA C's
    ``T``) would differ from NumPy."""
    if node.leaf is not None:
        return kinds[node.leaf]
    if node.op is None:
        return "b" if isinstance(node.value, (bool, np.bool_)) else "w"
    return combined_kind(node.op, [result_kind(c, kinds) for c in node.children])


def combined_kind(op: str, kinds: list) -> str:
    """The kind of ``op`` applied to operands of ``kinds`` (``'f'``, ``'w'``, ``'b'``).
    Raises ``Unsupported`` for arithmetic on booleans alone or with numbers only,
    ``where`` choosing between numbers, and any operation on numbers alone: NumPy's
    results there are integers, booleans or float64 (a ufunc of Python numbers is a
    strong float64), C's would be ``T``."""
    if op in COMPARISONS:
        return "b"
    values = kinds[1:] if op == "where" else kinds
    if "f" in values:
        return "f"
    if op == "where" and values == ["b", "b"]:
        return "b"
    raise Unsupported(f"{op} of {' and '.join(sorted(set(kinds)))} operands")


def operand_kinds(arrays) -> tuple[tuple, np.dtype]:
    """Per operand ``'f'``, ``'w'`` (a Python number: weak, as in NumPy, it takes the
    arrays' type) or ``'b'``, and the one floating dtype of the array operands;
    raises ``Unsupported`` otherwise."""
    kinds, dtypes = [], set()
    for value in arrays:
        if isinstance(value, (bool, np.bool_)):
            kinds.append("b")
            continue
        if type(value) in (float, int):
            kinds.append("w")
            continue
        dtype = getattr(value, "dtype", None)
        if dtype is None:
            raise Unsupported(f"an operand of type {type(value).__name__}")
        if dtype.kind == "b":
            kinds.append("b")
        elif dtype.kind == "f" and dtype.itemsize in (4, 8) and dtype.isnative:
            kinds.append("f")
            dtypes.add(dtype)
        else:
            raise Unsupported(f"an operand of dtype {dtype}")
    if len(dtypes) != 1:
        raise Unsupported("operands of no or several floating dtypes")
    return tuple(kinds), dtypes.pop()


class Node:
    """An expression tree node: an operator over children, a leaf (argument
    position) or a constant."""

    __slots__ = ("op", "children", "leaf", "value", "operator")

    def __init__(self, op=None, children=(), leaf=None, value=None, operator=False):
        self.op = op
        self.children = tuple(children)
        self.leaf = leaf
        self.value = value
        # written with Python's operator (``s * s``), not a NumPy call: for Python
        # numbers alone the result is a Python number, which NumPy treats as weak
        self.operator = operator and op in OPERATORS

    def count(self) -> int:
        return (1 if self.op else 0) + sum(child.count() for child in self.children)

    def leaves(self):
        """The leaves under this node (with repeats), left to right."""
        if self.leaf is not None:
            yield self.leaf
        for child in self.children:
            yield from child.leaves()

    def arithmetic_only(self) -> bool:
        if self.op is None:
            return True
        spelling = (
            ELEMENTWISE.get(self.op, (None, None))[1]
            or TERNARY.get(self.op, (None, None))[1]
        )
        return spelling is not None and all(c.arithmetic_only() for c in self.children)

    def numexpr(self, names, constants: list) -> str:
        """The numexpr spelling; constants become named values (``c0``, ...) so that
        they take the arrays' dtype instead of promoting float32 to float64."""
        if self.leaf is not None:
            return names[self.leaf]
        if self.op is None:
            constants.append(self.value)
            return f"c{len(constants) - 1}"
        spelling = (
            ELEMENTWISE[self.op][1] if self.op in ELEMENTWISE else TERNARY[self.op][1]
        )
        return spelling.format(
            *(child.numexpr(names, constants) for child in self.children)
        )

    def numpy(self, names) -> str:
        if self.leaf is not None:
            return names[self.leaf]
        if self.op is None:
            return repr(self.value)
        arguments = [child.numpy(names) for child in self.children]
        if self.operator:
            return OPERATORS[self.op][1].format(*arguments)
        return f"np.{ufunc(self.op).__name__}({', '.join(arguments)})"


class ElementwiseKernel:
    """One fused elementwise expression (see the module docstring)."""

    def __init__(self, name: str, tree: Node, arity: int) -> None:
        self.name = name
        self.tree = tree
        self.arity = arity
        names = [f"a{i}" for i in range(arity)]
        source = f"def {name}({', '.join(names)}):\n    return {tree.numpy(names)}\n"
        self.source = source
        scope: dict = {}
        exec(compile(source, f"<ppto fused kernel {name}>", "exec"), {"np": np}, scope)
        self.small = scope[name]
        self.plans: dict = {}  # leaf shapes -> _Plan

    def listing(self) -> str:
        """What the kernel computes, to read (large arrays: the same by numexpr or
        over row blocks)."""
        return (
            f"# {self.name}: when large, numexpr, row blocks or NumPy: the fastest\n"
            f"{self.source}"
        )

    def __call__(self, *arrays):
        for array in arrays:  # the common case, small arrays, decided quickly
            if type(array) is np.ndarray and array.size >= LARGE:
                break
        else:
            return self.small(*arrays)
        if not all(type(a) in _PLAIN or isinstance(a, np.generic) for a in arrays):
            return self.small(*arrays)  # a subclass (a masked array) keeps its rules
        shapes = tuple(np.shape(a) for a in arrays)
        plan = self.plans.get(shapes)
        if plan is None:
            plan = self.plans[shapes] = _Plan(self.tree, shapes, len(arrays))
        arrays = arrays + tuple(evaluate_numpy(node, arrays) for node in plan.hoisted)
        if plan.operations < 2 or plan.empty:
            # one operation left: NumPy's own pass is best; no element (numexpr
            # broadcasts a 0-size operand wrongly: (n,) with (0, 1) gave (0, 1))
            return evaluate_numpy(plan.tree, arrays)
        if plan.expression is None or numexpr is None:
            return plan.run(self, arrays, BLOCK_WAYS)
        dtype = _single_type(plan.tree, arrays)
        if dtype is None:  # NumPy's types differ somewhere: its own evaluation
            return plan.run(self, arrays, BLOCK_WAYS)
        return plan.run(self, arrays, NUMEXPR_WAYS, dtype)

    @staticmethod
    def by_numexpr(plan: _Plan, arrays, dtype: np.dtype):
        """The plan's tree over ``arrays`` by numexpr, every value in ``dtype``."""
        local = {}
        for number, value in enumerate(arrays):
            if isinstance(value, (np.ndarray, np.generic)):
                local[f"a{number}"] = value  # NumPy's scalars keep their type
            elif isinstance(value, bool):  # a condition stays one
                local[f"a{number}"] = np.bool_(value)
            else:  # a Python number is weak: it takes the arrays' type
                local[f"a{number}"] = dtype.type(value)
        for number, value in enumerate(plan.constants):
            local[f"c{number}"] = dtype.type(value)
        return numexpr.evaluate(plan.expression, local_dict=local)

    def in_blocks(self, tree: Node, arrays, threads: int | None = None):
        """The NumPy sequence for the tree, its intermediate values written over one
        another (``out=``) and the last straight into the result, over blocks of
        rows (axis 0) claimed by worker threads. An array operand of the result's
        rank whose first axis is the result's is cut with it; the others broadcast
        whole. (Chunks small enough to stay in cache measured slower here than
        large blocks: the ufuncs' own loops stream well.)"""
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
        if not shape or 0 in shape:
            return evaluate_numpy(tree, arrays)
        rows = shape[0]
        cut = [
            isinstance(a, np.ndarray)
            and a.ndim == len(shape)
            and a.shape[0] == rows > 1
            for a in arrays
        ]
        # the result's dtype by NumPy's own rules, from one element of each operand
        out = np.empty(shape, evaluate_numpy(tree, list(map(_sample, arrays))).dtype)
        threads = threads or thread_count()
        # a few blocks per thread, so that a thread that starts late takes fewer
        blocks = 1 if threads == 1 else min(rows, out.size // LARGE, 4 * threads)
        step = -(-rows // max(1, blocks))

        def work(claim):
            for number in iter(claim, None):
                begin, end = number * step, min(number * step + step, rows)
                leaves = [a[begin:end] if c else a for a, c in zip(arrays, cut)]
                _evaluate_into(tree, leaves, out[begin:end])

        run_chunks(work, -(-rows // step), min_chunks=1, threads=threads)
        return out


def _single_type(tree: Node, arrays) -> np.dtype | None:
    """The one dtype (float32 or float64) in which ``tree`` over ``arrays`` computes
    every value as NumPy would, for numexpr, whose constants and Python numbers take
    one type; None where NumPy's rules give another type somewhere: arrays of
    several dtypes, integers, float16 (numexpr computes it in float32), or a mask
    with numbers alone (``mask * 1.5`` is float64 in NumPy whatever the arrays);
    None too where a ``where`` has a condition of numbers (``np.where(x, a, b)``
    of a float x), which numexpr has no operation for."""
    try:
        kinds, dtype = operand_kinds(arrays)
        if result_kind(tree, kinds) != "f" or not _boolean_conditions(tree, kinds):
            return None
        return dtype
    except Unsupported:
        return None


def _boolean_conditions(node: Node, kinds) -> bool:
    """Whether every ``where`` in ``node`` has a boolean condition."""
    if node.op == "where" and result_kind(node.children[0], kinds) != "b":
        return False
    return all(_boolean_conditions(child, kinds) for child in node.children)


def _evaluate_into(tree: Node, leaves, destination) -> None:
    """``tree`` over ``leaves``, the result written into ``destination``, which also
    holds the first intermediate value: an operation on floating point operands
    writes over an operand it computed itself where shape and dtype allow (in a tree
    every value is read once), else into ``destination`` while that holds nothing
    and has the operation's dtype, else into a new array. A chain of operations so
    runs in ``destination`` alone. (Other operands, booleans say, give dtypes that
    NumPy's promotion rules do not predict: ``sin`` of a boolean is float16.)"""
    shape, dtype = destination.shape, destination.dtype
    holder = [None]  # the node whose value ``destination`` holds now

    def evaluate(node, into=None):
        if node.leaf is not None:
            return leaves[node.leaf]
        if node.op is None:
            return node.value
        values = [evaluate(child) for child in node.children]
        if holder[0] in node.children:
            holder[0] = None  # read now: overwritten below or free
        if node.op == "where":  # (np.where has no out=: where_into writes in)
            return where_into(*values, out=into)
        if into is None and node.op not in COMPARISONS and _floating(values):
            kind = np.result_type(*values)
            for value, child in zip(values, node.children):
                if child.op is not None and _writable(value, shape, kind):
                    into = value  # an operand computed here: overwrite it
                    break
            else:
                if holder[0] is None and kind == dtype:
                    into = destination
        if node.operator and all(type(v) in (float, int) for v in values):
            return OPERATORS[node.op][0](*values)  # Python numbers stay one
        value = ELEMENTWISE[node.op][0](*values, out=into)
        if value is destination:
            holder[0] = node
        return value

    evaluate(tree, destination)


def _floating(values) -> bool:
    """Every operand a floating point array or scalar, or a Python number: then the
    operation's result has NumPy's promoted dtype of its operands."""
    return all(
        type(value) in (float, int)
        or (getattr(value, "dtype", None) is not None and value.dtype.kind == "f")
        for value in values
    )


def _writable(value, shape, dtype) -> bool:
    return (
        type(value) is np.ndarray
        and value.shape == shape
        and value.dtype == dtype
        and dtype.kind == "f"
    )


def _sample(value):
    """One element of ``value`` with its dtype (a Python number stays itself, so that
    NumPy's promotion treats it as it treats the number)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.flat[:1]
    return value


class _Plan:
    """How a kernel runs for one combination of leaf shapes: subexpressions whose
    result is smaller than the output (they read only broadcast operands, such as a
    per-row scale) are computed first at their own size and become extra leaves;
    the rest runs over the full size."""

    def __init__(self, tree: Node, shapes: tuple, arity: int) -> None:
        self.trials: dict = {}  # (dtypes, threads) -> {way: seconds of its calls}
        self.chosen: dict = {}  # (dtypes, threads) -> the faster way
        self.hoisted: list[Node] = []
        full = int(np.prod(np.broadcast_shapes(*shapes)))
        self.empty = full == 0
        self.tree = self.hoist(tree, shapes, full, arity)
        self.operations = self.tree.count()
        self.constants: list = []
        names = [f"a{i}" for i in range(arity + len(self.hoisted))]
        self.expression = (
            self.tree.numexpr(names, self.constants)
            if self.tree.arithmetic_only()
            else None
        )

    def run(self, kernel, arrays, ways: tuple, dtype: np.dtype | None = None):
        """The tree over ``arrays`` by the fastest of ``ways`` that give the same
        numbers (a NaN's sign bit aside: SIMD and scalar loops may differ there):
        ``kernel.in_blocks`` (threads, intermediate values written in place),
        numexpr (its own threads, one pass; every value in ``dtype``) and plain
        NumPy (a new array per operation). Which is faster depends on the
        machine, the dtype and the other work in flight (on a 2-core virtual machine
        blocks won for float64 and lost for float32 at a million elements; numexpr's
        threads meet at a barrier, and right after a BLAS product, whose threads
        spin on a core a while, ``dy * 2 * x`` over 2 ** 17 float64 elements took
        13 ms by numexpr and 0.1 ms by NumPy), so ``TRIALS`` calls of each, after
        its first, are timed (where the code runs: after what it follows) and the
        fastest kept, separately for each combination of dtypes and thread count.
        Threads must win by a margin: what they write is left in several cores'
        caches, which slows whatever reads it next (a float32 ``exp(x - peak)``
        timed 0.70 ms in blocks and 0.72 ms by NumPy, but the product reading it
        took 0.35 ms instead of 0.24). ``ppto.fusion.tuning`` then times the whole
        fused function against the unfused one, which sees that cost too."""
        threads = thread_count()
        key = (tuple(getattr(a, "dtype", type(a)) for a in arrays), threads, ways)
        way = self.chosen.get(key)
        if way is not None:
            return _WAYS[way](kernel, self, arrays, threads, dtype)
        times = self.trials.setdefault(key, {way: [] for way in ways})
        way = min(times, key=lambda name: len(times[name]))  # the one tried least
        start = time.perf_counter()
        result = _WAYS[way](kernel, self, arrays, threads, dtype)
        times[way].append(time.perf_counter() - start)
        if all(len(seconds) > TRIALS for seconds in times.values()):
            self.chosen[key] = faster_way(times)
        return result

    def hoist(self, node: Node, shapes: tuple, full: int, arity: int) -> Node:
        if node.op is None:
            return node
        if int(np.prod(_shape(node, shapes))) < full:
            self.hoisted.append(node)
            return Node(leaf=arity + len(self.hoisted) - 1)
        children = [self.hoist(c, shapes, full, arity) for c in node.children]
        return Node(node.op, children, operator=node.operator)


def faster_way(times: dict) -> str:
    """The way to keep, from each way's timed calls (see ``_Plan.run``): the fastest
    threaded one where it beats NumPy's by the margin, else NumPy's. The first call
    of each is left out: it pays for fresh memory and threads starting."""
    medians = {way: statistics.median(seconds[1:]) for way, seconds in times.items()}
    plain = medians.pop("numpy")
    threaded = min(medians, key=medians.get)
    return threaded if medians[threaded] < THREADS_MARGIN * plain else "numpy"


_PLAIN = (np.ndarray, float, int)  # operand types the large paths take
TRIALS = 3  # timed calls of each way, after a first one, before a plan keeps one
THREADS_MARGIN = 0.85  # threads are kept only if this much faster (see _Plan.run)
_WAYS = {
    "numexpr": lambda kernel, plan, arrays, threads, dtype: kernel.by_numexpr(
        plan, arrays, dtype
    ),
    "blocks": lambda kernel, plan, arrays, threads, dtype: kernel.in_blocks(
        plan.tree, arrays, threads
    ),
    "numpy": lambda kernel, plan, arrays, threads, dtype: evaluate_numpy(
        plan.tree, arrays
    ),
}
# the ways a kernel tries, the first one on its first call: blocks, which writes
# nothing but the result, as numexpr does, without numexpr's first-use costs
# (compiling the expression, 0.4 ms, and starting its own threads); plain NumPy,
# which writes a new array per operation, last
NUMEXPR_WAYS = ("blocks", "numexpr", "numpy")
BLOCK_WAYS = ("blocks", "numpy")


def _shape(node: Node, shapes: tuple) -> tuple:
    if node.leaf is not None:
        return shapes[node.leaf]
    if node.op is None:
        return ()
    return np.broadcast_shapes(*(_shape(child, shapes) for child in node.children))


def evaluate_numpy(node: Node, arrays):
    """The value of ``node`` by plain NumPy calls (Python's operators where the code
    used them)."""
    if node.leaf is not None:
        return arrays[node.leaf]
    if node.op is None:
        return node.value
    function = OPERATORS[node.op][0] if node.operator else ufunc(node.op)
    return function(*(evaluate_numpy(child, arrays) for child in node.children))


class Fallback:
    """A region's ``fallback``: its original statements as a function, run where
    its fused code does not apply. Set once the program is compiled, or made on
    first use (``make_fallback``, see ``lower``): most programs never run it, and
    fusing and compiling it cost a tenth of a first call's time."""

    _fallback = None
    make_fallback = None  # (no arguments) -> the function, where it is made late

    @property
    def fallback(self):
        function = self._fallback
        # (read once: another thread first running it may clear it after it set
        # _fallback, between a test of make_fallback and its call)
        make = self.make_fallback
        if function is None and make is not None:
            function = self._fallback = make()  # (made once: see lower)
            self.make_fallback = None
        return function if function is not None else self._fallback

    @fallback.setter
    def fallback(self, function) -> None:
        self._fallback = function
        self.make_fallback = None


class RegionKernel(Fallback):
    """A compiled region: calls the chunked pass, or ``fallback`` (the original
    statements as a function) where the pass does not apply."""

    def __init__(self, name: str, source: str, fallback_name: str) -> None:
        self.name = name
        self.source = source
        self.fallback_name = fallback_name
        scope = {
            "np": np,
            "layout": region_layout,
            "rows_layout": rows_layout,
            "CHUNK_BYTES": CHUNK_BYTES,
            "run_chunks": run_chunks,
            "where_into": where_into,
        }
        self.run = compile_source(source, name, scope, f"fused region {name}")

    def listing(self) -> str:
        """The chunked pass, to read."""
        return self.source

    def __call__(self, *arguments):
        result = self.run(*arguments)
        return self.fallback(*arguments) if result is None else result


def region_layout(arguments, kinds: str = "") -> tuple | None:
    """``(shape, dtype)`` when every array argument is a NumPy array of that one shape
    and floating dtype (0-d arrays and NumPy scalars of the dtype, which ufuncs of 0-d
    arrays give, and Python numbers may join them) and the shape has at least
    ``LARGE`` elements; else None. ``kinds``: ``s`` where an argument must be 0-d or
    a number (the pass broadcasts it as one)."""
    found = shared_layout(arguments, _numpy_value)
    if found is None or int(np.prod(found[0])) < LARGE:
        return None
    if any(k == "s" and np.ndim(a) for a, k in zip(arguments, kinds)):
        return None
    return found


def rows_layout(arguments, kinds: str) -> tuple | None:
    """``(shape, dtype)`` for a pass over the rows of arrays of ``shape`` (at least
    2-d, ``LARGE`` elements): the arguments of kind ``f`` are arrays of that shape
    or 0-d or numbers (an input whose shape was not known: the pass itself refuses
    the values it would compute as full rows from such alone), those of kind ``r``
    arrays of that shape with the last axis 1, those of kind ``c`` arrays of the
    last axis's shape (read whole by every block), those of kind ``s`` 0-d or
    numbers; one floating dtype. Else None."""
    full = [a for a, k in zip(arguments, kinds) if k == "f" and np.ndim(a)]
    found = shared_layout(full, _numpy_value)
    if found is None or len(found[0]) < 2 or int(np.prod(found[0])) < LARGE:
        return None
    shape, dtype = found
    expected = {"f": shape, "r": shape[:-1] + (1,), "c": shape[-1:]}
    for value, kind in zip(arguments, kinds):
        if kind in "fs" and (type(value) is float or type(value) is int):
            continue
        if not _numpy_value(value) or value.dtype != dtype:
            return None
        if kind in "rc" and type(value) is not np.ndarray:
            return None
        if (value.ndim or kind in "rc") and value.shape != expected.get(kind):
            return None
    return found


def _numpy_value(value) -> bool:
    return type(value) is np.ndarray or isinstance(value, np.floating)


def shared_layout(arguments, accepted) -> tuple | None:
    """``(shape, dtype)`` when every argument that is not a Python number is an array
    ``accepted`` takes, all of one floating dtype and one shape (0-d arrays aside);
    else None."""
    shape = dtype = None
    for value in arguments:
        kind = type(value)
        if kind is float or kind is int:
            continue
        if not accepted(value) or value.dtype.kind != "f":
            return None
        if dtype is None:
            dtype = value.dtype
        elif value.dtype != dtype:
            return None
        if value.ndim:
            if shape is None:
                shape = value.shape
            elif value.shape != shape:
                return None
    return None if shape is None else (shape, dtype)
