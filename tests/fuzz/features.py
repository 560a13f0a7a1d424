"""Statements of the random programs beyond plain NumPy arithmetic: linear algebra
on well-conditioned matrices, order statistics, NaN-skipping reductions,
contractions (``einsum``, ``tensordot``), local functions (a ``def`` or a lambda
inside the function, closing over values in scope) and callables passed to a
helper. ``Features`` is mixed into ``generator.Writer``: each method binds one new
name of a known shape, so the program stays valid NumPy.

Matrices are made well-conditioned by construction: ``T @ T.T + n * I`` (symmetric
positive definite, eigenvalues at least ``n``) for ``cholesky``/``eigvalsh``, and
``n * I + 0.5 * tanh(B)`` (diagonally dominant) for ``solve``/``inv``/``det``.
"""

from __future__ import annotations

# a callable handed to a helper (a lambda used as a value is refused: README)
PASSED_CALLABLES = ["np.tanh", "np.sin", "np.arctan", "np.cos"]


class Features:
    """Statement makers (see the module docstring); ``Writer`` provides ``rng``,
    ``values``, ``pick``, ``emit``, ``bind``, ``elementwise`` and ``module``."""

    # --- linear algebra ---

    def square_matrix(self, symmetric: bool) -> tuple[str, int] | None:
        """A new name bound to a well-conditioned (n, n) matrix made from a
        matrix in scope, and n (None where no matrix is in scope)."""
        a = self.pick(lambda s: len(s) == 2)
        if a is None:
            return None
        rows, columns = self.values[a]
        name = self.new_name("A")
        if symmetric:
            n = rows
            self.emit(f"{name} = np.tanh({a}) @ np.tanh({a}).T + {n}.0 * np.eye({n})")
        else:
            n = min(rows, columns)
            self.emit(f"{name} = {n}.0 * np.eye({n}) + 0.5 * np.tanh({a}[:{n}, :{n}])")
        self.bind(name, (n, n))
        return name, n

    def assign_linalg(self) -> None:
        symmetric = self.rng.random() < 0.5
        made = self.square_matrix(symmetric)
        if made is None:
            return self.assign_elementwise()
        matrix, n = made
        forms = [
            (f"np.linalg.inv({matrix})", (n, n)),
            (f"np.linalg.det({matrix})", ()),
            (f"np.linalg.slogdet({matrix})[1]", ()),
            (f"np.trace({matrix} @ {matrix})", ()),
            (f"np.linalg.norm({matrix}, 'fro')", ()),
        ]
        right = self.pick(lambda s: len(s) in (1, 2) and s[0] == n)
        if right is not None:
            forms.append((f"np.linalg.solve({matrix}, {right})", self.values[right]))
        if symmetric:
            forms += [
                (f"np.linalg.cholesky({matrix})", (n, n)),
                (f"np.linalg.eigvalsh({matrix})", (n,)),
                (f"np.linalg.inv(np.linalg.cholesky({matrix}))", (n, n)),
            ]
        text, shape = self.rng.choice(forms)
        name = self.new_name()
        if "slogdet" in text and self.rng.random() < 0.5:  # the tuple unpacked
            sign = self.new_name("sign")
            self.emit(f"{sign}, {name} = np.linalg.slogdet({matrix})")
        else:
            self.emit(f"{name} = {text}")
        self.bind(name, shape)

    # --- order statistics and NaN-skipping reductions ---

    def assign_order_statistic(self) -> None:
        a = self.array()
        shape = self.values[a]
        axis = self.rng.randrange(len(shape))
        reduced = shape[:axis] + shape[axis + 1 :]
        q = self.rng.choice([10, 25, 50, 75, 90])
        forms = [
            (f"np.sort({a}, axis={axis})", shape),
            (f"np.sort({a})", shape),
            (f"np.median({a})", ()),
            (f"np.median({a}, axis={axis})", reduced),
            (f"np.percentile({a}, {q})", ()),
            (f"np.quantile({a}, {q / 100}, axis={axis})", reduced),
            (f"np.ptp({a}, axis={axis})", reduced),
            (f"np.sort({a}.ravel())[-1]", ()),
            (f"np.max({a}, axis={axis}) - np.min({a}, axis={axis})", reduced),
            (
                f"np.take_along_axis({a}, np.argsort({a}, axis={axis}), axis={axis})",
                shape,
            ),
        ]
        text, result = self.rng.choice(forms)
        name = self.new_name()
        self.emit(f"{name} = {text}")
        self.bind(name, result)

    def assign_nan_reduction(self) -> None:
        """A NaN-skipping reduction, of the array itself or of it with its
        elements above a threshold replaced by NaN (to the whole array, so
        one element at least is kept: the largest is above any threshold only
        where every one is, and then the threshold is not used)."""
        a = self.array()
        shape = self.values[a]
        reduce = self.rng.choice(
            ["np.nansum", "np.nanmean", "np.nanmax", "np.nanmin", "np.nanvar"]
            + ["np.nanstd", "np.nanmedian"]
        )
        name = self.new_name()
        if self.rng.random() < 0.6:
            masked = self.new_name("m")
            self.emit(
                f"{masked} = np.where({a} > np.max({a}) * 0.5 + 0.1, np.nan, {a})"
                f" if np.min({a}) < np.max({a}) * 0.5 + 0.1 else {a}"
            )
            self.emit(f"{name} = {reduce}({masked})")
            self.bind(name, ())
            return
        axis = self.rng.randrange(len(shape))
        self.emit(f"{name} = {reduce}({a}, axis={axis})")
        self.bind(name, shape[:axis] + shape[axis + 1 :])

    # --- contractions ---

    def assign_contraction(self) -> None:
        forms = []
        for a, sa in sorted(self.values.items()):
            for b, sb in sorted(self.values.items()):
                forms += contractions(a, sa, b, sb)
        self.assign_one_of(forms)

    # --- local functions and callables ---

    def local_body(self, shape: tuple) -> str:
        """An expression of parameter ``v`` of ``shape`` that may read (close
        over) values in scope."""
        self.values["v"] = shape
        try:
            return self.elementwise(shape, 2, base="v")
        finally:
            del self.values["v"]

    def local_function(self) -> None:
        """A ``def`` or a lambda inside the function, called once or twice (or in a
        loop, or through ``map``) right after it."""
        a = self.array()
        shape = self.values[a]
        local = self.new_name("local")
        body = self.local_body(shape)
        form = self.rng.randrange(3)
        if form == 0:
            self.emit(f"{local} = lambda v: {body}  # noqa: E731")
        elif form == 1:
            self.emit(f"def {local}(v, scale=0.5):")
            self.emit(f"    return scale * ({body})")
        else:
            inner = self.new_name("w")
            self.emit(f"def {local}(v):")
            self.emit(f"    {inner} = {body}")
            self.emit(f"    return np.tanh({inner}) + v")
        name = self.new_name()
        others = [n for n, s in sorted(self.values.items()) if s == shape and n != a]
        call = self.rng.random()
        if call < 0.3 and others:
            other = self.rng.choice(others)
            self.emit(f"{name} = {local}({a}) * {local}({other})")
        elif call < 0.5:
            self.emit(f"{name} = {a} * 1.0")
            counter = self.new_name("i")
            self.emit(f"for {counter} in range(2):")
            self.emit(f"    {name} = np.tanh({local}({name}))")
        elif call < 0.65 and others:
            other = self.rng.choice(others)
            self.emit(f"{name} = sum(map({local}, [{a}, {other}]))")
        else:
            self.emit(f"{name} = {local}({a})")
        self.bind(name, shape)

    def passed_callable(self) -> None:
        """A module-level helper calling the callable it is given."""
        a = self.array()
        shape = self.values[a]
        helper = self.module.new_name("apply")
        self.module.helpers.append(
            f"def {helper}(u0, fn):\n    return fn(u0) + 0.5 * fn(0.5 * u0) * u0"
        )
        given = self.rng.choice(PASSED_CALLABLES)
        name = self.new_name()
        self.emit(f"{name} = {helper}({a}, {given})")
        self.bind(name, shape)


