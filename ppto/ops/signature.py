"""Operator signatures with symbolic dimensions, checked at call time.

``(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]`` binds M, K and N from the inputs' shapes
and refuses shapes that disagree. ``Tensor[...]`` takes any shape; ``[Tensor[...]]`` is
a list of tensors. Three modes refine matching: ``broadcast`` (elementwise inputs must
broadcast together), ``fill`` (the other inputs broadcast to the first one's shape,
which the result has: ``full_like``) and ``matmul`` (NumPy matmul: 1-D operands are
promoted and leading batch axes broadcast; only the two trailing axes meet the
pattern).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ppto.errors import ShapeError

_TENSOR = re.compile(r"(\[)?Tensor\[([^\]]*)\](\])?")


@dataclass(frozen=True)
class TensorPattern:
    dims: tuple[str, ...] | None  # None: any shape
    is_list: bool

    def __str__(self) -> str:
        inner = "..." if self.dims is None else ",".join(self.dims)
        text = f"Tensor[{inner}]"
        return f"[{text}]" if self.is_list else text


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorPattern, ...]
    output: str
    mode: str = ""  # "", "broadcast", "fill" or "matmul"

    @classmethod
    def parse(cls, text: str, mode: str = "") -> Signature:
        """Parse ``"(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]"``."""
        left, arrow, right = text.partition("->")
        if not arrow:
            raise ValueError(f"signature {text!r} has no '->'")
        patterns = []
        for match in _TENSOR.finditer(left):
            body = match.group(2).replace(" ", "")
            dims = None if body in ("...", "") else tuple(body.split(","))
            patterns.append(TensorPattern(dims, bool(match.group(1))))
        return cls(tuple(patterns), right.strip(), mode)

    @property
    def arity(self) -> int:
        return len(self.inputs)

    def input_text(self) -> str:
        return ", ".join(str(pattern) for pattern in self.inputs)

    def __str__(self) -> str:
        return f"({self.input_text()}) -> {self.output}"

    def check(self, op_name: str, shapes: list[tuple[int, ...]]) -> None:
        """Raise ``ShapeError`` if ``shapes`` (one per input) break the signature."""
        if self.mode == "broadcast":
            _check_broadcast(op_name, self, shapes)
            return
        if self.mode == "fill":
            _check_fill(op_name, self, shapes)
            return
        if self.mode == "matmul":
            shapes = _matmul_cores(op_name, self, shapes)
        bound: dict[str, int] = {}
        for position, (pattern, shape) in enumerate(zip(self.inputs, shapes)):
            if pattern.dims is None or pattern.is_list:
                continue
            dims = pattern.dims
            if dims[0] == "...":
                dims = dims[1:]
                if len(shape) < len(dims):
                    _fail(
                        op_name,
                        self,
                        shapes,
                        f"argument {position + 1} must have "
                        f"at least {len(dims)} axes, it has {len(shape)}",
                    )
                shape = shape[len(shape) - len(dims) :]
            elif len(shape) != len(dims):
                _fail(
                    op_name,
                    self,
                    shapes,
                    f"argument {position + 1} must have "
                    f"{len(dims)} axes, it has {len(shape)}",
                )
            for name, size in zip(dims, shape):
                if name.isdigit():
                    if int(name) != size:
                        _fail(op_name, self, shapes, f"an axis must have size {name}")
                elif bound.setdefault(name, size) != size:
                    _fail(
                        op_name,
                        self,
                        shapes,
                        f"{name} is {bound[name]} in one "
                        f"argument and {size} in another",
                    )


def _fail(op_name: str, signature: Signature, shapes, reason: str) -> None:
    shown = ", ".join(str(tuple(shape)) for shape in shapes)
    raise ShapeError(
        f"ppto.{op_name}: shapes {shown} do not match the signature {signature}: "
        f"{reason}"
    )


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast result shape, or ValueError."""
    ndim = max((len(shape) for shape in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for axis, size in enumerate(shape, start=ndim - len(shape)):
            if size != 1:
                if result[axis] not in (1, size):
                    raise ValueError(f"axis {axis - ndim}: {result[axis]} vs {size}")
                result[axis] = size
    return tuple(result)


def matmul_shape(a: tuple, b: tuple) -> tuple | None:
    """``np.matmul``'s result shape for operands of shapes ``a`` and ``b``, without
    multiplying: None where the inner sizes differ or an operand has no axis
    (ValueError where the batch axes do not broadcast)."""
    if not a or not b:
        return None
    left = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    right = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if left[-1] != right[-2]:
        return None
    batch = tuple(np.broadcast_shapes(left[:-2], right[:-2]))
    shape = batch + (left[-2], right[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return shape


def _check_broadcast(op_name, signature, shapes) -> None:
    if len(shapes) < 2:
        return
    first = shapes[0]
    if all(shape == first for shape in shapes):
        return
    try:
        broadcast_shapes(*shapes)
    except ValueError as error:
        _fail(op_name, signature, shapes, f"they do not broadcast together ({error})")


def fills(target: tuple, shape: tuple) -> bool:
    """Whether a value of ``shape`` broadcasts to ``target`` (NumPy's ``copyto``: it
    may also have leading axes of size 1)."""
    shape, target = tuple(shape), tuple(target)
    extra = max(0, len(shape) - len(target))
    if any(size != 1 for size in shape[:extra]):
        return False
    try:
        return broadcast_shapes(target, shape[extra:]) == target
    except ValueError:
        return False


def _check_fill(op_name, signature, shapes) -> None:
    target = tuple(shapes[0])
    for position, shape in enumerate(shapes[1:], start=2):
        if not fills(target, shape):
            _fail(
                op_name,
                signature,
                shapes,
                f"argument {position} must broadcast to the shape of argument 1, "
                f"{target}",
            )


def _matmul_cores(op_name, signature, shapes):
    left, right = shapes
    if len(left) == 0 or len(right) == 0:
        _fail(
            op_name, signature, shapes, "matmul needs arguments with at least one axis"
        )
    left_core = (1,) + tuple(left) if len(left) == 1 else tuple(left[-2:])
    right_core = tuple(right) + (1,) if len(right) == 1 else tuple(right[-2:])
    try:
        broadcast_shapes(tuple(left[:-2]), tuple(right[:-2]))
    except ValueError as error:
        _fail(op_name, signature, shapes, f"batch axes do not broadcast ({error})")
    return [left_core, right_core]
