"""Random NumPy programs written as Python source, for differential testing of the
transpiler: ``source(seed)`` is the text of a module defining ``f(x, y, W, s)`` (and
the helpers it calls), a function of float arrays and a Python float returning a
number. The generator knows the shape of every value it names, so each program is
valid NumPy; domains are kept valid by construction (``log`` of ``1 + exp``, ``sqrt``
of ``u * u + 1``, divisions by ``u * u + 1``). The same seed gives the same program
and the same arguments.

What a program may contain is what SPEC.md lets a body use: elementwise ufuncs,
broadcasting between scalars, vectors, matrices and size-1 axes, reductions with
``axis``/``keepdims``, ``@``, subscripts read and written (``z[i] = ...``, ``+=``),
reshape and transpose, ``np.concatenate``/``np.stack``, ``if``/``elif``/``else`` on
data and on shapes, conditional expressions, ``for`` and ``while`` loops carrying
state, ``break``/``continue``, early returns, helper functions, tuple unpacking and
lists appended in loops.
"""

from __future__ import annotations

import random

import numpy as np

from tests.fuzz.features import Features
from tests.fuzz.idioms import Idioms
from tests.fuzz.trees import (
    TREE_PRODUCT,
    copy_leaves,
    pytree_argument,
    pytree_layout,
)

N, M = 3, 4  # the two axis lengths: x is (M,) or (N, M), W is (M, N)
VECTOR_PROBABILITY = 0.5  # of programs without early returns
IDIOMS_FROM = 100_000  # programs of seeds from here on draw idioms.py's makers too

# Elementwise forms of one value ``{0}``, valid for any real input.
UNARY = [
    "np.tanh({0})",
    "np.sin({0})",
    "np.cos({0})",
    "np.exp(np.tanh({0}))",
    "np.exp(-{0} * {0})",
    "np.log(1.0 + np.exp({0}))",
    "np.log1p({0} * {0})",
    "np.sqrt({0} * {0} + 1.0)",
    "np.square({0})",
    "{0} ** 2",
    "{0} ** 3",
    "np.abs({0})",
    "np.maximum({0}, 0.0)",
    "np.minimum({0}, 0.5)",
    "1.0 / (1.0 + np.exp(-{0}))",
    "-{0}",
    "np.arctan({0})",
    "np.sinh({0}) * 0.5",
    "np.clip({0}, -0.5, 0.5)",
    "np.where({0} > 0, {0}, 0.1 * {0})",
    "np.log(np.abs({0}) + 1.0)",
    "np.expm1(np.tanh({0}))",
    "{0} / ({0} * {0} + 1.0)",
    "2.0 * {0} - 1.0",
]
# Elementwise forms of two values that broadcast together.
BINARY = [
    "{0} + {1}",
    "{0} - {1}",
    "{0} * {1}",
    "{0} / ({1} * {1} + 1.0)",
    "np.maximum({0}, {1})",
    "np.minimum({0}, {1})",
    "np.where({0} > {1}, {0}, {1} * 0.5)",
    "np.arctan2({0}, {1} * {1} + 1.0)",
    "{0} * np.tanh({1})",
    "np.hypot({0}, {1})",
    "({0} > {1}) * {0}",
]
REDUCTIONS = ["np.sum", "np.mean", "np.max", "np.min"]
SCALAR_REDUCTIONS = [
    "np.sum({0})",
    "np.mean({0})",
    "np.max({0})",
    "{0}.sum()",
    "np.sum({0} * {0})",
    "np.linalg.norm({0})",
    "np.prod(np.tanh({0}) * 0.5 + 1.0)",
]
PARAMETERS = ("x", "y", "W", "s")


def broadcast(*shapes: tuple) -> tuple:
    return tuple(np.broadcast_shapes(*shapes))


