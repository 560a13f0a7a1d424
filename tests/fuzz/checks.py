"""The properties every random program (``tests/fuzz/generator.py``) must have, in
float64 unless said otherwise:

- ``value_and_grad`` with respect to every argument: the value is the plain
  function's, each gradient has its argument's shape and dtype and matches central
  differences; ``grad`` of one argument and ``vjp``'s pullback give the same numbers,
  and a second call (the cached code) the same again;
- ``jvp`` with tangents on every argument matches differences along the tangents and
  the dot product of the tangents with the gradients;
- second order: ``jvp`` of ``grad`` (a Hessian-vector product) matches differences
  of the gradient, or ``grad(grad(f, wrt="s"), wrt="s")`` those of ``grad``;
- the unfused code (``set_precision('strict')``) and the code fused for any size in
  chunks of a few elements agree with the default code;
- float32 arguments run, and give gradients of their dtype close to float64's;
- ``show_grad`` returns source that compiles.

``check(seed)`` runs them all and returns an ``Outcome``: ``checked``, ``refused``
(a ``TransformError`` pointing at the program's file and line: fine), ``unstable``
(a point where the function is not smooth enough, or its value is huge, for finite
differences to be a reference), ``invalid`` (NumPy itself fails: a generator bug) or
``failed`` (a wrong number, or any other exception: a ppto bug).
"""

from __future__ import annotations

import contextlib
import io
import linecache
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

import ppto
from tests.corpus.checks import (
    as_float,
    assert_gradient,
    central_differences,
    directional_differences,
)
from tests.fuzz.generator import arguments, source, writable
from tests.fuzz.trees import leaves, rebuild_arguments
from tests.fuzz.vectors import check_vector_function

EPS = 1e-6
RTOL = 1e-6  # the corpus's, relative to the gradient's largest element (or 1e-2)
SECOND_ORDER_EPS = 1e-5
SECOND_ORDER_RTOL = 1e-5
IDENTITY_RTOL = 1e-9  # v . grad == jvp, both computed by ppto
FUSED_RTOL = 1e-10
FLOAT32_RTOL = 2e-3
LARGEST_VALUE = 1e4  # beyond it central differences lose too many digits
WRT = (0, 1, 2, 3)


@dataclass
class Outcome:
    seed: int
    kind: str  # checked, refused, unstable, invalid, failed
    detail: str = ""


class Unstable(Exception):
    """Finite differences are no reference at this point."""


def load(seed: int, name: str = "f"):
    """Program ``seed``'s ``f`` (or its ``name``; None where it has none), compiled
    from a file name ppto can read back."""
    text = source(seed)
    filename = filename_of(seed)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope: dict = {}
    exec(compile(text, filename, "exec"), scope)
    return scope.get(name)


def filename_of(seed: int) -> str:
    return f"<fuzz program {seed}>"


def check(seed: int) -> Outcome:
    """Every property of program ``seed``, as one outcome."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        args = arguments(seed)
        try:
            value = float(load(seed)(*writable(args)))
        except Exception as error:
            return Outcome(seed, "invalid", f"{type(error).__name__}: {error}")
        if not np.isfinite(value) or abs(value) > LARGEST_VALUE:
            return Outcome(seed, "unstable", f"value {value}")
        if overflows(load(seed), args):
            return Outcome(seed, "unstable", "float64: an intermediate value overflows")
        try:
            check_all(seed, args)
        except ppto.TransformError as error:
            return refusal(seed, error)
        except Unstable as error:
            return Outcome(seed, "unstable", str(error))
        except Exception as error:
            text = "".join(traceback.format_exception(error))
            return Outcome(seed, "failed", f"{type(error).__name__}: {text}")
    return Outcome(seed, "checked")


def overflows(f, args: tuple) -> bool:
    """Whether ``f`` overflows on the way to a finite value (``tanh(sinh(1e3))``):
    the chain rule then multiplies a zero derivative by an infinite one, NaN in
    any reverse or forward mode, where differences of the saturated value are 0."""
    with np.errstate(all="ignore", over="raise"):
        try:
            f(*writable(args))
        except FloatingPointError:
            return True
    return False


def refusal(seed: int, error: ppto.TransformError) -> Outcome:
    """A refusal is fine where it points at the program's file and a line in it
    and quotes that line; otherwise it is a failure."""
    lines = source(seed).splitlines()
    where = error.filename == filename_of(seed) and 1 <= (error.lineno or 0) <= len(
        lines
    )
    if not where or (error.text or "").strip() != lines[error.lineno - 1].strip():
        return Outcome(seed, "failed", f"refusal without the line: {error!r}")
    return Outcome(seed, "refused", f"{lines[error.lineno - 1].strip()}: {error.msg}")


def check_all(seed: int, args: tuple) -> None:
    f = load(seed)
    value, gradients = check_gradients(f, args)
    check_jvp(f, args, gradients)
    check_second_order(f, args, seed)
    check_fused_and_unfused(seed, args, value, gradients)
    check_float32(seed, gradients)
    text = ppto.show_grad(f, *args, wrt=WRT, file=io.StringIO())
    compile(text, "<show_grad>", "exec")
    vector = load(seed, "f_vector")
    if vector is not None:
        check_vector_function(vector, args, seed)


def plain(f):
    """``f`` run as NumPy runs it, on copies of its arguments."""
    return lambda *a: float(as_float(f(*writable(a))))


def flat(f, args: tuple):
    """``f`` as a function of ``args``' leaves (trees.py), run as ``plain``."""
    return lambda *flat_args: plain(f)(*rebuild_arguments(args, flat_args))


