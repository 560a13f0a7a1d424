"""NumPy spellings of ppto operators: ufuncs and functions mapped to operators.

Used by ``Tensor.__array_ufunc__`` / ``__array_function__`` (so ``np.exp(tensor)`` runs
``ppto.exp`` on the tensor's device) and by the transformer to resolve ``np.*`` calls.
Keyword arguments NumPy spells differently are renamed here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops import (
    arrange,
    calculus,
    decompositions,
    graph,
    indexing,
    least_squares,
    linalg,
    logic,
    matrix_products,
    norms,
    order,
    reductions,
    shape,
    signal,
    statistics,
    unary_einsum,
)
from ppto.ops import elementwise as ew

# NumPy's reductions take (a, axis, dtype, out, ...): after the axis, ppto's
# keepdims and ddof would receive NumPy's dtype and out if given by position (NumPy
# has no logsumexp; np.median's and np.nanmedian's order is their operators':
# OperatorDef.positional)
AXIS_ONLY = reductions.REDUCTIONS - {"logsumexp", "median", "nanmedian"}


def check_numpy_positionals(op, count: int, spelled: str) -> None:
    """Refuse what NumPy would read as ``dtype`` or ``out``: a reduction spelled the
    NumPy way (``np.var``, ``x.var()``) given more than its array and axis by
    position."""
    if op.name in AXIS_ONLY and count > 2:
        raise PptoError(
            f"{spelled} takes its axis by position and the rest by name "
            "(keepdims=..., ddof=...): NumPy's next positional arguments are dtype "
            "and out, which ppto does not take"
        )


# NumPy's where= and initial= of a reduction: the value an entry left out takes
# (None: none, initial= must give it) and how initial joins the result (the
# transformer's rewrite of them in differentiated code, normalize.py, is the same)
REDUCTION_OPTIONS = {
    reductions.reduce_sum: (0, ew.add),
    reductions.reduce_prod: (1, ew.mul),
    reductions.reduce_max: (None, ew.maximum),
    reductions.reduce_min: (None, ew.minimum),
    reductions.reduce_mean: (0, None),
}
# reductions whose NumPy spelling takes dtype= (the dtype it computes in)
_WITH_DTYPE = {reductions.reduce_sum, reductions.reduce_prod, reductions.reduce_mean}


def reduce_with_options(op, args: tuple, params: dict, spelled: str):
    """``op(*args, **params)`` with NumPy's ``where=``, ``initial=`` and (of a sum,
    product or mean) ``dtype=`` among ``params``, eagerly: x cast to dtype; the
    entries left out replaced by the reduction's identity (or by initial), the
    result joined with initial; a mean the sum of the entries kept over their
    count. ``np.sum(t, where=t > 0)`` and ``t.sum(dtype=...)`` were refused as
    arguments the operator lacks, where differentiated code took them."""
    mask = params.pop("where", None)
    initial = params.pop("initial", None)
    dtype = params.pop("dtype", None) if op in _WITH_DTYPE else None
    identity, join = REDUCTION_OPTIONS[op]
    if initial is not None and join is None:
        raise PptoError(f"{spelled} takes no initial= (NumPy's mean has none)")
    if mask is not None and identity is None and initial is None:
        raise PptoError(
            f"{spelled} with where= and no initial=: the entries left out need a "
            "value to lose to (NumPy asks for it too, where a reduction is empty); "
            "pass initial=... (-np.inf for a maximum, np.inf for a minimum)"
        )
    x, rest = args[0], args[1:]
    if dtype is not None:  # (in it, and the result too: a sum of int8 is int64)
        result = _reduced(op, shape.cast(x, dtype), rest, params, mask, initial)
        return shape.cast(result, dtype)
    return _reduced(op, x, rest, params, mask, initial)


def _reduced(op, x, rest: tuple, params: dict, mask, initial):
    if mask is None and initial is None:
        return op(x, *rest, **params)
    identity, join = REDUCTION_OPTIONS[op]
    kept = (
        x
        if mask is None
        else ew.where(mask, x, initial if identity is None else identity)
    )
    if op is reductions.reduce_mean:
        counted = ew.where(mask, shape.ones_like(x), 0)
        total = reductions.reduce_sum(kept, *rest, **params)
        return ew.div(total, reductions.reduce_sum(counted, *rest, **params))
    result = op(kept, *rest, **params)
    return result if initial is None else join(result, initial)


@dataclass(frozen=True)
class RankCheck:
    """A NumPy spelling that means something else than its operator for some ranks
    of its two operands: ``refusal(a_rank, b_rank)`` says why (None where they
    agree); ``checked`` is the operator that checks the ranks when it runs, for
    generated code where they are not known."""

    refusal: Callable
    checked: object


NUMPY_DOT = RankCheck(linalg.numpy_dot_refusal, linalg.numpy_dot)


def check_ranks(rank_check: RankCheck | None, args) -> str | None:
    """``rank_check``'s refusal of the positional operands ``args``, if any."""
    if rank_check is None or len(args) < 2:
        return None
    return rank_check.refusal(np.ndim(args[0]), np.ndim(args[1]))


EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def interleaved_subscripts(sublists, output=None) -> str:
    """The subscripts of np.einsum's interleaved form (``np.einsum(a, [0, 1], b,
    [1, 2], [0, 2])``: each operand's axes as whole numbers, ``...`` as Ellipsis,
    the result's after them if given) as its subscript form, ``'ab,bc->ac'``
    (NumPy's letters for the numbers: 0 is 'a')."""
    return ",".join(map(_sublist_letters, sublists)) + (
        "" if output is None else "->" + _sublist_letters(output)
    )


def _sublist_letters(sublist) -> str:
    letters = []
    for axis in sublist:
        if axis is Ellipsis:
            letters.append("...")
        elif isinstance(axis, (int, np.integer)) and 0 <= axis < len(EINSUM_LETTERS):
            letters.append(EINSUM_LETTERS[axis])
        else:
            raise PptoError(
                f"np.einsum's interleaved form names axes by whole numbers from 0 "
                f"to {len(EINSUM_LETTERS) - 1} (or ...), got {axis!r}"
            )
    return "".join(letters)


def split_interleaved(args) -> tuple:
    """np.einsum's interleaved arguments as (operands, their sublists, the
    result's sublist or None)."""
    pairs = len(args) // 2
    output = args[-1] if len(args) % 2 else None
    return args[0 : 2 * pairs : 2], args[1 : 2 * pairs : 2], output


def interleaved(args) -> bool:
    """Whether np.einsum's arguments are its interleaved form (an operand, then
    its axes as a list), not the subscripts and the operands."""
    return len(args) >= 2 and isinstance(args[1], (list, tuple))