class Writer(Features, Idioms):
    """Writes one function's body: ``values`` maps each name in scope to its
    shape; ``fresh`` holds the names bound to arrays of their own (written in place
    without changing another value)."""

    def __init__(self, rng: random.Random, values: dict, module: Module, depth=0):
        self.rng = rng
        self.values = dict(values)
        self.fresh: set = set()
        self.lines: list[str] = []
        self.module = module
        self.depth = depth
        self.indent = 1

    # --- names and picks ---

    def new_name(self, stem="t") -> str:
        return self.module.new_name(stem)

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def pick(self, accept=lambda shape: True) -> str | None:
        names = [n for n, shape in self.values.items() if accept(shape)]
        return self.rng.choice(sorted(names)) if names else None

    def array(self) -> str:
        return self.pick(lambda shape: len(shape) > 0) or "x"

    def partner(self, shape: tuple) -> str:
        """A value that broadcasts against ``shape`` without growing it (or a
        literal)."""

        def fits(other):
            try:
                return broadcast(shape, other) == shape
            except ValueError:
                return False

        name = self.pick(fits)
        if name is None or self.rng.random() < 0.1:
            return repr(round(self.rng.uniform(-1.5, 1.5), 2))
        return name

    # --- expressions of a given shape ---

    def elementwise(self, shape: tuple, depth=2, base=None) -> str:
        """An expression of shape ``shape`` built from ``base`` (by default some
        value of that shape in scope) and other values."""
        base = base or self.pick(lambda s: s == shape)
        if base is None:
            base = self.reshaped_to(shape)
        text = base
        for _ in range(self.rng.randint(1, depth)):
            if self.rng.random() < 0.55:
                text = self.rng.choice(UNARY).format(
                    f"({text})" if " " in text else text
                )
            else:
                other = self.partner(shape)
                left, right = (
                    (text, other) if self.rng.random() < 0.7 else (other, text)
                )
                text = self.rng.choice(BINARY).format(
                    f"({left})" if " " in left else left,
                    f"({right})" if " " in right else right,
                )
        return text

    def reshaped_to(self, shape: tuple) -> str:
        """Some value in scope brought to ``shape`` (a reduction, a broadcast)."""
        if shape == ():
            return self.rng.choice(SCALAR_REDUCTIONS).format(self.array())
        size = int(np.prod(shape))
        same_size = self.pick(lambda s: len(s) > 0 and int(np.prod(s)) == size)
        if same_size is not None and self.rng.random() < 0.5:
            return f"{same_size}.reshape{shape}"
        small = self.pick(lambda s: _broadcasts_to(s, shape))
        if small is not None:
            return f"np.broadcast_to({small}, {shape})"
        return f"np.ones({shape}) * np.sum({self.array()})"

    # --- statements ---

    def statement(self) -> None:
        """One statement (or a block) binding new names; a helper's body (depth 1)
        neither returns early nor calls helpers."""
        top = self.depth == 0
        makers = [
            (self.assign_elementwise, 6),
            (self.assign_broadcast, 3),
            (self.assign_reduction, 3),
            (self.assign_matmul, 2),
            (self.assign_subscript_read, 3),
            (self.assign_shape_op, 2),
            (self.assign_join, 2),
            (self.subscript_write, 2),
            (self.augmented, 2),
            (self.if_on_data, 2),
            (self.if_on_shape, 1),
            (self.conditional_expression, 1),
            (self.for_loop, 2),
            (self.while_loop, 1),
            (self.list_loop, 1),
            (self.tuple_unpacking, 1),
            (self.helper_call, 1 if top else 0),
            (self.early_return, 1 if top else 0),
            (self.row_loop, 1),
            (self.writes_in_loop, 1),
            (self.comprehension, 1),
            (self.assign_numpy_extra, 1),
            (self.assign_linalg, 1),
            (self.assign_order_statistic, 1),
            (self.assign_nan_reduction, 0.5),
            (self.assign_contraction, 1),
            (self.local_function, 1),
            (self.passed_callable, 0.5),
        ]
        if self.module.idioms:
            makers += [
                (self.assign_masked, 2),
                (self.assign_clip_chain, 2),
                (self.assign_batched_matmul, 1),
                (self.assign_integer_index, 2),
                (self.assign_normalised, 2),
                (self.data_while, 1),
                (self.list_of_arrays, 1),
                (self.assign_shape_mix, 2),
                (self.empty_filled, 1),
            ]
        make = self.rng.choices([m for m, _ in makers], [w for _, w in makers])[0]
        make()

    def bind(self, name: str, shape: tuple, fresh=True) -> None:
        self.values[name] = shape
        (self.fresh.add if fresh else self.fresh.discard)(name)

    def assign_elementwise(self) -> None:
        shape = self.values[self.array()] if self.rng.random() < 0.8 else ()
        name = self.new_name()
        self.emit(f"{name} = {self.elementwise(shape)}")
        self.bind(name, shape)

    def assign_broadcast(self) -> None:
        a = self.array()
        b = self.pick(lambda s: _broadcastable(s, self.values[a]))
        shape = broadcast(self.values[a], self.values[b])
        op = self.rng.choice(BINARY)
        name = self.new_name()
        self.emit(f"{name} = {op.format(a, b)}")
        self.bind(name, shape)

    def assign_reduction(self) -> None:
        a = self.array()
        shape = self.values[a]
        name = self.new_name()
        if self.rng.random() < 0.3:
            self.emit(f"{name} = {self.rng.choice(SCALAR_REDUCTIONS).format(a)}")
            self.bind(name, ())
            return
        axis = self.rng.randrange(-len(shape), len(shape))
        keepdims = self.rng.random() < 0.4
        reduce = self.rng.choice(REDUCTIONS)
        if self.rng.random() < 0.3:  # the method spelling
            method = reduce.removeprefix("np.")
            text = f"{a}.{method}(axis={axis}" + (
                ", keepdims=True)" if keepdims else ")"
            )
        else:
            text = f"{reduce}({a}, axis={axis}" + (
                ", keepdims=True)" if keepdims else ")"
            )
        kept = list(shape)
        if keepdims:
            kept[axis] = 1
        else:
            del kept[axis]
        self.emit(f"{name} = {text}")
        self.bind(name, tuple(kept))

    def assign_matmul(self) -> None:
        forms = []
        for a, sa in sorted(self.values.items()):
            for b, sb in sorted(self.values.items()):
                if len(sa) == 2 and len(sb) in (1, 2) and sa[1] == sb[0]:
                    forms.append((f"{a} @ {b}", sa[:1] + sb[1:]))
                if len(sa) == 1 and len(sb) == 2 and sa[0] == sb[0]:
                    forms.append((f"{a} @ {b}", sb[1:]))
                if len(sa) == 2 and len(sb) == 2 and sa[0] == sb[0]:
                    forms.append((f"{a}.T @ {b}", (sa[1], sb[1])))
                if len(sa) == 1 and len(sb) == 1 and sa == sb and a < b:
                    forms.append((f"np.dot({a}, {b})", ()))
                    forms.append((f"np.outer({a}, {b})", sa + sb))
        self.assign_one_of(forms)

    def assign_one_of(self, forms: list) -> None:
        """A new name bound to one of ``forms`` (pairs of text and shape) drawn at
        random; an elementwise step where there is none."""
        if not forms:
            return self.assign_elementwise()
        text, shape = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        self.bind(name, shape)

    def assign_subscript_read(self) -> None:
        a = self.array()
        shape = self.values[a]
        n = shape[0]
        forms = [
            (f"{a}[{self.rng.randrange(n)}]", shape[1:]),
            (f"{a}[-1]", shape[1:]),
            (f"{a}[1:]", (n - 1,) + shape[1:]),
            (f"{a}[::-1]", shape),
            (f"{a}[:{n - 1}]", (n - 1,) + shape[1:]),
            (f"{a}[::2]", ((n + 1) // 2,) + shape[1:]),
            (f"{a}[[0, {n - 1}, 0]]", (3,) + shape[1:]),
            (f"{a}[None]", (1,) + shape),
            (f"np.sum({a}[{a} > 0])", ()),
        ]
        if n < 2:
            forms = [forms[0], forms[1], forms[3], forms[7]]
        if len(shape) == 2:
            m = shape[1]
            forms += [
                (f"{a}[:, {self.rng.randrange(m)}]", (n,)),
                (f"{a}[:, 1:]", (n, m - 1)),
                (f"{a}[..., ::-1]", shape),
                (f"{a}[:, None, :]", (n, 1, m)),
                (f"{a}[{self.rng.randrange(n)}, {self.rng.randrange(m)}]", ()),
                (f"{a}[:, :, None]", (n, m, 1)),
            ]
            if m < 2:
                forms = [f for f in forms if ":, 1:]" not in f[0]]
        self.assign_view(a, forms)

    def assign_view(self, base: str, forms: list) -> None:
        """One of ``forms`` (text, shape), each a view of ``base``, named."""
        text, result = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        self.bind(name, result, fresh=False)
        self.fresh.discard(base)  # a view of it now exists: writing into it is refused

    def assign_shape_op(self) -> None:
        a = self.array()
        shape = self.values[a]
        size = int(np.prod(shape))
        forms = [(f"{a}.reshape(-1)", (size,)), (f"{a}.ravel()", (size,))]
        if len(shape) == 2:
            forms += [
                (f"{a}.T", shape[::-1]),
                (f"np.transpose({a})", shape[::-1]),
                (f"{a}.reshape({shape[1]}, {shape[0]})", shape[::-1]),
                (f"np.expand_dims({a}, 1)", (shape[0], 1, shape[1])),
            ]
            if shape[0] == 1:
                forms.append((f"np.squeeze({a}, axis=0)", shape[1:]))
            if shape[1] == 1:
                forms.append((f"{a}[:, 0]", shape[:1]))
        if len(shape) == 1:
            forms += [
                (f"{a}.reshape(1, -1)", (1, size)),
                (f"{a}.reshape(-1, 1)", (size, 1)),
                (f"np.expand_dims({a}, 0)", (1, size)),
            ]
        if len(shape) == 3:
            forms += [
                (f"np.transpose({a}, (1, 0, 2))", (shape[1], shape[0], shape[2])),
                (
                    f"{a}.reshape({shape[0] * shape[1]}, {shape[2]})",
                    (shape[0] * shape[1], shape[2]),
                ),
            ]
        self.assign_view(a, forms)

    def assign_join(self) -> None:
        a = self.array()
        shape = self.values[a]
        b = self.pick(lambda s: s == shape)
        name = self.new_name()
        if self.rng.random() < 0.5:
            axis = self.rng.randrange(len(shape) + 1)
            self.emit(
                f"{name} = np.stack([{a}, {self.elementwise(shape, 1)}], axis={axis})"
            )
            result = shape[:axis] + (2,) + shape[axis:]
        else:
            axis = self.rng.randrange(len(shape))
            others = [
                n
                for n, s in sorted(self.values.items())
                if len(s) == len(shape)
                and s[:axis] + s[axis + 1 :] == shape[:axis] + shape[axis + 1 :]
            ]
            c = self.rng.choice(others)
            joined = [a, c] if self.rng.random() < 0.5 else [a, b, c]
            self.emit(f"{name} = np.concatenate([{', '.join(joined)}], axis={axis})")
            total = sum(self.values[j][axis] for j in joined)
            result = shape[:axis] + (total,) + shape[axis + 1 :]
        self.bind(name, result)

    def subscript_write(self) -> None:
        a = self.array()
        shape = self.values[a]
        name = self.new_name("z")
        start = self.rng.choice(
            [
                f"np.zeros_like({a})",
                f"{a}.copy()",
                f"np.zeros({shape})",
                f"np.array({a})",
            ]
        )
        self.emit(f"{name} = {start}")
        self.bind(name, shape)
        for _ in range(self.rng.randint(1, 3)):
            self.write_into(name, shape)

    def write_into(self, name: str, shape: tuple) -> None:
        n = shape[0]
        i = self.rng.randrange(n)
        forms = [(f"{name}[{i}]", shape[1:]), (f"{name}[1:]", (n - 1,) + shape[1:])]
        if len(shape) == 2:
            forms += [
                (f"{name}[:, {self.rng.randrange(shape[1])}]", (n,)),
                (f"{name}[{i}, {self.rng.randrange(shape[1])}]", ()),
                (f"{name}[:, :2]", (n, min(2, shape[1]))),
                (f"{name}[..., -1]", (n,)),
            ]
        forms += [
            (f"{name}[[0, 0]]", (2,) + shape[1:]),  # NumPy writes once, not twice
            (f"{name}[::-1]", shape),
            (f"{name}[{name} > 0.1]", ()),
        ]
        target, part = self.rng.choice(forms)
        operator = self.rng.choice(["=", "=", "+=", "*=", "-="])
        self.emit(f"{target} {operator} {self.elementwise(part, 2)}")

    def augmented(self) -> None:
        names = [n for n in sorted(self.fresh) if n in self.values]
        if self.rng.random() < 0.1:  # another name sees the change: refuse or follow
            names = [n for n in sorted(self.values) if n != "s"]
        if not names:
            return self.assign_elementwise()
        name = self.rng.choice(names)
        shape = self.values[name]
        operator = self.rng.choice(["+=", "-=", "*="])
        self.emit(f"{name} {operator} {self.elementwise(shape, 2)}")

    def condition(self) -> str:
        a = self.pick()
        threshold = round(self.rng.uniform(-0.5, 0.5), 2)
        test = self.rng.choice(
            ["np.sum({0})", "np.mean({0})", "np.max({0})", "{0}.sum()"]
        )
        if self.values[a] == ():
            test = "{0}"
        comparison = self.rng.choice([">", "<"])
        text = f"{test.format(a)} {comparison} {threshold}"
        scalar = self.pick(lambda s: s == ())
        if scalar is not None and self.rng.random() < 0.15:
            text = f"{text} and {scalar} > -1.0"
        return text

    def branches(self, tests: list[str]) -> None:
        """``if``/``elif``/``else`` binding one name of one shape in every branch."""
        shape = self.values[self.pick()]
        name = self.new_name()
        for number, test in enumerate(tests):
            keyword = "if" if number == 0 else "elif"
            self.emit(f"{keyword} {test}:")
            self.indent += 1
            self.emit(f"{name} = {self.elementwise(shape)}")
            self.indent -= 1
        self.emit("else:")
        self.indent += 1
        self.emit(f"{name} = {self.elementwise(shape)}")
        self.indent -= 1
        self.bind(name, shape)

    def if_on_data(self) -> None:
        self.branches([self.condition() for _ in range(self.rng.randint(1, 2))])

    def if_on_shape(self) -> None:
        a = self.array()
        test = self.rng.choice(
            [f"{a}.ndim == 2", f"{a}.shape[0] > 2", f"len({a}) == {N}", f"{a}.size > 5"]
        )
        self.branches([test])

    def conditional_expression(self) -> None:
        shape = self.values[self.pick()]
        name = self.new_name()
        self.emit(
            f"{name} = {self.elementwise(shape, 1)} if {self.condition()} "
            f"else {self.elementwise(shape, 1)}"
        )
        self.bind(name, shape)

    def carried(self) -> tuple[str, tuple]:
        """A fresh name holding a copy of some value, for a loop to carry."""
        a = self.pick()
        shape = self.values[a]
        name = self.new_name("h")
        self.emit(f"{name} = {a} * 1.0")
        self.bind(name, shape)
        return name, shape

    def loop_body(self, carried: str, shape: tuple, counter: str, count: int) -> None:
        step = self.elementwise(
            shape, 2, base=carried if self.rng.random() < 0.7 else None
        )
        rows = [
            n for n, s in sorted(self.values.items()) if len(s) >= 1 and s[0] >= count
        ]
        if rows and self.rng.random() < 0.4:
            row = self.rng.choice(rows)
            part = self.values[row][1:]
            if _broadcastable(part, shape) and broadcast(part, shape) == shape:
                step = f"{step} + 0.5 * {row}[{counter}]"
        self.emit(
            f"{carried} = np.tanh({step})"
            if self.rng.random() < 0.5
            else f"{carried} = 0.5 * {carried} + 0.5 * {step}"
        )
        inner = self.rng.random()
        if inner < 0.15 and self.indent < 4:
            counter = self.new_name("i")
            self.emit(f"for {counter} in range(2):")
            self.indent += 1
            self.emit(
                f"{carried} = 0.5 * {carried} + 0.5 * {self.elementwise(shape, 1)}"
            )
            self.indent -= 1
        elif inner < 0.3 and self.depth == 0 and shape != ():
            helper, results = self.module.helper([shape], self.depth + 1)
            names = [self.new_name() for _ in results]
            self.emit(f"{', '.join(names)} = {helper}({carried})")
            fitting = [n for n, s in zip(names, results) if _broadcasts_to(s, shape)]
            if fitting:
                self.emit(f"{carried} = 0.5 * {carried} + 0.5 * np.tanh({fitting[0]})")
        jump = self.rng.random()
        if jump < 0.2:
            self.emit(f"if {counter} == {self.rng.randrange(count)}:")
            self.emit("    continue")
            self.emit(f"{carried} = {carried} * 0.9")
        elif jump < 0.4:
            self.emit(f"if {self.condition_on(carried)}:")
            self.emit("    break")
        elif jump < 0.5 and self.depth == 0:
            self.emit(f"if {self.condition_on(carried)}:")
            self.emit(f"    return np.sum({carried} * {carried})")

    def condition_on(self, name: str) -> str:
        test = (
            "{0}"
            if self.values[name] == ()
            else self.rng.choice(["np.sum({0})", "np.max({0})"])
        )
        return f"{test.format(name)} > {round(self.rng.uniform(0.0, 2.0), 2)}"

    def for_loop(self) -> None:
        carried, shape = self.carried()
        count = self.rng.randint(1, 4)
        counter = self.new_name("i")
        self.emit(f"for {counter} in range({count}):")
        self.indent += 1
        self.loop_body(carried, shape, counter, count)
        self.indent -= 1

    def while_loop(self) -> None:
        carried, shape = self.carried()
        counter = self.new_name("k")
        count = self.rng.randint(1, 4)
        self.emit(f"{counter} = 0")
        test = f"{counter} < {count}"
        if self.rng.random() < 0.4:
            test += f" and {self.condition_on(carried).replace('>', '<')}"
        self.emit(f"while {test}:")
        self.indent += 1
        self.emit(f"{counter} += 1")  # first: a continue must not skip it
        self.loop_body(carried, shape, f"({counter} - 1)", count)
        self.indent -= 1

    def row_loop(self) -> None:
        """A loop over an array's rows (``enumerate`` or not), carrying a sum."""
        a = self.pick(lambda s: len(s) >= 1)
        shape = self.values[a][1:]
        total = self.new_name("acc")
        row = self.new_name("r")
        self.emit(f"{total} = 0.0")
        if self.rng.random() < 0.5:
            counter = self.new_name("j")
            self.emit(f"for {counter}, {row} in enumerate({a}):")
            weight = f" * ({counter} + 1)"
        else:
            self.emit(f"for {row} in {a}:")
            weight = ""
        self.indent += 1
        self.values[row] = shape
        step = self.elementwise(shape, 2, base=row)
        self.emit(f"{total} = {total} + np.sum({step}){weight}")
        if self.rng.random() < 0.3:
            self.emit(f"if {total} > {round(self.rng.uniform(0.5, 3.0), 2)}:")
            self.emit("    break")
        del self.values[row]
        self.indent -= 1
        self.bind(total, ())

    def writes_in_loop(self) -> None:
        """An array filled (or accumulated into) row by row in a loop."""
        a = self.pick(lambda s: len(s) >= 1)
        shape = self.values[a]
        name = self.new_name("z")
        self.emit(f"{name} = {self.rng.choice(['np.zeros_like', 'np.ones_like'])}({a})")
        counter = self.new_name("i")
        self.emit(f"for {counter} in range({shape[0]}):")
        self.indent += 1
        operator = self.rng.choice(["=", "+=", "*="])
        carried = self.rng.random() < 0.4 and shape[0] > 1
        value = self.elementwise(shape[1:], 1)
        if carried:  # row i reads row i - 1 of the array being written
            value = f"{value} + 0.5 * {name}[{counter} - 1]"
        self.emit(f"{name}[{counter}] {operator} {value} * {a}[{counter}]")
        self.indent -= 1
        self.bind(name, shape)

    def comprehension(self) -> None:
        a = self.pick(lambda s: len(s) >= 1)
        shape = self.values[a][1:]
        row = self.new_name("r")
        self.values[row] = shape
        body = self.elementwise(shape, 2, base=row)
        del self.values[row]
        name = self.new_name()
        if self.rng.random() < 0.5:
            self.emit(f"{name} = np.stack([{body} for {row} in {a}])")
            self.bind(name, (self.values[a][0],) + shape)
        else:
            self.emit(f"{name} = sum(np.sum({body}) for {row} in {a})")
            self.bind(name, ())

    def assign_numpy_extra(self) -> None:
        """Further NumPy functions on an array: running sums, shifts, softmax."""
        a = self.array()
        shape = self.values[a]
        axis = self.rng.randrange(len(shape))
        n = shape[axis]
        forms = [
            (f"np.cumsum({a}, axis={axis})", shape),
            (f"np.flip({a}, axis={axis})", shape),
            (f"np.roll({a}, 1, axis={axis})", shape),
            (f"np.exp({a} - np.max({a}, axis={axis}, keepdims=True))", shape),
            (
                f"np.log(np.sum(np.exp({a}), axis={axis}))",
                shape[:axis] + shape[axis + 1 :],
            ),
            (f"np.var({a}, axis={axis})", shape[:axis] + shape[axis + 1 :]),
            (f"np.sum({a}, axis=None, keepdims=True)", (1,) * len(shape)),
            (f"np.tile({a}, 2)", shape[:-1] + (2 * shape[-1],)),
        ]
        if n > 1:
            forms.append(
                (
                    f"np.diff({a}, axis={axis})",
                    shape[:axis] + (n - 1,) + shape[axis + 1 :],
                )
            )
        if len(shape) == 2:
            forms.append((f"np.sum({a}, axis=(0, 1))", ()))
            forms.append((f"np.swapaxes({a}, 0, 1)", shape[::-1]))
        text, result = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        self.bind(name, result, fresh="swapaxes" not in text and "flip" not in text)
        if "swapaxes" in text or "flip" in text:
            self.fresh.discard(a)

    def list_loop(self) -> None:
        carried, shape = self.carried()
        items = self.new_name("hs")
        count = self.rng.randint(1, 4)
        counter = self.new_name("i")
        self.emit(f"{items} = []")
        self.emit(f"for {counter} in range({count}):")
        self.indent += 1
        self.emit(f"{carried} = {self.elementwise(shape, 2)}")
        self.emit(f"{items}.append({carried})")
        self.indent -= 1
        name = self.new_name()
        form = self.rng.randrange(4)
        if form == 0:
            self.emit(f"{name} = np.stack({items})")
            self.bind(name, (count,) + shape)
        elif form == 1:
            self.emit(f"{name} = sum({items})")
            self.bind(name, shape)
        elif form == 2:
            self.emit(f"{name} = {items}[-1] * {items}[0]")
            self.bind(name, shape)
        else:
            self.emit(f"{name} = sum(np.sum(h * h) for h in {items})")
            self.bind(name, ())

    def tuple_unpacking(self) -> None:
        a, b = self.new_name(), self.new_name()
        sa, sb = self.values[self.pick()], self.values[self.pick()]
        self.emit(f"{a}, {b} = {self.elementwise(sa, 1)}, {self.elementwise(sb, 1)}")
        self.bind(a, sa)
        self.bind(b, sb)
        if self.rng.random() < 0.3 and sa == sb:
            self.emit(f"{a}, {b} = {b}, {a}")

    def helper_call(self) -> None:
        arguments = [self.array()] + [self.pick()] * self.rng.randint(0, 1)
        shapes = [self.values[a] for a in arguments]
        helper, results = self.module.helper(shapes, self.depth + 1)
        names = [self.new_name() for _ in results]
        self.emit(f"{', '.join(names)} = {helper}({', '.join(arguments)})")
        for name, shape in zip(names, results):
            self.bind(name, shape)

    def early_return(self) -> None:
        self.emit(f"if {self.condition()}:")
        self.indent += 1
        self.emit(f"return {self.result()}")
        self.indent -= 1

    def result(self) -> str:
        """A number made from a few values in scope."""
        names = self.rng.sample(sorted(self.values), min(len(self.values), 3))
        terms = []
        for name in names:
            form = self.rng.choice(
                ["np.sum({0})", "np.sum({0} * {0})", "np.mean(np.tanh({0}))"]
            )
            terms.append(form.format(name))
        return " + ".join(terms)


class Module:
    """The program's text: helper functions first, then ``f``."""

    def __init__(self, rng: random.Random, idioms: bool = False):
        self.rng = rng
        self.idioms = idioms  # whether idioms.py's makers are drawn too
        self.count = 0
        self.helpers: list[str] = []

    def new_name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def helper(self, shapes: list, depth: int) -> tuple[str, list]:
        """A helper of parameters of ``shapes`` returning one or two values."""
        name = self.new_name("helper")
        parameters = [f"u{i}" for i in range(len(shapes))]
        writer = Writer(self.rng, dict(zip(parameters, shapes)), self, depth)
        for _ in range(self.rng.randint(1, 3)):
            writer.statement()
        made = [n for n in writer.values if n not in parameters] or parameters
        returned = self.rng.sample(made, min(len(made), self.rng.randint(1, 2)))
        writer.emit(f"return {', '.join(returned)}")
        header = f"def {name}({', '.join(parameters)}):"
        self.helpers.append("\n".join([header] + writer.lines))
        return name, [writer.values[r] for r in returned]


def _broadcastable(a: tuple, b: tuple) -> bool:
    try:
        broadcast(a, b)
    except ValueError:
        return False
    return True


def _broadcasts_to(small: tuple, shape: tuple) -> bool:
    return (
        len(small) <= len(shape)
        and _broadcastable(small, shape)
        and (broadcast(small, shape) == shape)
    )


SHAPES_OF_X = [(M,), (N, M)]
SHAPES_OF_Y = [(), (M,), (N, 1), (1, M), (N, M), (N,)]


def shapes(seed: int) -> dict:
    """The parameters' shapes for program ``seed``."""
    rng = random.Random(seed * 7919 + 1)
    return {
        "x": rng.choice(SHAPES_OF_X),
        "y": rng.choice(SHAPES_OF_Y),
        "W": (M, N),
        "s": (),
    }


def source(seed: int) -> str:
    """The module text of program ``seed``, defining ``f(x, y, W, s)`` (or
    ``f(x, params, W, s)``, ``params`` a pytree holding ``y``: trees.py) and, where
    its body has no early return, for some seeds ``f_vector`` of the same
    parameters and body returning an array or a tuple of arrays."""
    rng = random.Random(seed)
    module = Module(rng, idioms=seed >= IDIOMS_FROM)
    values = shapes(seed)
    layout = pytree_layout(seed)
    second = "y"
    preamble: list[str] = []
    if layout is not None:
        kind, preamble, bound = layout
        second = "params"
        leaf_shapes = {"y": values["y"], "b": (M,), "c": ()}
        del values["y"]
        values.update({name: leaf_shapes[name] for name in bound})
        if any(line.startswith("acc0") for line in preamble):
            values["acc0"] = ()
        if any("tree_product" in line for line in preamble):
            module.helpers.append(TREE_PRODUCT)
    writer = Writer(rng, values, module)
    writer.lines = ["    " + line for line in preamble]
    for _ in range(rng.randint(3, 12)):
        writer.statement()
    body = writer.lines[:]
    writer.emit(f"return {writer.result()}")
    header = f"(x, {second}, W, s):"
    functions = ["\n".join([f"def f{header}"] + writer.lines)]
    vector = vector_result(writer, random.Random(seed * 13 + 5))
    if vector is not None and not any("return" in line for line in body):
        functions.append("\n".join([f"def f_vector{header}", *body, vector]))
    imports = "import numpy as np"
    return "\n\n\n".join([imports, *module.helpers, *functions]) + "\n"


def vector_result(writer: Writer, rng: random.Random) -> str | None:
    """``f_vector``'s return line (for half the seeds): values in scope as an array
    or a tuple of arrays."""
    if rng.random() >= VECTOR_PROBABILITY:
        return None
    arrays = sorted(n for n, s in writer.values.items() if len(s) > 0)
    a, b = rng.choice(arrays), rng.choice(sorted(writer.values))
    form = rng.choice(
        [
            f"np.concatenate([np.ravel({a}), np.ravel({b})])",
            f"np.tanh({a})",
            f"({a} * 1.0, {b} * 1.0)",
            f"np.stack([np.sum({a}), np.mean({b})])",
        ]
    )
    return f"    return {form}"


def arguments(seed: int, dtype=np.float64) -> tuple:
    """``(x, y, W, s)`` for program ``seed`` (``y`` inside a pytree for some):
    read-only arrays of ``dtype`` (a program writing into its argument runs on a
    copy: ``writable``), s a float."""
    rng = np.random.default_rng(seed)
    made = []
    for name, shape in shapes(seed).items():
        value = rng.uniform(-1.0, 1.0, size=shape)
        if name == "s":
            made.append(float(value))
        else:
            made.append(np.asarray(value, dtype=dtype))
            made[-1].flags.writeable = False  # ppto must not write into them
    layout = pytree_layout(seed)
    if layout is not None:
        made[1] = pytree_argument(seed, layout[0], made[1], dtype)
    return tuple(made)


def writable(args: tuple) -> tuple:
    """Copies of ``args`` the plain function may write into."""
    return tuple(copy_leaves(a) for a in args)
