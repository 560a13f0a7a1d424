"""Fused CuPy kernels: the CUDA C of an elementwise expression tree.

On a ``cuda`` device each generated elementwise kernel becomes one
``cupy.ElementwiseKernel`` (one pass over memory, no temporaries, one launch instead
of one per operator); a full sum or mean of an elementwise expression becomes one
``cupy.ReductionKernel``; a matrix product followed by an elementwise epilogue
(``relu(A @ B + b)``) is cuBLAS's product with the epilogue applied in place by a
generated kernel, and so is a convolution's (its im2col product); patterns that
reduce along an axis (softmax, layer norm) run as stages
(``ppto.fusion.cuda_staged``). The kernels are derived from the rule's pattern
itself, so they compute what the pattern says whatever a user's CPU implementation
does; a pattern of none of these shapes runs unfused on CUDA.

The generated code computes in the operands' one floating type ``T`` (float32 or
float64), as NumPy does; operands of mixed floating types, integer operands or
arithmetic on booleans take the unfused route (one CuPy call per operator), so that
NumPy's promotion rules, not C's, decide every result.
"""

from __future__ import annotations

import importlib
import math
import re
import warnings

import numpy as np

from ppto.fusion.kernels import (  # noqa: F401 (kinds are part of this API)
    OPERATORS,
    Node,
    Unsupported,
    combined_kind,
    operand_kinds,
    result_kind,
    ufunc,
)
from ppto.fusion.registry import elementwise_tree
from ppto.symbolic import Operator, Symbol

# maximum and minimum as NumPy's: NaN propagates (CUDA's fmax drops it), a tie gives
# the second operand (maximum(-0.0, 0.0) is +0.0)
PREAMBLE = """\
template <typename T> __host__ __device__ T ppto_maximum(T a, T b) {
  return (a != a || a > b) ? a : b;
}
template <typename T> __host__ __device__ T ppto_minimum(T a, T b) {
  return (a != a || a < b) ? a : b;
}
"""

SPELLINGS = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "neg": "(-{0})",
    "pow": "pow({0}, {1})",
    "square": "({0} * {0})",
    "abs": "fabs({0})",
    "arcsin": "asin({0})",
    "arccos": "acos({0})",
    "arctan": "atan({0})",
    "arctan2": "atan2({0}, {1})",
    "hypot": "hypot({0}, {1})",
    "fmod": "fmod({0}, {1})",
    "reciprocal": "(((T)1.0) / {0})",
    "maximum": "ppto_maximum<T>({0}, {1})",
    "minimum": "ppto_minimum<T>({0}, {1})",
    "greater": "({0} > {1})",
    "less": "({0} < {1})",
    "greater_equal": "({0} >= {1})",
    "less_equal": "({0} <= {1})",
    "equal": "({0} == {1})",
    "where": "({0} ? {1} : {2})",
}
FUNCTIONS = {"sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh"}
FUNCTIONS |= {"sinh", "cosh", "cbrt", "exp2", "log2", "log10"}


def expression(node: Node, names) -> str:
    """The CUDA C expression of ``node``; leaves are ``names``, constants ``T``."""
    if node.leaf is not None:
        return names[node.leaf]
    if node.op is None:
        return constant(node.value)
    return spell(node.op, [expression(child, names) for child in node.children])