@dataclass(frozen=True)
class NumpyAlias:
    """A NumPy function's ppto operator and the keyword renames between them;
    ``rank_check`` for a function whose meaning depends on its operands' ranks."""

    op: object
    renames: dict = field(default_factory=dict)
    rank_check: RankCheck | None = None
    # parameters NumPy takes before the arrays (np.einsum's subscripts)
    leading: tuple = ()
    # arrays given one by one where the operator takes them as a list (np.meshgrid)
    variadic: bool = False
    # the operator of a call with one array, where it is another (np.einsum's)
    single: object = None
    # NumPy's defaults where they are not the operator's (a ufunc's reduce: axis 0)
    defaults: dict = field(default_factory=dict)
    # the type NumPy returns parts in where the operator's tuple is not it
    # (np.split's list: code appends to it, replaces its items, asks its type)
    parts_type: type | None = None
    # the parameter taking what a call gives by position after the arrays, as one
    # tuple (np.gradient's spacings)
    rest: str | None = None
    # the operator of a call giving several arrays where NumPy gives one
    # (np.gradient along several axes: see ``for_axes``); ``parts_type`` is the
    # type NumPy gives them in
    several: object = None
    # the operator of a call giving its second argument as a list or tuple
    # (np.choose's choices written out: they broadcast together), where ``op``
    # takes one array
    listed: object = None

    def for_arrays(self, count: int):
        """The operator of a call with ``count`` arrays after the leading parameters."""
        return self.single if self.single is not None and count == 1 else self.op

    def for_axes(self, count: int):
        """The operator of a call along ``count`` axes (``several``'s for more than
        one: np.gradient gives one array along one axis, a tuple along more)."""
        return self.several if self.several is not None and count > 1 else self.op

    def __call__(self, *args, **kwargs):
        check_numpy_positionals(self.op, len(args), "this NumPy function")
        refusal = check_ranks(self.rank_check, args)
        if refusal is not None:
            raise PptoError(refusal)
        if self.leading and interleaved(args):  # (np.einsum(a, [0, 1], b, [1, 2]))
            operands, sublists, output = split_interleaved(args)
            args = (interleaved_subscripts(sublists, output), *operands)
        renamed = {self.renames.get(key, key): value for key, value in kwargs.items()}
        for name, value in self.defaults.items():
            place = len(self.op.input_names) + self.op.param_names.index(name)
            if name not in renamed and len(args) <= place:
                renamed[name] = value
        op = self.for_arrays(len(args) - len(self.leading))
        listed = args[1] if len(args) > 1 else kwargs.get("choices")
        if self.listed is not None and isinstance(listed, (list, tuple)):
            op = self.listed  # (np.choose(a, [x, 0.0]))
        if self.rest is not None:  # (the first array, then np.gradient's spacings)
            arity = len(op.input_names)
            if len(args) > arity:
                renamed[self.rest] = tuple(args[arity:])
            args, axis = args[:arity], renamed.get("axis")
            axes = np.ndim(args[0]) if axis is None else np.size(axis)
            op = self.for_axes(max(axes, len(renamed.get(self.rest, ()))))
        if self.leading:  # (else one array of np.einsum's two: "missing 'b'")
            arrays, arity = len(args) - len(self.leading), len(op.input_names)
            if arrays != arity:
                raise ShapeError(
                    f"ppto.{op.name} takes {arity} arrays; this call gives "
                    f"{arrays}: a product of more in steps of {arity} (or with @, * "
                    "and np.sum)"
                )
        renamed.update(zip(self.leading, args))
        args = args[len(self.leading) :]
        subscripts = renamed.get("subscripts")
        if self.single is not None and len(args) == 2 and isinstance(subscripts, str):
            plan = unary_einsum.diagonals_first(subscripts)
            if plan is not None:  # ('ii,i->i': the diagonal first, as generated
                # code takes it)
                renamed["subscripts"], firsts = plan
                args = tuple(
                    array if first is None else self.single(array, subscripts=first)
                    for first, array in zip(firsts, args)
                )
        if self.variadic:
            args = (list(args),)
        try:
            if op in REDUCTION_OPTIONS and {"where", "initial", "dtype"} & {*renamed}:
                spelled = f"np.{op.name.removeprefix('reduce_')}"
                return reduce_with_options(op, args, renamed, spelled)
            result = op(*args, **renamed)
        except PptoError:
            raise
        except TypeError as error:
            raise PptoError(f"{op.name}: {error}") from error
        if self.parts_type is None or not isinstance(result, tuple):
            return result
        return self.parts_type(result)


NUMPY_UFUNCS = {
    np.add: ew.add,
    np.subtract: ew.sub,
    np.multiply: ew.mul,
    np.true_divide: ew.div,
    np.floor_divide: logic.floor_divide,
    np.remainder: ew.remainder,
    np.negative: ew.neg,
    np.power: ew.pow,
    np.square: ew.square,
    np.sqrt: ew.sqrt,
    np.absolute: ew.abs,
    np.exp: ew.exp,
    np.log: ew.log,
    np.log1p: ew.log1p,
    np.expm1: ew.expm1,
    np.exp2: ew.exp2,
    np.log2: ew.log2,
    np.log10: ew.log10,
    np.reciprocal: ew.reciprocal,
    np.cbrt: ew.cbrt,
    np.sin: ew.sin,
    np.cos: ew.cos,
    np.tan: ew.tan,
    np.tanh: ew.tanh,
    np.sinh: ew.sinh,
    np.cosh: ew.cosh,
    np.arcsin: ew.arcsin,
    np.arccos: ew.arccos,
    np.arctan: ew.arctan,
    np.arctan2: ew.arctan2,
    np.arcsinh: ew.arcsinh,
    np.arccosh: ew.arccosh,
    np.arctanh: ew.arctanh,
    np.deg2rad: ew.deg2rad,
    np.radians: ew.deg2rad,
    np.rad2deg: ew.rad2deg,
    np.degrees: ew.rad2deg,
    np.fabs: ew.abs,  # (for real numbers, as ppto's are)
    np.fmax: ew.fmax,
    np.fmin: ew.fmin,
    np.hypot: ew.hypot,
    np.fmod: ew.fmod,
    np.maximum: ew.maximum,
    np.logaddexp: ew.logaddexp,
    np.logaddexp2: ew.logaddexp2,
    np.minimum: ew.minimum,
    np.matmul: linalg.dot,
    np.greater: logic.greater,
    np.greater_equal: logic.greater_equal,
    np.less: logic.less,
    np.less_equal: logic.less_equal,
    np.equal: logic.equal,
    np.not_equal: logic.not_equal,
    np.logical_and: logic.logical_and,
    np.logical_or: logic.logical_or,
    np.logical_xor: logic.logical_xor,
    np.logical_not: logic.logical_not,
    np.isfinite: logic.isfinite,
    np.isnan: logic.isnan,
    np.sign: logic.sign,
    np.floor: logic.floor,
    np.heaviside: logic.heaviside,
    np.ceil: logic.ceil,
}

