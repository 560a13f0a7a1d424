"""Idioms users write that the first statement makers did not: masks combined with
``&``, ``|``, ``^`` and ``~``, ``np.clip`` and ``np.where`` chains (bounds from the
data too), matrix products of stacks, integer-array indexing, ``keepdims``
normalisations, ``while`` loops whose condition reads the data, lists of arrays
read by comprehensions and ``zip``, mixes of reshape, transpose, stack and
concatenate, and ``np.empty_like`` filled row by row. ``Idioms`` is mixed into
``generator.Writer``; programs of seeds from ``generator.IDIOMS_FROM`` on draw
these makers as well (the programs of earlier seeds, quoted in commits and tests,
stay as they were).

Each method binds one new name of a known shape (masks are not bound: arithmetic
on booleans makes float16 in NumPy), so the program stays valid NumPy.
"""

from __future__ import annotations

import numpy as np


class Idioms:
    """Statement makers (see the module docstring); ``Writer`` provides ``rng``,
    ``values``, ``pick``, ``array``, ``emit``, ``bind``, ``elementwise``,
    ``carried``, ``new_name`` and ``indent``."""

    def threshold(self) -> str:
        return repr(round(self.rng.uniform(-0.6, 0.6), 2))

    def fitting(self, shape: tuple, default: str) -> str:
        """A value in scope that broadcasts to ``shape`` without widening it."""
        return self.pick(lambda s: _broadcasts_to(s, shape)) or default

    def same_shape(self, shape: tuple) -> str:
        """A value of ``shape`` in scope, or an elementwise expression of one."""
        name = self.pick(lambda s: s == shape)
        if name is not None and self.rng.random() < 0.5:
            return name
        return self.elementwise(shape, 1)

    # --- masks, clip and where ---

    def mask_of(self, a: str, shape: tuple) -> str:
        """A boolean mask of ``shape`` combining comparisons of ``a`` and another
        value with &, | or ^ (or ~)."""
        b = self.fitting(shape, a)
        first = f"({a} > {self.threshold()})"
        second = f"({b} < {self.threshold()})"
        text = f"{first} {self.rng.choice(['&', '|', '^'])} {second}"
        if self.rng.random() < 0.3:
            text = f"~({text})"
        return text

    def assign_masked(self) -> None:
        a = self.array()
        shape = self.values[a]
        mask = self.new_name("m")
        self.emit(f"{mask} = {self.mask_of(a, shape)}")
        if self.rng.random() < 0.2:
            self.emit(f"{mask} &= {a} > -0.9")
        name = self.new_name()
        form = self.rng.randrange(5)
        if form == 0:
            text = (
                f"np.where({mask}, {self.elementwise(shape, 1)}, "
                f"{self.elementwise(shape, 1)})"
            )
        elif form == 1:
            text = f"{a} * {mask} + ({self.elementwise(shape, 1)}) * ~{mask}"
        elif form == 2:
            self.emit(f"{name} = np.sum(np.tanh({a}[{mask}]))")
            return self.bind(name, ())
        elif form == 3:
            text = f"np.where({mask} & ({a} < 0.9), {a}, 0.1 * {a})"
        else:  # written through the mask, into a copy
            self.emit(f"{name} = {a}.copy()")
            self.emit(f"{name}[{mask}] = ({self.elementwise(shape, 1)})[{mask}]")
            self.emit(f"{name}[~{mask}] *= 0.5")
            return self.bind(name, shape)
        self.emit(f"{name} = {text}")
        self.bind(name, shape)

    def clip_bounds(self, shape: tuple) -> tuple[str, str]:
        """(lo, hi) for np.clip of a value of ``shape``: numbers, None, or
        computed from values in scope (differentiated)."""
        b = self.fitting(shape, "0.0")
        lows = ["-0.5", "None", f"np.mean({b}) - 0.5", f"{b} - 0.5"]
        highs = ["0.5", "None", f"np.max({b})", f"{b} + 0.5"]
        lo, hi = self.rng.choice(lows), self.rng.choice(highs)
        if lo == hi == "None":
            hi = "0.5"
        return lo, hi

    def assign_clip_chain(self) -> None:
        a = self.array()
        shape = self.values[a]
        lo, hi = self.clip_bounds(shape)
        b = self.fitting(shape, a)
        forms = [
            f"np.clip({a}, {lo}, {hi})",
            f"{a}.clip({lo}, {hi})",
            f"np.clip(np.where({a} > 0, {a} * 2.0, {a}), {lo}, {hi})",
            f"np.where({a} > {b}, np.clip({a}, {lo}, {hi}), np.maximum({a}, {b}))",
            f"np.clip(np.clip({a}, -0.8, None) * 1.5, a_min={lo}, a_max={hi})",
            f"np.minimum(np.maximum({a}, {b} - 0.3), np.clip({b}, -0.2, 0.7))",
        ]
        name = self.new_name()
        self.emit(f"{name} = {self.rng.choice(forms)}")
        self.bind(name, shape)

    # --- products of stacks and indexing ---

    def assign_batched_matmul(self) -> None:
        a = self.pick(lambda s: len(s) == 2)
        if a is None:
            return self.assign_elementwise()
        n, m = self.values[a]
        stack = self.new_name("B")
        self.emit(f"{stack} = np.stack([{a}, {self.same_shape((n, m))}])")
        self.bind(stack, (2, n, m), fresh=False)
        forms = [
            (f"{stack} @ {stack}.transpose(0, 2, 1)", (2, n, n)),
            (f"np.matmul({stack}.swapaxes(-1, -2), {stack})", (2, m, m)),
            (f"np.einsum('bij,bkj->bik', {stack}, {stack})", (2, n, n)),
        ]
        for other, shape in sorted(self.values.items()):
            if len(shape) == 2 and shape[0] == m:
                forms.append((f"{stack} @ {other}", (2, n, shape[1])))
            if shape == (m,):
                forms.append((f"{stack} @ {other}", (2, n)))
        self.assign_one_of(forms)

    def assign_integer_index(self) -> None:
        a = self.array()
        shape = self.values[a]
        n = shape[0]
        picks = [self.rng.randrange(-n, n) for _ in range(3)]
        forms = [
            (f"{a}[{picks}]", (3,) + shape[1:]),
            (f"{a}[np.array({picks[:2]})]", (2,) + shape[1:]),
            (f"np.take({a}, {picks}, axis=0)", (3,) + shape[1:]),
            (f"{a}[np.argsort({a}, axis=0)[-1]]", shape[1:] * 2 or ()),
        ]
        if len(shape) == 1:
            forms[-1] = (f"{a}[np.argsort({a})[-2:]]", (2,))
        if len(shape) == 2:
            m = shape[1]
            columns = [self.rng.randrange(m) for _ in range(2)]
            forms += [
                (f"{a}[:, {columns}]", (n, 2)),
                (f"{a}[{picks[:2]}, {columns}]", (2,)),
                (f"{a}[np.arange({n}), np.argmax({a}, axis=1)]", (n,)),
                (f"{a}[np.argmin(np.sum({a}, axis=1))]", (m,)),
                (f"np.take({a}, {columns}, axis=1)", (n, 2)),
            ]
        text, result = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        computed = "np.arg" in text  # (ppto takes such an index for a possible
        self.bind(name, result, fresh=not computed)  # number: a view, cautiously)
        if computed:
            self.fresh.discard(a)

    # --- keepdims normalisations ---

    def assign_normalised(self) -> None:
        a = self.array()
        shape = self.values[a]
        k = self.rng.randrange(len(shape))
        keep = f"axis={k}, keepdims=True"
        forms = [
            f"{a} - {a}.mean({keep})",
            f"{a} / (np.linalg.norm({a}, {keep}) + 1.0)",
            f"({a} - np.mean({a}, {keep})) / np.sqrt(np.var({a}, {keep}) + 1.0)",
            f"np.exp({a} - {a}.max({keep})) / "
            f"np.sum(np.exp({a} - {a}.max({keep})), {keep})",
            f"{a} * np.std({a}, {keep})",
            f"{a} / np.sum(np.abs({a}) + 1.0, {keep})",
            f"{a} - np.min({a}, {keep}) + np.sum({a} * {a}, {keep})",
        ]
        name = self.new_name()
        self.emit(f"{name} = {self.rng.choice(forms)}")
        self.bind(name, shape)

    # --- loops and lists ---

    def data_while(self) -> None:
        """A while loop whose condition reads the value it changes."""
        carried, shape = self.carried()
        counter = self.new_name("k")
        self.emit(f"{counter} = 0")
        bound = self.rng.randint(2, 6)
        size = "np.sum({0} * {0})" if self.rng.random() < 0.5 else "np.max(np.abs({0}))"
        test = f"{size.format(carried)} > {round(self.rng.uniform(0.05, 1.0), 2)}"
        self.emit(f"while {test} and {counter} < {bound}:")
        self.indent += 1
        step = self.elementwise(shape, 1, base=carried)
        self.emit(f"{carried} = 0.7 * np.tanh({step})")
        self.emit(f"{counter} += 1")
        self.indent -= 1

    def list_of_arrays(self) -> None:
        a = self.array()
        shape = self.values[a]
        items = self.new_name("vs")
        count = self.rng.randint(2, 3)
        made = [a] + [self.same_shape(shape) for _ in range(count - 1)]
        self.emit(f"{items} = [{', '.join(made)}]")
        v = self.new_name("v")
        size = int(np.prod(shape))
        forms = [
            (f"sum(np.sum({v} * {v}) for {v} in {items})", ()),
            (f"np.stack([np.tanh({v}) for {v} in {items}])", (count,) + shape),
            (f"sum([{v} * 0.5 for {v} in {items}])", shape),
            (f"np.concatenate([{v}.ravel() for {v} in {items}])", (count * size,)),
            (f"np.stack([{v}.sum() for {v} in {items} if {v}.ndim > 0])", (count,)),
        ]
        if self.rng.random() < 0.3:
            others = self.new_name("ws")
            self.emit(f"{others} = [{', '.join(self.same_shape(shape) for _ in made)}]")
            p, q = self.new_name("p"), self.new_name("q")
            forms = [
                (
                    f"sum(np.sum({p} * np.tanh({q})) "
                    f"for {p}, {q} in zip({items}, {others}))",
                    (),
                )
            ]
        self.assign_one_of(forms)

    def assign_shape_mix(self) -> None:
        a = self.array()
        shape = self.values[a]
        b = self.same_shape(shape)
        size = int(np.prod(shape))
        forms = [
            (f"np.stack([{a}, {b}], axis=-1).reshape({shape[0]}, -1)",
             (shape[0], 2 * size // shape[0])),
            (f"np.concatenate([{a}.ravel(), ({b}).ravel()]).reshape(2, -1).T",
             (size, 2)),
            (f"np.moveaxis(np.stack([{a}, {b}]), 0, -1)", shape + (2,)),
            (f"np.vstack([{a}, {b}])",
             (2, shape[0]) if len(shape) == 1 else (2 * shape[0],) + shape[1:]),
            (f"np.hstack([{a}, {b}])",
             (2 * shape[0],) + shape[1:] if len(shape) == 1
             else shape[:1] + (2 * shape[1],) + shape[2:]),
        ]  # fmt: skip
        if size % 2 == 0:
            forms.append((f"{a}.reshape(-1, 2).T", (2, size // 2)))
        if shape[-1] % 2 == 0:
            half = shape[:-1] + (shape[-1] // 2,)
            forms.append((f"np.split({a}, 2, axis=-1)[1]", half))
        if len(shape) == 2:
            forms.append(
                (
                    f"np.transpose(np.stack([{a}, {b}]), (1, 0, 2)).reshape(-1, "
                    f"{shape[1]})",
                    (2 * shape[0], shape[1]),
                )
            )
        text, result = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        self.bind(name, result, fresh=False)

    def empty_filled(self) -> None:
        a = self.pick(lambda s: len(s) >= 1)
        shape = self.values[a]
        name = self.new_name("z")
        counter = self.new_name("i")
        self.emit(f"{name} = np.empty_like({a})")
        self.emit(f"for {counter} in range({shape[0]}):")
        self.indent += 1
        self.emit(
            f"{name}[{counter}] = {self.elementwise(shape[1:], 1)} * {a}[{counter}]"
        )
        self.indent -= 1
        self.bind(name, shape)


def _broadcasts_to(small: tuple, shape: tuple) -> bool:
    if len(small) > len(shape):
        return False
    try:
        return tuple(np.broadcast_shapes(small, shape)) == shape
    except ValueError:
        return False