def contractions(a: str, sa: tuple, b: str, sb: tuple) -> list:
    """(text, shape) of the ``einsum``/``tensordot``/``inner`` forms that fit."""
    forms = []
    if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
        forms += [
            (f"np.einsum('ij,jk->ik', {a}, {b})", (sa[0], sb[1])),
            (f"np.tensordot({a}, {b}, axes=1)", (sa[0], sb[1])),
        ]
    if len(sa) == 2 and len(sb) == 2 and sa[0] == sb[0] and a <= b:
        forms.append((f"np.einsum('ij,ik->jk', {a}, {b})", (sa[1], sb[1])))
    if sa == sb and len(sa) == 2 and a <= b:
        forms += [
            (f"np.einsum('ij,ij->i', {a}, {b})", sa[:1]),
            (f"np.einsum('ij,ij->', {a}, {b})", ()),
            (f"np.tensordot({a}, {b}, axes=2)", ()),
            (f"np.tensordot({a}, {b}, axes=([0], [0]))", (sa[1], sb[1])),
        ]
    if len(sa) == 2 and len(sb) == 1 and sa[1] == sb[0]:
        forms.append((f"np.einsum('ij,j->i', {a}, {b})", sa[:1]))
    if len(sa) == 1 and len(sb) == 1 and a < b:
        forms.append((f"np.einsum('i,j->ij', {a}, {b})", sa + sb))
        if sa == sb:
            forms.append((f"np.inner({a}, {b})", ()))
    return forms