_FUNCTIONS = {
    np.sum: reductions.reduce_sum,
    np.mean: reductions.reduce_mean,
    np.max: reductions.reduce_max,
    np.amax: reductions.reduce_max,
    np.min: reductions.reduce_min,
    np.amin: reductions.reduce_min,
    np.prod: reductions.reduce_prod,
    np.var: reductions.reduce_var,
    np.std: reductions.reduce_std,
    np.ravel: shape.flatten,
    np.argmax: reductions.argmax,
    np.argmin: reductions.argmin,
    np.outer: linalg.outer,
    np.kron: linalg.kron,
    np.vdot: linalg.vdot,
    np.cross: linalg.cross,
    np.linalg.norm: norms.norm,
    np.linalg.inv: linalg.inv,
    np.linalg.solve: linalg.solve,
    np.linalg.det: linalg.det,
    np.linalg.slogdet: linalg.slogdet,
    np.linalg.cholesky: linalg.cholesky,
    np.linalg.eigh: decompositions.eigh,
    np.linalg.eigvalsh: decompositions.eigvalsh,
    np.linalg.svd: decompositions.svd,
    np.linalg.svdvals: decompositions.svdvals,
    np.linalg.qr: decompositions.qr,
    np.linalg.pinv: least_squares.pinv,
    np.linalg.lstsq: least_squares.lstsq,
    np.linalg.matrix_power: matrix_products.matrix_power,
    np.linalg.multi_dot: matrix_products.multi_dot,
    np.transpose: shape.transpose,
    np.copy: shape.copy,
    np.asarray: shape.asarray,
    np.asanyarray: shape.asarray,
    np.ascontiguousarray: shape.asarray,
    np.array: shape.array,
    np.matrix_transpose: shape.matrix_transpose,
    np.swapaxes: shape.swapaxes,
    np.flip: shape.flip,
    np.cumsum: reductions.cumsum,
    np.cumprod: reductions.cumprod,
    np.roll: arrange.roll,
    np.tile: arrange.tile,
    np.repeat: arrange.repeat,
    np.sort: arrange.sort,
    np.argsort: arrange.argsort,
    np.partition: arrange.partition,
    np.moveaxis: shape.moveaxis,
    np.vstack: shape.vstack,
    np.hstack: shape.hstack,
    np.column_stack: shape.column_stack,
    np.dstack: shape.dstack,
    np.tensordot: linalg.tensordot,
    np.inner: linalg.inner,
    np.diag: linalg.diag,
    np.diagonal: linalg.diagonal,
    np.trace: linalg.trace,
    np.tril: linalg.tril,
    np.triu: linalg.triu,
    np.reshape: shape.reshape,
    np.broadcast_to: shape.broadcast_to,
    np.expand_dims: shape.expand_dims,
    np.squeeze: shape.squeeze,
    np.concatenate: shape.concat,
    np.stack: shape.stack,
    np.nan_to_num: ew.nan_to_num,
    np.select: ew.select,
    np.append: shape.append,
    np.zeros_like: shape.zeros_like,
    # (NumPy leaves its values unspecified: zeros are one choice, and a constant)
    np.empty_like: shape.zeros_like,
    np.ones_like: shape.ones_like,
    np.full_like: shape.full_like,
    np.where: ew.where,
    np.take: indexing.take,
    np.take_along_axis: indexing.take_along_axis,
    np.round: logic.round,
    np.around: logic.round,
    # (their positional order is NumPy's: see OperatorDef.positional)
    np.average: reductions.average,
    np.pad: arrange.pad,
    np.lib.stride_tricks.sliding_window_view: arrange.sliding_window_view,
    np.diff: arrange.diff,
    np.nansum: statistics.nansum,
    np.nanmean: statistics.nanmean,
    np.nanmax: statistics.nanmax,
    np.nanmin: statistics.nanmin,
    np.nanvar: statistics.nanvar,
    np.nanstd: statistics.nanstd,
    np.ptp: statistics.ptp,
    np.cov: statistics.cov,
    np.corrcoef: statistics.corrcoef,
    np.convolve: signal.convolve,
    np.correlate: signal.correlate,
    np.interp: signal.interp,
    np.bincount: graph.bincount,
    np.quantile: order.quantile,
    np.percentile: order.percentile,
    np.median: order.median,
    np.nanquantile: order.nanquantile,
    np.nanpercentile: order.nanpercentile,
    np.nanmedian: order.nanmedian,
}
_RENAMES = {
    np.clip: (ew.clip, {"a_min": "lo", "a_max": "hi", "min": "lo", "max": "hi"}),
    np.reshape: (shape.reshape, {"newshape": "shape"}),
}