def assert_close(actual, expected, what: str, rtol: float) -> None:
    """The corpus's comparison (relative to the largest expected element, or
    1e-2), for values of any float dtype (the shapes must match)."""
    as_float64 = np.asarray(actual, dtype=np.float64)
    assert_gradient(as_float64, np.asarray(expected, dtype=np.float64), what, rtol)


def differences_with_step(function, args, position, eps: float):
    """The corpus's central differences, with step ``eps`` instead of its own."""
    import tests.corpus.checks as corpus

    saved, corpus.EPS = corpus.EPS, eps
    try:
        return central_differences(function, args, position)
    finally:
        corpus.EPS = saved


def _close_to_coarser_differences(function, args, position, gradient) -> bool:
    """Whether ``gradient`` matches differences of step 1e-5: rounding in the
    value (of a function of size 100, 1e-14) moves those of step 1e-6 by 1e-8,
    as much as the tolerance of a gradient of size 1e-2; and those of step 1e-5
    by as much where the value is 1e4 (seed 101841: a sum of squares of 8748
    beside a term of derivative 0.06, which ppto gives to 1e-17 of the
    derivative written out), so that rounding counts too."""
    coarser = differences_with_step(function, args, position, COARSER_STEP)
    return _close_but_for_rounding(gradient, coarser, function(*args))


COARSER_STEP = 1e-5


def _close_but_for_rounding(actual, coarser, value) -> bool:
    """Whether ``actual`` matches ``coarser`` (differences of ``COARSER_STEP``)
    within the tolerance plus what rounding ``value`` moves them by."""
    rounding = 4 * np.finfo(np.float64).eps * abs(value) / COARSER_STEP
    error = np.max(np.abs(np.asarray(actual, np.float64) - coarser), initial=0.0)
    scale = max(float(np.max(np.abs(coarser), initial=0.0)), 1e-2)
    return bool(error <= RTOL * scale + rounding)


def _confirm(function, args, position, what: str) -> None:
    """``Unstable`` where central differences of two step sizes disagree (a kink, a
    branch or a large third derivative near the point): no reference there."""
    estimates = [
        differences_with_step(function, args, position, eps) for eps in (1e-5, 1e-7)
    ]
    scale = max(float(np.max(np.abs(estimates[0]), initial=0.0)), 1e-2)
    if float(np.max(np.abs(estimates[0] - estimates[1]), initial=0.0)) > 1e-4 * scale:
        raise Unstable(f"{what}: differences depend on the step")