def constant(value) -> str:
    """A number as a CUDA C value of type ``T`` (a boolean as ``true``/``false``)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise Unsupported(f"the constant {value!r}")
    return f"((T){number!r})"


def spell(op: str, operands: list) -> str:
    """The CUDA C of elementwise ``op`` applied to operand expressions."""
    if op in FUNCTIONS:
        return f"{op}({operands[0]})"
    if op not in SPELLINGS:
        raise Unsupported(f"the operator {op}")
    return SPELLINGS[op].format(*operands)


def parameters(kinds, prefix: str = "") -> str:
    """A parameter list: ``T a0, bool a1, ...`` (CuPy's; ``prefix`` ``const `` for a
    device function's)."""
    return ", ".join(
        f"{prefix}{'bool' if kind == 'b' else 'T'} a{number}"
        for number, kind in enumerate(kinds)
    )


def evaluate_with(xp, node: Node, arrays):
    """The value of ``node`` by one call of ``xp``'s function per operator."""
    if node.leaf is not None:
        return arrays[node.leaf]
    if node.op is None:
        return node.value
    if node.operator:  # Python's operator, as the code wrote it
        function = OPERATORS[node.op][0]
    else:
        function = getattr(xp, ufunc(node.op).__name__)
    return function(*(evaluate_with(xp, child, arrays) for child in node.children))


def cupy_module():
    """CuPy (imported where a CUDA kernel first runs)."""
    return importlib.import_module("cupy")


class CudaElementwise:
    """One elementwise tree as ``cupy.ElementwiseKernel``s, one per combination of
    operand kinds (compiled by CuPy on first use and cached on disk)."""

    def __init__(self, name: str, tree: Node, arity: int) -> None:
        self.name = name
        self.tree = tree
        self.arity = arity
        self.names = [f"a{number}" for number in range(arity)]
        self.compiled: dict = {}  # operand kinds -> kernel, or None: unfused
        self.failed = False  # set if CuPy could not compile the kernel

    def operation(self, kinds) -> tuple[str, str, str]:
        """``(in_params, out_params, body)`` for operands of ``kinds``."""
        out = "T" if result_kind(self.tree, kinds) == "f" else "bool"
        body = f"out = {expression(self.tree, self.names)}"
        return parameters(kinds), f"{out} out", body

    def listing(self) -> str:
        """The kernel as it runs for floating operands, to read."""
        try:
            in_params, out_params, body = self.operation(("f",) * self.arity)
        except Unsupported as reason:
            return f"// {self.name}: one CuPy call per operator ({reason})\n"
        header = f"// {self.name}: ElementwiseKernel('{in_params}', '{out_params}')"
        return f"{header}\n{body};\n"

    def kernel(self, arrays):
        try:
            kinds, _ = operand_kinds(arrays)
        except Unsupported:
            return None
        if kinds not in self.compiled:
            try:
                in_params, out_params, body = self.operation(kinds)
            except Unsupported:
                self.compiled[kinds] = None
            else:
                self.compiled[kinds] = cupy_module().ElementwiseKernel(
                    in_params,
                    out_params,
                    body,
                    kernel_name(self.name),
                    preamble=PREAMBLE,
                )
        return self.compiled[kinds]

    def __call__(self, *arrays, out=None):
        kernel = None if self.failed else self.kernel(arrays)
        if kernel is not None:
            extra = () if out is None else (out,)
            result = compiled_call(self, kernel, *arrays, *extra)
            if result is not None:
                return result
        # operand types C would promote otherwise (or CUDA C that failed): unfused
        return evaluate_with(cupy_module(), self.tree, arrays)


class CudaReduction:
    """The sum (or mean) of an elementwise tree as one ``cupy.ReductionKernel``: over
    every axis, or along ``axis``."""

    def __init__(
        self, name: str, tree: Node, arity: int, mean: bool, axis=None, keepdims=False
    ) -> None:
        self.elementwise = CudaElementwise(name, tree, arity)
        self.name = name
        self.mean = mean
        self.axis, self.keepdims = axis, keepdims
        self.where = {"axis": axis, "keepdims": keepdims}
        self.failed = False  # set if CuPy could not compile the kernel
        self.compiled: dict = {}

    def listing(self) -> str:
        """The kernel as it runs for floating operands, to read."""
        elementwise = self.elementwise
        try:
            in_params, map_expr = self.operation(("f",) * elementwise.arity)
        except Unsupported as reason:
            return f"// {elementwise.name}: one CuPy call per operator ({reason})\n"
        divided = ", divided by the count" if self.mean else ""
        along = "" if self.axis is None else f" along axis {self.axis}"
        return (
            f"// {elementwise.name}: ReductionKernel('{in_params}', 'T y'), the sum"
            f"{along} of{divided}\n{map_expr}\n"
        )

    def operation(self, kinds) -> tuple[str, str]:
        """``(in_params, map_expr)`` for operands of ``kinds``."""
        if result_kind(self.elementwise.tree, kinds) != "f":
            raise Unsupported("a sum of booleans or numbers")
        map_expr = expression(self.elementwise.tree, self.elementwise.names)
        return parameters(kinds), map_expr

    def kernel(self, arrays):
        try:
            kinds, _ = operand_kinds(arrays)
            if kinds not in self.compiled:
                in_params, map_expr = self.operation(kinds)
                self.compiled[kinds] = cupy_module().ReductionKernel(
                    in_params, "T y", map_expr, "a + b", "y = a", "0",
                    kernel_name(self.elementwise.name), preamble=PREAMBLE,
                )  # fmt: skip
        except Unsupported:
            return None
        return self.compiled[kinds]

    def __call__(self, *arrays):
        kernel = None if self.failed else self.kernel(arrays)
        where = self.where
        total = None
        if kernel is not None:
            total = compiled_call(self, kernel, *arrays, **where)
        if total is None:  # types C would promote otherwise, or failed C: unfused
            values = evaluate_with(cupy_module(), self.elementwise.tree, arrays)
            return values.mean(**where) if self.mean else values.sum(**where)
        if self.mean:  # divided here, as np.mean does (an empty mean is NaN): a
            # post-map step reading CuPy's indexers does not compile where CuPy runs
            # a one-input reduction by CUB, its default
            shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
            total = total / math.prod(reduced_sizes(shape, self.axis))
        return total


def reduced_sizes(shape: tuple, axis) -> list:
    """The sizes of the axes ``axis`` (None: all, an int, or a tuple) of ``shape``."""
    if axis is None:
        return list(shape)
    return [shape[a] for a in (axis if isinstance(axis, tuple) else (axis,))]


class CudaMatmulEpilogue:
    """``epilogue(A @ B, *rest)``: cuBLAS's product, then the generated elementwise
    epilogue written over it in place (the product is read once, nothing else is
    allocated). A convolution's product is ``conv2d``'s im2col matrix product on
    cuBLAS (``convolution``: its stride, padding and layout, each an argument
    position or a value)."""

    def __init__(
        self, name: str, epilogue: Node, operands, rest, convolution=None
    ) -> None:
        self.epilogue = CudaElementwise(name, epilogue, 1 + len(rest))
        self.operands = operands  # argument positions of the product's A and B
        self.rest = rest  # argument positions of the epilogue's other operands
        self.convolution = convolution

    def product(self, A, B, arguments):
        if self.convolution is None:
            return cupy_module().matmul(A, B)
        from ppto.ops.nn import conv2d

        stride, padding, layout = (
            arguments[value] if isinstance(value, Position) else value
            for value in self.convolution
        )
        return conv2d.impl(cupy_module(), A, B, stride, padding, layout)

    def __call__(self, *arguments):
        A, B = (arguments[position] for position in self.operands)
        rest = [arguments[position] for position in self.rest]
        product = self.product(A, B, arguments)
        if self.in_place(product, rest):
            return self.epilogue(product, *rest, out=product)
        return self.epilogue(product, *rest)  # a new array, unfused if need be

    def listing(self) -> str:
        """The product and its epilogue, to read."""
        epilogue = self.epilogue.listing().split("\n", 1)[1]
        product = "A @ B" if self.convolution is None else "conv2d(x, w) (im2col)"
        return (
            f"// {self.epilogue.name}: cuBLAS's a0 = {product}, then written over a0 "
            f"by ElementwiseKernel\n{epilogue}"
        )

    def in_place(self, product, rest) -> bool:
        """Whether the epilogue's result has the product's shape and type, so that it
        may be written over the product."""
        shape = np.broadcast_shapes(product.shape, *(np.shape(r) for r in rest))
        if shape != product.shape:
            return False
        try:
            kinds, _ = operand_kinds((product, *rest))
            return result_kind(self.epilogue.tree, kinds) == "f"
        except Unsupported:
            return False


# CuPy's errors for CUDA C its compilers refuse (NVRTC, jitify for CUB, nvcc)
COMPILER_ERRORS = {"CompileException", "JitifyException", "NVCCException"}


def compiled_call(owner, kernel, *arguments, **options):
    """``kernel(*arguments, **options)``, or None (with a warning, and
    ``owner.failed`` set) where CuPy cannot compile the generated CUDA C: the caller
    then runs the operators one by one. This CUDA C was compiled by nvcc and run on
    the CPU in ppto's tests, not on a GPU; a compiler that refuses it must not stop
    the user's program."""
    try:
        return kernel(*arguments, **options)
    except Exception as error:
        if type(error).__name__ not in COMPILER_ERRORS:
            raise
        owner.failed = True
        message = str(error).strip().splitlines()
        warnings.warn(
            f"ppto: the fused CUDA kernel {owner.name} did not compile "
            f"({message[0] if message else type(error).__name__}); it runs unfused "
            "(please report this)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def kernel_name(name: str) -> str:
    """A C identifier for CuPy's kernel from a rule's name, which may be any string
    (``<lambda>``); names with two underscores are the compiler's."""
    identifier = re.sub(r"_+", "_", re.sub(r"[^0-9A-Za-z_]", "_", name)).strip("_")
    return "ppto_" + identifier


def for_rule(rule):
    """The CuPy kernel of a fusion rule, derived from its pattern, or None where the
    pattern has none of the shapes above (the rule then does not apply on CUDA)."""
    from ppto.fusion.cuda_staged import staged

    template, names = rule.template, list(rule.parameters)
    if rule.outputs:  # several values: stages shared by a kernel per value
        return staged(rule)
    if rule.kind == "elementwise":
        tree = elementwise_tree(template, names)
        return CudaElementwise(rule.kernel_name, tree, len(names)) if tree else None
    op = template.op.name
    if op in ("reduce_sum", "reduce_mean") and _full_reduction(template):
        tree = elementwise_tree(template.inputs[0], names)
        if tree is None:
            return None
        return CudaReduction(rule.kernel_name, tree, len(names), op == "reduce_mean")
    return _matmul_epilogue(rule) or staged(rule)


def _full_reduction(template) -> bool:
    return template.params.get("axis") is None and not template.params.get("keepdims")


class Position(int):
    """An argument position (where a convolution's stride or padding is one)."""


def _matmul_epilogue(rule):
    """A pattern ``epilogue(dot(A, B), ...)`` (or ``conv2d(x, w, ...)``) with one
    product of two parameters: the product's operands and the epilogue's tree over
    the product (leaf 0) and the parameters it reads."""
    products = [
        node
        for node in walk(rule.template)
        if _is_op(node, "dot") or _is_op(node, "conv2d")
    ]
    if len(products) != 1 or products[0] is rule.template:
        return None
    product = products[0]
    if not all(isinstance(a, Symbol) for a in product.inputs):
        return None
    convolution = None
    if _is_op(product, "conv2d"):
        convolution = tuple(
            Position(rule.parameters.index(value.name))
            if isinstance(value, Symbol)
            else value
            for value in (product.params[p] for p in ("stride", "padding", "layout"))
        )
    elif product.params:
        return None
    names = ["<product>", *rule.parameters]
    tree = elementwise_tree(rule.template, names, {id(product): Node(leaf=0)})
    if tree is None:
        return None
    read = sorted(set(tree.leaves()) - {0})
    renumber = {0: 0, **{old: new for new, old in enumerate(read, start=1)}}
    tree = renumbered(tree, renumber)
    operands = [names.index(a.name) - 1 for a in product.inputs]
    rest = [old - 1 for old in read]
    return CudaMatmulEpilogue(rule.kernel_name, tree, operands, rest, convolution)


def walk(node):
    yield node
    if isinstance(node, Operator):
        for argument in node.inputs:
            yield from walk(argument)


def _is_op(node, name: str) -> bool:
    return isinstance(node, Operator) and node.op.name == name


def renumbered(node: Node, renumber: dict) -> Node:
    if node.leaf is not None:
        return Node(leaf=renumber[node.leaf])
    if node.op is None:
        return node
    children = [renumbered(child, renumber) for child in node.children]
    return Node(node.op, children, operator=node.operator)