# Functions that only read metadata: answered without computing anything.
NUMPY_QUERIES = {
    np.shape: lambda a: tuple(a.shape),
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
}


def numpy_input_names(func, op) -> dict:
    """NumPy's names of ``op``'s arrays where they differ from the operator's, so
    that a call by NumPy's keywords means what it does in NumPy:
    ``np.sort(a=x)``, ``np.tril(m=x)``, ``np.pad(array=x, ...)``,
    ``np.linalg.solve(a=A, b=b)``. A NumPy name the operator uses for something
    else is left alone (np.average's second parameter is its axis)."""
    try:
        parameters = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # (a builtin without one: positional only)
        return {}
    inputs = getattr(op, "input_names", ())
    taken = set(inputs) | set(getattr(op, "param_names", ()))
    return {
        numpy_name: name
        for numpy_name, name in zip(parameters, inputs)
        if numpy_name != name and numpy_name not in taken
    }


NUMPY_FUNCTIONS: dict = {
    func: NumpyAlias(op, numpy_input_names(func, op)) for func, op in _FUNCTIONS.items()
}
NUMPY_FUNCTIONS.update(
    {
        func: NumpyAlias(op, {**numpy_input_names(func, op), **names})
        for func, (op, names) in _RENAMES.items()
    }
)
# np.dot is np.matmul for operands of up to 2 axes (or a vector and a stack)
NUMPY_FUNCTIONS[np.dot] = NumpyAlias(linalg.dot, rank_check=NUMPY_DOT)
NUMPY_FUNCTIONS[np.einsum] = NumpyAlias(
    linalg.einsum, leading=("subscripts",), single=unary_einsum.unary_einsum
)
NUMPY_FUNCTIONS[np.split] = NumpyAlias(
    shape.split, {"indices_or_sections": "indices"}, parts_type=list
)
NUMPY_FUNCTIONS[np.array_split] = NumpyAlias(
    shape.array_split, {"indices_or_sections": "indices"}, parts_type=list
)
NUMPY_FUNCTIONS.update(
    {
        split: NumpyAlias(
            shape.split_by,
            {"indices_or_sections": "indices"},
            defaults={"by": split.__name__[0]},
            parts_type=list,
        )
        for split in (np.hsplit, np.vsplit, np.dsplit)
    }
)
NUMPY_FUNCTIONS[np.meshgrid] = NumpyAlias(arrange.meshgrid, variadic=True)
for _vecdot in (getattr(np, "vecdot", None), getattr(np.linalg, "vecdot", None)):
    if _vecdot is not None:  # (NumPy 2.0 on, np.vecdot 2.1 on)
        NUMPY_FUNCTIONS[_vecdot] = NumpyAlias(linalg.vecdot, {"x1": "a", "x2": "b"})