def check_gradients(f, args):
    """Gradients with respect to every argument, against central differences; an
    argument that is a pytree is compared leaf by leaf (a position below counts
    leaves). Returns the value and the gradients' leaves."""
    value, gradients = ppto.value_and_grad(f, wrt=WRT)(*args)
    assert abs(float(value) - plain(f)(*args)) <= 1e-12 * max(1.0, abs(float(value)))
    structure_matches(gradients, args, "value_and_grad")
    flat_args, flat_gradients = tuple(leaves(args)), leaves(gradients)
    function = flat(f, args)
    for position, (gradient, point) in enumerate(zip(flat_gradients, flat_args)):
        assert isinstance(gradient, ppto.Tensor), f"d/d arg {position}: {gradient!r}"
        assert gradient.shape == np.shape(point), f"d/d arg {position}"
        assert gradient.dtype == np.float64, f"d/d arg {position} dtype"
        expected = central_differences(function, flat_args, position)
        try:
            assert_close(gradient, expected, f"d/d arg {position}", RTOL)
        except AssertionError:
            _confirm(function, flat_args, position, f"d/d arg {position}")
            if not _close_to_coarser_differences(
                function, flat_args, position, gradient
            ):
                raise
    again = ppto.value_and_grad(f, wrt=WRT)(*args)  # the cached code
    for first, second in zip(flat_gradients, leaves(again[1])):
        np.testing.assert_array_equal(np.asarray(first), np.asarray(second))
    alone = ppto.grad(f, wrt=0)(*args)
    assert_close(alone, np.asarray(gradients[0]), "grad of x alone", 1e-12)
    out, pullback = ppto.vjp(f, *args)
    pulled = pullback(1.0)
    structure_matches(pulled, args, "vjp")
    for gradient, other in zip(flat_gradients, leaves(pulled)):
        assert_close(other, np.asarray(gradient), "vjp", 1e-12)
    return float(value), [np.asarray(g) for g in flat_gradients]


def structure_matches(gradients, args, what: str) -> None:
    """Each gradient has its argument's structure (dict keys, list or tuple)."""
    for position, (gradient, argument) in enumerate(zip(gradients, args)):
        assert type(gradient) is type(argument) or not isinstance(
            argument, (dict, list, tuple)
        ), f"{what} d/d arg {position}: {type(gradient).__name__}"
        if isinstance(argument, dict):
            assert list(gradient) == list(argument), f"{what}: keys {list(gradient)}"
        if isinstance(argument, (dict, list, tuple)):
            assert len(leaves(gradient)) == len(leaves(argument)), what


def random_tangents(args, seed: int) -> tuple:
    """Standard normal tangents of ``args``' structure."""
    rng = np.random.default_rng(seed)
    flat_tangents = [
        float(rng.standard_normal())
        if isinstance(a, float)
        else rng.standard_normal(np.shape(a))
        for a in leaves(args)
    ]
    return rebuild_arguments(args, flat_tangents)


def check_jvp(f, args, gradients) -> None:
    tangents = random_tangents(args, 1)
    value, pushed = ppto.jvp(f, args, tangents)
    assert abs(float(value) - plain(f)(*args)) <= 1e-12 * max(1.0, abs(float(value)))
    flat_tangents = leaves(tangents)
    direction = dict(enumerate(flat_tangents))
    identity = sum(float(np.sum(g * t)) for g, t in zip(gradients, flat_tangents))
    assert_close(pushed, identity, "jvp against v . grad", IDENTITY_RTOL)
    function, flat_args = flat(f, args), tuple(leaves(args))
    expected = directional_differences(function, flat_args, direction)
    try:
        assert_close(pushed, expected, "jvp", RTOL)
    except AssertionError:
        coarser = directional_differences(function, flat_args, direction, eps=1e-4)
        if abs(coarser - expected) > 1e-4 * max(abs(expected), 1e-2):
            raise Unstable("jvp: differences depend on the step") from None
        step = directional_differences(function, flat_args, direction, COARSER_STEP)
        if not _close_but_for_rounding(pushed, step, float(value)):
            raise


def check_second_order(f, args, seed: int) -> None:
    """The Hessian-vector product for even seeds, ``grad(grad)`` in ``s`` for odd
    ones (each costs two transforms: the slowest check)."""
    if seed % 2:
        check_grad_of_grad(f, args)
    else:
        check_hessian_vector_product(f, args)