for _trapezoid in (getattr(np, "trapezoid", None), getattr(np, "trapz", None)):
    if _trapezoid is not None:  # (np.trapezoid from NumPy 2.0; np.trapz before 2.4)
        NUMPY_FUNCTIONS[_trapezoid] = NumpyAlias(
            calculus.trapezoid, {"x": "points", "dx": "spacing"}
        )
NUMPY_FUNCTIONS[np.polyval] = NumpyAlias(calculus.polyval)
NUMPY_FUNCTIONS[np.choose] = NumpyAlias(indexing.choose, listed=indexing.choose_among)
NUMPY_FUNCTIONS[np.gradient] = NumpyAlias(
    calculus.gradient,
    rest="spacing",
    several=calculus.gradients,
    # (a tuple from NumPy 2.0, a list before)
    parts_type=type(np.gradient(np.zeros((2, 2)))),
)
# NumPy 2's Array API spellings in np.linalg (their arrays given by position); its
# trace, diagonal and matrix norm act on the last two axes (np.trace on the first)
_LINALG_SPELLINGS = {
    "matmul": (linalg.dot, {}),
    "outer": (linalg.outer, {}),
    "tensordot": (linalg.tensordot, {}),
    "cross": (linalg.cross, {}),
    "matrix_transpose": (shape.matrix_transpose, {}),
    "trace": (linalg.trace, {"axis1": -2, "axis2": -1}),
    "diagonal": (linalg.diagonal, {"axis1": -2, "axis2": -1}),
    "matrix_norm": (norms.norm, {"axis": (-2, -1), "ord": "fro"}),
}
for _name, (_op, _defaults) in _LINALG_SPELLINGS.items():
    _spelling = getattr(np.linalg, _name, None)
    if _spelling is not None:  # (NumPy 2.0 on)
        NUMPY_FUNCTIONS[_spelling] = NumpyAlias(
            _op, numpy_input_names(_spelling, _op), defaults=_defaults
        )
NUMPY_FUNCTIONS[np.rot90] = NumpyAlias(shape.rot90, {"m": "x"})
NUMPY_FUNCTIONS.update(
    {
        function: NumpyAlias(shape.at_least, {"arys": "x"}, defaults={"ndim": ndim})
        for ndim, function in enumerate(
            (np.atleast_1d, np.atleast_2d, np.atleast_3d), start=1
        )
    }
)
NUMPY_FUNCTIONS[np.fliplr] = NumpyAlias(shape.flip, {"m": "x"}, defaults={"axis": 1})
NUMPY_FUNCTIONS[np.flipud] = NumpyAlias(shape.flip, {"m": "x"}, defaults={"axis": 0})
if hasattr(np, "unstack"):  # (NumPy 2.1 on)
    NUMPY_FUNCTIONS[np.unstack] = NumpyAlias(shape.unstack)
NUMPY_FUNCTIONS.update({ufunc: NumpyAlias(op) for ufunc, op in NUMPY_UFUNCS.items()})
# a ufunc's reduce (np.maximum.reduce(x, axis=0)) is its reduction, over axis 0 unless
# told otherwise (np.max's default is every axis)
NUMPY_REDUCES = {
    np.add: reductions.reduce_sum,
    np.multiply: reductions.reduce_prod,
    np.maximum: reductions.reduce_max,
    np.minimum: reductions.reduce_min,
}
NUMPY_FUNCTIONS.update(
    {
        ufunc.reduce: NumpyAlias(op, {"array": "x"}, defaults={"axis": 0})
        for ufunc, op in NUMPY_REDUCES.items()
    }
)
# a ufunc's outer (np.multiply.outer(a, b)): the ufunc of every pair of elements
NUMPY_FUNCTIONS.update(
    {
        getattr(np, ufunc).outer: NumpyAlias(
            ew.ufunc_outer, {"A": "a", "B": "b"}, defaults={"ufunc": ufunc}
        )
        for ufunc in ew.OUTER_UFUNCS
    }
)
# a ufunc's accumulate (np.add.accumulate(x)) is its running reduction, along axis
# 0 unless told otherwise (np.cumsum's default is the flattened array)
NUMPY_FUNCTIONS.update(
    {
        ufunc.accumulate: NumpyAlias(op, {"array": "x"}, defaults={"axis": 0})
        for ufunc, op in (
            (np.add, reductions.cumsum),
            (np.multiply, reductions.cumprod),
        )
    }
)