def check_hessian_vector_product(f, args) -> None:
    gradient = ppto.grad(f, wrt=0)
    tangents = random_tangents(args, 2)
    value, product = ppto.jvp(gradient, args, tangents)
    assert_close(value, np.asarray(gradient(*args)), "jvp of grad value", 1e-10)
    direction = dict(enumerate(leaves(tangents)))

    def of(eps):
        return directional_differences(
            lambda *a: as_float(gradient(*rebuild_arguments(args, a))),
            tuple(leaves(args)),
            direction,
            eps=eps,
        )

    expected = of(SECOND_ORDER_EPS)
    try:
        assert_close(product, expected, "Hessian-vector product", SECOND_ORDER_RTOL)
    except AssertionError:
        _confirm_steps(of, "Hessian-vector product")
        raise


def check_grad_of_grad(f, args) -> None:
    second = ppto.grad(ppto.grad(f, wrt="s"), wrt="s")(*args)
    first = ppto.grad(f, wrt="s")

    def along_s(eps):
        s_moved = {len(leaves(args)) - 1: 1.0}  # s, the last leaf
        return directional_differences(
            lambda *a: as_float(first(*rebuild_arguments(args, a))),
            tuple(leaves(args)),
            s_moved,
            eps=eps,
        )

    try:
        assert_close(second, along_s(SECOND_ORDER_EPS), "grad(grad) in s", 1e-5)
    except AssertionError:
        _confirm_steps(along_s, "grad(grad) in s")
        raise


def _confirm_steps(of, what: str) -> None:
    coarse, fine = of(1e-4), of(1e-6)
    scale = max(float(np.max(np.abs(coarse), initial=0.0)), 1e-2)
    if float(np.max(np.abs(coarse - fine), initial=0.0)) > 1e-3 * scale:
        raise Unstable(f"{what}: differences depend on the step")


def check_fused_and_unfused(seed, args, value, gradients) -> None:
    previous = ppto.set_precision("strict")
    try:
        strict = ppto.value_and_grad(load(seed), wrt=WRT)(*args)
    finally:
        ppto.set_precision(previous)
    with fused_for_any_size():
        fused = ppto.value_and_grad(load(seed), wrt=WRT)(*args)
    for label, (other_value, other_gradients) in (("strict", strict), ("fused", fused)):
        assert_close(other_value, value, f"{label} value", FUSED_RTOL)
        for position, (a, b) in enumerate(zip(leaves(other_gradients), gradients)):
            assert_close(a, b, f"{label} d/d arg {position}", FUSED_RTOL)


@contextlib.contextmanager
def fused_for_any_size():
    """Fused kernels and regions for arrays of any size, in 64-byte chunks (as
    tests/test_fusion_random.py forces them), on code generated inside."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lowering
    import ppto.transform.regions as regions

    modules = (kernels, fuse, lowering, regions)
    saved = [module.LARGE for module in modules], kernels.CHUNK_BYTES
    for module in modules:
        module.LARGE = 1
    kernels.CHUNK_BYTES = 64
    try:
        yield
    finally:
        for module, large in zip(modules, saved[0]):
            module.LARGE = large
        kernels.CHUNK_BYTES = saved[1]


def check_float32(seed, gradients) -> None:
    args = arguments(seed, np.float32)
    f = load(seed)
    with np.errstate(over="raise"):
        try:
            plain(f)(*args)
        except FloatingPointError:  # (exp(89) is inf in float32: a NaN gradient)
            raise Unstable("float32: the function itself overflows") from None
    value, low = ppto.value_and_grad(f, wrt=WRT)(*args)
    reference = plain(f)(*args)
    # NumPy computes in float32 (a Python float is cast to the array's dtype);
    # ppto as well, to float32's precision, comparisons included, and the value
    # has NumPy's dtype (s, differentiated, stays a weak Python float)
    assert_close(value, reference, "float32 value against NumPy's", 1e-4)
    direct = np.asarray(f(*writable(args))).dtype
    assert value.dtype == direct, f"float32 value dtype {value.dtype}, NumPy's {direct}"
    if abs(reference - plain(f)(*arguments(seed))) > 1e-4 * max(1.0, abs(reference)):
        return  # float32 rounding moves the function itself (a branch, a kink)
    for position, (gradient, wanted, point) in enumerate(
        zip(leaves(low), gradients, leaves(args))
    ):
        expected_dtype = np.float64 if isinstance(point, float) else np.float32
        assert gradient.dtype == expected_dtype, f"float32 d/d arg {position} dtype"
        assert_close(gradient, wanted, f"float32 d/d arg {position}", FLOAT32_RTOL)
