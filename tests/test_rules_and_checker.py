"""The rule format, show_op, custom rules, the gradient checker itself, and symbolic
expressions built from operators."""

import io
import sys

import numpy as np
import pytest

import ppto
from ppto.ops.primitive import OPERATORS, Primitive
from tests.corpus.checks import central_differences


@pytest.fixture
def cube():
    """A fresh primitive x ** 3 (unregistered, so tests can attach rules to it)."""
    op = Primitive(lambda xp, x: x * x * x, "(Tensor[...]) -> Tensor[...]", name="cube")
    yield op
    OPERATORS.pop("cube", None)


def test_show_op_prints_and_returns_the_spec_format(capsys):
    text = ppto.show_op(ppto.dot)
    assert text == (
        "Operator: Dot\n"
        "Input: (Tensor[M,K], Tensor[K,N])\n"
        "Output: Tensor[M,N]\n"
        "Grad: (δY @ B.T, A.T @ δY)"
    )
    assert capsys.readouterr().out == text + "\n"


def test_show_op_grad_line_comes_from_the_rule(cube):
    @cube.grad_rule
    def _(x):
        def backward(dY):
            three_x2 = 3 * x * x
            return dY * three_x2

        return backward

    assert ppto.show_op(cube).splitlines()[-1] == "Grad: δY * (3 * x * x)"
    assert "reduce_sum" in ppto.show_op(ppto.reduce_mean) or "unreduce" in ppto.show_op(
        ppto.reduce_mean
    )
    assert ppto.show_op(ppto.greater).endswith("Grad: none (not differentiable)")


def test_show_op_reads_a_name_the_rule_binds_anew_from_itself(cube):
    # g = g * 3 in a rule sent show_op into endless substitution (RecursionError)
    @cube.grad_rule
    def _(x):
        def backward(dY):
            g = dY * x
            g = g * x
            g = g * 3
            return g

        return backward

    assert ppto.show_op(cube).splitlines()[-1] == "Grad: δY * x * x * 3"
    assert ppto.check_grad(cube, ppto.tensor([0.5, -2.0])).ok


def test_show_op_keeps_the_names_of_a_long_rule():
    # np.cumprod's rule, substituted, wrote its zero mask out a dozen times over
    # two thousand characters; a long rule is shown with its names and their values
    grad = ppto.show_op(ppto.cumprod).splitlines()[-1]
    assert grad.startswith("Grad: reshape(gradient, np.shape(x)), with along = ")
    assert "; zero = flat == 0.0; " in grad and grad.count("flat == 0.0") == 1
    assert "; from_end = flip(cumsum(flip(δY * Y, along), along), along); " in grad
    assert len(grad) < 1000
    gelu = ppto.show_op(ppto.gelu).splitlines()[-1]
    assert gelu.startswith("Grad: δY * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope)")
    assert ", with t = tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)); " in gelu


def squares_and_powers(x, p):
    return np.sum(x**2) + np.sum(x**p)


def test_a_constant_exponent_adds_nothing_to_a_tangent_at_a_negative_base():
    # pow's tangent added db * out * log(a): NaN * 0 at a < 0, so check_grad failed
    # np.sum(x ** 2) at negative x (dot-product identity inf) and jvp gave NaN
    x = np.array([-0.3, 0.5, -1.2])
    with np.errstate(invalid="ignore"):  # (log(a) is still taken, then not used)
        assert ppto.check_grad(lambda x: np.sum(x**2), x).ok
        _, tangent = ppto.jvp(squares_and_powers, (x, 2.0), (np.ones(3), 0.0))
    assert float(tangent) == pytest.approx(4 * np.sum(x))


def zeroth_power(x):
    return np.sum(x**0.0) + np.sum(np.sin(x) ** 0)


def powers_of(x, p):
    return np.sum(x**p)


def test_a_zero_exponent_has_a_zero_derivative_at_a_zero_base():
    # p * x ** (p - 1) was 0 * 0 ** -1 = NaN at x = 0 for a constant, a number
    # and an array exponent, and in forward mode
    x = np.array([-1.0, 0.0, 2.0])
    expected = central_differences(zeroth_power, (x,), 0)
    np.testing.assert_array_equal(np.asarray(ppto.grad(zeroth_power)(x)), expected)
    _, tangent = ppto.jvp(zeroth_power, (x,), (np.ones(3),))
    assert float(tangent) == 0.0
    q = np.array([0.0, 0.0, 3.0])
    for p in (0.0, q):
        expected = central_differences(powers_of, (x, p), 0)
        found = ppto.grad(powers_of)(x, p)
        np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-6, atol=1e-8)
        with np.errstate(invalid="ignore"):  # (log(-1), taken and not used)
            _, tangent = ppto.jvp(powers_of, (x, p), (np.ones(3), np.zeros_like(p)))
        assert float(tangent) == pytest.approx(float(np.sum(expected)), rel=1e-6)


def test_a_zero_exponent_keeps_the_second_derivative_in_the_exponent():
    # d2/dx dp of x ** p at p = 0 is 1 / x: the exponent of the base's derivative
    # is p - 1 there, not the 1 that stands in at x = 0 only
    x, h = np.array([0.5, 2.0]), 1e-4
    gradient = ppto.grad(powers_of, wrt=0)
    _, mixed = ppto.jvp(gradient, (x, 0.0), (np.zeros(2), 1.0))
    expected = [
        sum(
            sign * powers_of(x + dx * np.eye(2)[i], dp)
            for sign, dx, dp in ((1, h, h), (-1, h, -h), (-1, -h, h), (1, -h, -h))
        )
        / (4 * h * h)
        for i in range(2)
    ]
    np.testing.assert_allclose(np.asarray(mixed), expected, rtol=1e-6)


def cubes(x):
    return np.sum(x**3)


def test_a_constant_exponent_is_decided_in_the_generated_code():
    text = ppto.show_grad(cubes, np.ones(3), file=None)
    assert "dx = dcubes * 3 * x ** 2" in text and "where" not in text


def test_checker_catches_a_wrong_rule(cube):
    @ppto.grad_rule(cube)
    def _(x):
        def backward(dY):
            return dY * 2 * x * x  # wrong: should be 3 x^2

        return backward

    @ppto.jvp_rule(cube)
    def _(x):
        def tangent(dx):
            return dx * 3 * x * x

        return tangent

    x = ppto.tensor([0.5, 1.5, -2.0])
    report = ppto.check_grad(cube, x, forward=False)
    assert not report.ok
    assert report.worst is not None and report.worst.argument == "x"
    assert "FAILED" in str(report)
    # Forward rule right, reverse wrong: the dot-product identity exposes it as well.
    assert ppto.check_grad(cube, x).identity_error > 1e-3


def test_checker_fails_a_rule_giving_nan_and_refuses_settings_that_check_nothing(
    cube,
):
    # a rule giving NaN passed (max() skips NaN, so the worst error stayed 0), as
    # did any rule with a negative tolerance; a bad directions or function was a
    # raw TypeError
    @ppto.grad_rule(cube)
    def _(x):
        def backward(dY):
            return dY * np.nan

        return backward

    x = ppto.tensor([0.5, 1.5, -2.0])
    for forward in (False, True):
        report = ppto.check_grad(cube, x, forward=forward)
        assert not report.ok and "FAILED" in str(report)
    assert report.worst is not None and np.isnan(report.worst.analytic)

    @ppto.grad_rule(cube)
    def _(x):
        def backward(dY):
            return dY * 2 * x * x  # wrong: should be 3 x^2

        return backward

    for settings in ({"rtol": -1.0}, {"atol": -1.0}, {"directions": "3"}):
        with pytest.raises(ppto.GradError, match="check_grad: (rtol|atol|dir)"):
            ppto.check_grad(cube, x, **settings)
    with pytest.raises(ppto.GradError, match="needs a function, got 5"):
        ppto.check_grad(5, x)


def test_checker_passes_a_right_rule_and_a_user_rule_object_is_callable(cube):
    @cube.grad_rule
    def _(x):
        def backward(dY):
            return dY * 3 * x * x

        return backward

    x = ppto.tensor([0.5, 1.5, -2.0])
    assert ppto.check_grad(cube, x, forward=False).ok
    backward = ppto.get_grad_rule(cube)(x)
    np.testing.assert_allclose(
        np.asarray(backward(ppto.ones_like(x))), 3 * x.numpy() ** 2
    )


def test_missing_rule_is_a_grad_error(cube):
    with pytest.raises(ppto.GradError, match="cube has no backward rule.*grad_rule"):
        ppto.check_grad(cube, ppto.tensor([1.0]))


def test_integer_arguments_cannot_be_differentiated():
    with pytest.raises(ppto.GradError, match="int64.*floating point"):
        ppto.check_grad(ppto.exp, ppto.tensor([1, 2]))


def test_wrt_by_name_and_unknown_name():
    a, b = ppto.tensor([1.0, 2.0]), ppto.tensor([3.0, 4.0])
    assert ppto.check_grad(ppto.mul, a, b, wrt="b").ok
    with pytest.raises(ppto.GradError, match="no parameter named 'c'"):
        ppto.check_grad(ppto.mul, a, b, wrt="c")


def test_gradients_through_non_differentiable_operators_are_constants():
    x = ppto.tensor([-0.7, 0.5, 2.3])  # away from floor's jumps
    # x * floor(x): floor contributes a constant factor, not an error.
    report = ppto.check_grad(lambda a: a * ppto.floor(a), x)
    assert report.ok


def test_builtin_rules_are_inspectable_source():
    rule = ppto.get_grad_rule(ppto.tanh)
    assert "def backward(dY)" in rule.source and "1 - out * out" in rule.source
    tangent = ppto.get_jvp_rule(ppto.tanh)
    assert "def tangent(dx)" in tangent.source  # derived: tanh's Jacobian is symmetric
    assert "mul(da, b" in ppto.get_jvp_rule(ppto.mul).source  # product rule, derived


def test_symbolic_expressions_and_a_user_written_symbolic_differentiator():
    x = ppto.symbol("x", (3,))
    expr = ppto.exp(x) * 2.0
    assert isinstance(expr, ppto.Operator) and expr.op is ppto.mul
    assert expr.args[0].op is ppto.exp and repr(expr) == "mul(exp(x), 2.0)"

    def symbolic_diff(expr):
        grad_rule = ppto.get_grad_rule(expr.op)
        return grad_rule(*expr.args)

    backward = symbolic_diff(expr.args[0])
    derivative = backward(ppto.symbol("dY"))
    value = ppto.evaluate(derivative, {"x": [0.0, 1.0, 2.0], "dY": [1.0, 1.0, 1.0]})
    np.testing.assert_allclose(value.numpy(), np.exp([0.0, 1.0, 2.0]))
    assert ppto.evaluate(expr, {"x": [0.0, 0.0, 0.0]}).numpy().tolist() == [2.0] * 3
    with pytest.raises(ppto.PptoError, match="symbolic"):
        bool(expr)


def test_the_seed_symbolic_differentiator_sees_an_operators_parameters():
    """grad_rule(*expr.args) (the seed's differentiator) is given reduce_sum's axis:
    with the tensor inputs alone its rule was that of a sum over every axis."""
    A, B = ppto.symbol("A", (2, 3)), ppto.symbol("B", (3, 4))
    expr = ppto.reduce_sum(ppto.dot(A, B), axis=1)
    assert expr.args[1:] == (1, False) and expr.inputs == expr.args[:1]
    assert expr.op(*expr.args).params == expr.params  # the same call again
    backward = ppto.get_grad_rule(expr.op)(*expr.args)
    d_product = backward(ppto.symbol("dY", (2,)))
    rng = np.random.default_rng(0)
    values = {"A": rng.normal(size=(2, 3)), "B": rng.normal(size=(3, 4))}
    values["dY"] = np.array([1.0, -2.0])
    got = ppto.evaluate(d_product, values).numpy()
    np.testing.assert_allclose(got, np.broadcast_to(values["dY"][:, None], (2, 4)))


def test_rule_and_implementation_sources_read_from_code_positions_are_exact():
    """ppto reads functions' source from their code objects' line positions (not by
    tokenizing the file); for every operator's implementation and rules this gives
    exactly what inspect gives."""
    import ast
    import inspect
    import textwrap

    from ppto.transform.source import function_source

    functions = []
    for op in OPERATORS.values():
        functions.append(getattr(op, "impl", None))
        for rule in (op.backward_rule, getattr(op, "jvp_rule", None)):
            functions.append(getattr(rule, "fn", None))
    functions = [f for f in functions if inspect.isfunction(f)]
    assert len(functions) > 150
    for function in functions:
        expected = textwrap.dedent(inspect.getsource(function))
        assert ast.dump(ast.parse(function_source(function))) == ast.dump(
            ast.parse(expected)
        ), function.__qualname__


def scaled_cube_factory(factor):
    """An operator and its rule made in a factory: the rule reads ``factor`` from its
    closure (its inlined source once named a variable the generated code lacked)."""

    @ppto.operator
    def scaled_cube(v):
        return v * v * v * factor

    @ppto.grad_rule(scaled_cube)
    def _(v):
        def backward(dY):
            return dY * 3.0 * factor * v * v

        return backward

    @scaled_cube.jvp_rule  # (forward mode refuses it with a gradient rule only)
    def _(v):
        def tangent(dv):
            return dv * 3.0 * factor * v * v

        return tangent

    return scaled_cube


SCALED_CUBE = scaled_cube_factory(2.0)


def uses_scaled_cube(x):
    return np.sum(SCALED_CUBE(x) * np.sin(x))


def test_a_rule_made_in_a_factory_reads_its_closure():
    x = np.linspace(0.5, 1.0, 4)
    expected = 6 * x**2 * np.sin(x) + 2 * x**3 * np.cos(x)
    np.testing.assert_allclose(ppto.grad(uses_scaled_cube)(x).numpy(), expected)
    _, tangent = ppto.jvp(uses_scaled_cube, (x,), (np.ones(4),))
    np.testing.assert_allclose(np.asarray(tangent), np.sum(expected))


@ppto.operator
def product_missing_one(x, y):
    return x * y


@ppto.grad_rule(product_missing_one)
def _(x, y):
    def backward(dY):
        return dY * y  # one gradient for two inputs: y's read as zero before

    return backward


def uses_product_missing_one(x, y):
    return ppto.reduce_sum(product_missing_one(x, y))


def test_a_rule_returning_too_few_gradients_is_refused():
    with pytest.raises(ppto.GradError, match="returns 1 gradient .* has 2 inputs"):
        ppto.grad(uses_product_missing_one, wrt=(0, 1))(np.ones(2), np.ones(2))


def two_outputs(x, w):
    return x * 2.0, w * 3.0


def test_a_pullback_refuses_cotangents_of_other_shapes():
    # a (2, 2) cotangent for a (3, 3) output gave a (2, 2) "gradient"
    _, pullback = ppto.vjp(two_outputs, np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ppto.ShapeError, match=r"output 1 has shape \(2, 2\)"):
        pullback((np.ones((2, 3)), np.ones((2, 2))))
    with pytest.raises(ppto.ShapeError, match="must be a tuple of 2"):
        pullback((np.ones((2, 3)),))
    dx, dw = pullback((np.ones((2, 3)), np.ones((3, 3))))
    np.testing.assert_allclose(dw.numpy(), np.full((3, 3), 3.0))


CUBE = lambda s: s * s * s  # noqa: E731 (a lambda is what this tests)


def test_second_derivatives_of_a_lambda():
    # the derivative's wrapper was named "<lambda>_derivative": a SyntaxError
    assert float(ppto.hessian(CUBE)(2.0)) == 12.0
    assert float(ppto.grad(ppto.grad(CUBE))(2.0)) == 12.0


@ppto.operator
def sine_with_wrong_rule(x):
    return ppto.sin(x)


@ppto.grad_rule(sine_with_wrong_rule)
def _(x):
    def backward(dY):
        return dY * ppto.cos(x) * 1.1  # ten percent off on purpose

    return backward


@ppto.operator
def sine_with_rule(x):
    return ppto.sin(x)


@ppto.grad_rule(sine_with_rule)
def _(x):
    def backward(dY):
        return dY * ppto.cos(x)

    return backward


def test_the_checker_checks_a_user_operators_own_rule():
    # it differentiated the operator's body instead: a wrong rule passed
    x = np.array([0.3, -0.7, 1.2])
    assert not ppto.check_grad(sine_with_wrong_rule, x).ok
    assert ppto.check_grad(sine_with_rule, x).ok


@ppto.operator
def doubled_with_a_summing_rule(x):
    return x * 2.0


@ppto.grad_rule(doubled_with_a_summing_rule)
def _(x):
    def backward(dY):
        return ppto.reduce_sum(dY) * 2.0  # a number where x is a vector: wrong

    return backward


def sum_of_doubled(x):
    return ppto.reduce_sum(doubled_with_a_summing_rule(x))


def test_a_gradient_of_another_shape_than_its_argument_is_refused():
    # ppto.grad and vjp's pullback handed back the rule's number as the gradient
    # of a vector, and check_grad failed with a raw IndexError
    x = np.array([0.3, -0.7, 1.2])
    refused = r"rule .* gave its input 'x' \(of shape \(3,\)\) a gradient of shape \(\)"
    with pytest.raises(ppto.GradError, match=refused):
        ppto.grad(sum_of_doubled)(x)  # (where the rule's gradient is made)
    _, pullback = ppto.vjp(doubled_with_a_summing_rule, x)
    with pytest.raises(ppto.GradError, match=refused):
        pullback(np.ones(3))
    with pytest.raises(ppto.GradError, match="gradient of x has shape"):
        ppto.check_grad(doubled_with_a_summing_rule, x)


@pytest.mark.parametrize("call", [
    lambda: ppto.set_precision("ultra"),
    lambda: ppto.set_tolerance(rtol="a"),
    lambda: ppto.set_tolerance(rtol=float("inf")),  # (every fusion rule passed)
    lambda: ppto.set_tolerance(atol=float("inf")),
    lambda: ppto.jvp(np.sin, np.ones(3), np.ones(3)),  # (its rows as arguments)
    lambda: ppto.show_op("dot"),
    lambda: ppto.grad_rule(3),
    lambda: ppto.operator(3),
    lambda: ppto.operator(ppto.exp),  # (an AttributeError: no __qualname__)
    lambda: ppto.zeros((-1,)),
    lambda: ppto.arange(0, 1, 0),
    lambda: ppto.eye("a"),
])  # fmt: skip
def test_misuse_of_the_api_is_a_ppto_error(call):
    # each raised a raw ValueError, TypeError or AttributeError from inside ppto
    with pytest.raises(ppto.PptoError):
        call()


def doubled_tanh(x):
    return ppto.tanh(x) * 2.0


def sum_of_checkpointed_operator(x):
    return ppto.reduce_sum(CHECKPOINTED_OPERATOR(x))


CHECKPOINTED_OPERATOR = ppto.operator(ppto.checkpoint(doubled_tanh))


def test_a_checkpointed_function_can_be_an_operator():
    # ppto.operator(ppto.checkpoint(f)) raised AttributeError (__qualname__)
    assert repr(CHECKPOINTED_OPERATOR) == (
        "<ppto operator doubled_tanh (user function doubled_tanh)>"
    )
    x = np.array([0.5, -1.0])
    gradient = ppto.grad(sum_of_checkpointed_operator)(x)
    expected = _central_differences(lambda p: float(np.sum(np.tanh(p) * 2.0)), x)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-9)


SOURCELESS_RULE = """
@ppto.operator
def doubled_in_exec(x):
    return x * 2.0


@ppto.grad_rule
def _(x):
    def backward(dy):
        return dy * 2.0

    return backward
"""


DOUBLED_IN_EXEC = None  # (the operator exec makes, set by the test)


def sum_of_doubled_in_exec(x):
    return ppto.reduce_sum(DOUBLED_IN_EXEC(x))


def test_a_rule_whose_source_is_not_kept_is_a_transform_error(monkeypatch):
    # a rule made by exec (no linecache entry) raised inspect's OSError from deep
    # inside the transformation
    namespace = {"ppto": ppto}
    exec(compile(SOURCELESS_RULE, "<no source kept>", "exec"), namespace)
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "DOUBLED_IN_EXEC", namespace["doubled_in_exec"])
    with pytest.raises(ppto.TransformError, match="rule of doubled_in_exec.*source"):
        ppto.grad(sum_of_doubled_in_exec)(np.ones(2))


def test_a_refused_tolerance_changes_nothing_and_allclose_names_bad_input():
    # set_tolerance(rtol=1e-2, atol=-1) refused atol after setting rtol, so the
    # tolerance leaked; allclose raised NumPy's own ValueError / UFuncTypeError
    before = ppto.get_tolerance()
    with pytest.raises(ppto.PptoError, match="atol must be"):
        ppto.set_tolerance(rtol=1e-2, atol=-1)
    assert ppto.get_tolerance() == before
    assert ppto.allclose(ppto.tensor([1.0, 2.0], device="sim"), [1.0, 2.0 + 1e-9])
    with pytest.raises(ppto.ShapeError, match=r"\(2,\) and \(3,\)"):
        ppto.allclose(ppto.tensor([1.0, 2.0]), [1.0, 2.0, 3.0])
    with pytest.raises(ppto.DTypeError, match="a has dtype <U1"):
        ppto.allclose("a", 1.0)


def test_tolerances_may_be_numpy_numbers_and_allclose_takes_numpys_keywords():
    # set_tolerance(rtol=np.float32(1e-4)) was refused as "not a non-negative
    # finite number", and ppto.allclose(a, b, rtol=...) as NumPy's allclose is
    # called was a raw TypeError (unexpected keyword argument 'rtol')
    before = ppto.set_tolerance(rtol=np.float32(1e-4), atol=np.int64(0))
    try:
        assert ppto.get_tolerance() == (float(np.float32(1e-4)), 0.0)
        assert ppto.allclose([1.0], [1.00005]) and not ppto.allclose([1.0], [1.001])
        assert ppto.allclose(ppto.tensor([1.0]), [1.1], rtol=0.2)
        assert not ppto.allclose([0.0], [1e-9], atol=0.0)
        assert ppto.allclose([np.nan, 1.0], [np.nan, 1.0], equal_nan=True)
        assert not ppto.allclose([np.nan], [np.nan])
        assert ppto.get_tolerance() == (float(np.float32(1e-4)), 0.0)
        with pytest.raises(ppto.PptoError, match="rtol must be.*got -1"):
            ppto.allclose([1.0], [1.0], rtol=-1)
        with pytest.raises(ppto.PptoError, match="rtol must be.*np.True_"):
            ppto.set_tolerance(rtol=np.True_)
    finally:
        ppto.set_tolerance(*before)


def test_allclose_takes_cupy_arrays(emulated_cupy):
    # a CuPy array went to np.asarray, which CuPy refuses, and came out as
    # "a is not an array" (the emulated CuPy refuses it as CuPy does)
    from ppto.runtime.backends import backend_for

    cupy = backend_for(ppto.Device("cuda")).xp
    on_gpu = cupy.asarray(np.array([1.0, 2.0]))
    assert ppto.allclose(on_gpu, [1.0, 2.0 + 1e-9])
    assert not ppto.allclose([1.0, 2.5], on_gpu)


def symbolic_gradients(expr, seed):
    """A user's reverse-mode differentiator over ``ppto.Operator`` trees: each node's
    rule from ``ppto.get_grad_rule``, adjoints added per symbol name."""
    adjoints: dict = {}

    def visit(node, adjoint):
        if isinstance(node, ppto.Symbol):
            known = adjoints.get(node.name)
            adjoints[node.name] = adjoint if known is None else known + adjoint
        elif isinstance(node, ppto.Operator):
            parts = ppto.get_grad_rule(node.op)(*node.args, **node.params)(adjoint)
            parts = parts if isinstance(parts, tuple) else (parts,)
            for argument, part in zip(node.args, parts):
                if part is not None:
                    visit(argument, part)

    visit(expr, seed)
    return adjoints


def test_symbolic_differentiation_through_rules_that_read_shapes():
    # dot's rule reads B.ndim, which symbols lacked; expressions now have shapes
    A, B, b = ppto.symbol("A", (3, 4)), ppto.symbol("B", (4, 2)), ppto.symbol("b", (2,))
    hidden = ppto.tanh(ppto.dot(A, B) + b)
    assert hidden.shape == (3, 2) and hidden.ndim == 2 and hidden.dtype == np.float64
    loss = ppto.reduce_sum(hidden * hidden)
    adjoints = symbolic_gradients(loss, ppto.symbol("seed", ()))
    rng = np.random.default_rng(3)
    values = {"A": rng.standard_normal((3, 4)), "B": rng.standard_normal((4, 2))}
    values.update(b=rng.standard_normal(2), seed=np.array(1.0))

    def numeric(**changed):
        return ppto.evaluate(loss, {**values, **changed}).item()

    for name in ("A", "B", "b"):
        gradient = ppto.evaluate(adjoints[name], values).numpy()
        assert gradient.shape == values[name].shape
        expected = np.zeros_like(values[name])
        for index in np.ndindex(expected.shape):
            step = np.zeros_like(expected)
            step[index] = 1e-6
            up = numeric(**{name: values[name] + step})
            down = numeric(**{name: values[name] - step})
            expected[index] = (up - down) / 2e-6
        np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-9)
    with pytest.raises(ppto.PptoError, match="has no shape"):
        _ = (ppto.symbol("free") * 2.0).shape


def test_symbolic_shapes_are_known_or_clearly_not():
    # raw TypeError and MemoryError, and a wrong (0,) for a value-dependent shape
    with pytest.raises(ppto.PptoError, match="has no shape"):
        _ = ppto.symbol("x").ndim
    huge = ppto.symbol("b", (100_000, 100_000))
    assert (ppto.exp(huge) * 2.0).shape == (100_000, 100_000)  # from the signature
    assert ppto.reduce_sum(ppto.exp(huge), 0).shape == (100_000,)  # and a reduction's
    with pytest.raises(ppto.PptoError, match="not computed for inputs this large"):
        _ = ppto.softmax(huge, 1).shape
    y = ppto.symbol("y", (5,))
    with pytest.raises(ppto.PptoError, match="depends on its inputs' values"):
        _ = y[y > 0.5].shape
    assert y[np.array([True, False, True, True, False])].shape == (3,)
    comparison = ppto.symbol("a", (3, 1)) > ppto.symbol("c", (4,))
    assert comparison.shape == (3, 4) and comparison.dtype == np.bool_


def symbolic_square_sum(a):
    return ppto.reduce_sum(a * a)


def test_symbols_iterate_check_their_values_and_are_not_differentiated_as_values():
    # list(x) never ended (Python iterated by indexing, and a symbolic index never
    # raises IndexError); evaluate took a value of another shape than declared; a
    # name or dtype that is not one was accepted (repr raised, .shape a TypeError);
    # ppto.grad of a symbol said the function's result was not a scalar
    x = ppto.symbol("x", (3, 2))
    rows = list(x)
    assert len(x) == 3 and [repr(row) for row in rows][-1] == "getitem(x, index=2)"
    second_row = ppto.evaluate(rows[1], {"x": np.arange(6.0).reshape(3, 2)})
    assert second_row.numpy().tolist() == [2.0, 3.0]
    with pytest.raises(ppto.ShapeError, match="0-d"):
        list(ppto.symbol("s", ()))
    with pytest.raises(ppto.ShapeError, match=r"'x' has shape \(3, 2\).*\(2,\)"):
        ppto.evaluate(x * 2.0, {"x": [1.0, 2.0]})
    with pytest.raises(ppto.PptoError, match="non-empty string, got 3"):
        ppto.symbol(3, (2,))
    with pytest.raises(ppto.DTypeError, match="symbol 'y' dtype"):
        ppto.symbol("y", (2,), dtype="floot")
    with pytest.raises(ppto.PptoError, match="symbolic and has no values"):
        np.asarray(x)
    with pytest.raises(ppto.GradError, match="'a': x is symbolic"):
        ppto.grad(symbolic_square_sum)(x)
    # values given as the value itself: "no value given for symbol 'x'" for a
    # list, a DTypeError about strings for a tensor ('x' in tensor)
    for values in ([1.0, 2.0], ppto.tensor(np.ones((3, 2)))):
        with pytest.raises(ppto.PptoError, match="dict from symbol names"):
            ppto.evaluate(x * 2.0, values)


def test_a_symbolic_expression_read_as_a_number_says_to_evaluate_it():
    # bool(expr) said so, but float(expr) and int(expr) were Python's raw
    # TypeError ("float() argument must be ... not 'Operator'")
    x = ppto.symbol("x", ())
    for read in (float, int, complex):
        for expression in (x, ppto.exp(x)):
            with pytest.raises(ppto.PptoError, match="symbolic and has no value"):
                read(expression)


def test_get_grad_rule_of_an_expression_says_to_pass_its_operator():
    # the seed's symbolic differentiator takes expr.op; passing expr itself said
    # only "exp(x) has no gradient rule"
    x = ppto.symbol("x", (3,))
    with pytest.raises(ppto.GradError, match=r"applied operator; pass .*expr\.op"):
        ppto.get_grad_rule(ppto.exp(x))
    with pytest.raises(ppto.GradError, match="a symbol, an input"):
        ppto.get_jvp_rule(x)
    with pytest.raises(ppto.GradError, match="no operator has that name"):
        ppto.get_grad_rule("nope")


@ppto.operator
def log_of_sum(x):
    return ppto.log(ppto.reduce_sum(x))


def test_get_grad_rule_of_an_operator_differentiated_from_its_body_says_so():
    # it said "has no gradient rule", of an operator ppto differentiates
    with pytest.raises(ppto.GradError, match="of its own: ppto differentiates it"):
        ppto.get_grad_rule(log_of_sum)
    with pytest.raises(ppto.GradError, match="no tangent rule of its own"):
        ppto.get_jvp_rule(log_of_sum)


@pytest.mark.parametrize("shape", ["ab", 3, (2, 1.5), (2, -1)])
def test_a_symbols_shape_is_a_tuple_of_lengths(shape):
    # "ab" made the shape ('a', 'b'), 3 a raw TypeError
    with pytest.raises(ppto.ShapeError, match="symbol 'y'"):
        ppto.symbol("y", shape)


@ppto.operator
def logsumexp_keeping_dims(x, axis, keepdims=False):
    peak = ppto.reduce_max(x, axis=axis, keepdims=True)
    out = peak + ppto.log(ppto.reduce_sum(ppto.exp(x - peak), axis, keepdims=True))
    if not keepdims:
        out = ppto.squeeze(out, axis=axis)
    return out


@ppto.grad_rule
def _(x, axis, keepdims=False):
    def backward(dy):
        if not keepdims:
            dy = ppto.expand_dims(dy, axis)
        return dy * ppto.exp(x - logsumexp_keeping_dims(x, axis, keepdims=True))

    return backward


@ppto.operator
def sine_squared(x):
    return ppto.sin(x) ** 2


@ppto.grad_rule
def _(x):
    x = 2 * x

    def backward(dy):
        return dy * ppto.sin(x)

    return backward


def weighted_logsumexp(x, w, axis):
    return ppto.reduce_sum(logsumexp_keeping_dims(x, axis) * w)


def sum_of_sine_squared(x):
    return ppto.reduce_sum(sine_squared(x) * x)


def _central_differences(function, point, eps=1e-6):
    gradient = np.zeros_like(point)
    for index in np.ndindex(point.shape):
        step = np.zeros_like(point)
        step[index] = eps
        gradient[index] = (function(point + step) - function(point - step)) / (2 * eps)
    return gradient


@pytest.mark.parametrize("axis", [0, 1])
def test_a_rule_that_rebinds_its_cotangent_starts_from_its_value(axis):
    # the seed's logsumexp rule made to run: dy = expand_dims(dy, axis) renamed
    # every dy to a fresh name that was never given the cotangent (UnboundLocalError)
    x = np.random.default_rng(3).standard_normal((4, 3))
    w = np.arange(1.0, 1.0 + x.shape[1 - axis])
    gradient = np.asarray(ppto.grad(weighted_logsumexp)(x, w, axis))
    expected = _central_differences(lambda p: float(np.log(np.exp(p).sum(axis)) @ w), x)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)
    assert ppto.check_grad(logsumexp_keeping_dims, x, axis).ok


def test_a_rule_that_rebinds_an_input_starts_from_its_value():
    x = np.array([0.3, -0.7, 1.2])
    expected = _central_differences(lambda p: float(np.sum(np.sin(p) ** 2 * p)), x)
    gradient = np.asarray(ppto.grad(sum_of_sine_squared)(x))
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)
    assert ppto.check_grad(sine_squared, x).ok


@ppto.operator
def annotated_logsumexp(x: ppto.Tensor, axis: int, keepdims: bool = False):
    return logsumexp_keeping_dims(x, axis, keepdims)


@ppto.operator
def scaled_by(x, w, axis=1, *, scale=2.0) -> ppto.Tensor:
    return ppto.reduce_sum(x * w, axis=axis) * scale


def test_show_op_writes_a_user_operators_non_tensor_parameters_as_such():
    # axis: int and keepdims: bool were shown as Tensor[...], the result as Tensor,
    # and an operator differentiated from its body as having no gradient at all
    assert ppto.show_op(annotated_logsumexp).splitlines()[1:] == [
        "Input: (Tensor[...], axis: int, keepdims: bool = False)",
        "Output: Tensor[...]",
        "Grad: from its body (ppto.show_grad shows the code)",
    ]
    assert ppto.show_op(scaled_by).splitlines()[1] == (
        "Input: (Tensor[...], Tensor[...], axis=1, scale=2.0)"
    )
    assert ppto.show_op(logsumexp_keeping_dims).splitlines()[-1] == (
        "Grad: δY * ppto.exp(x - logsumexp_keeping_dims(x, axis, keepdims=True))"
    )


NUMPY_ORDERED = ("average", "pad", "diff")


@pytest.fixture
def rules_put_back():
    """Rules a test attaches to average, pad and diff are taken off after it (and
    code made with them is not reused)."""
    from ppto.ops.primitive import note_registration

    kept = {name: OPERATORS[name] for name in NUMPY_ORDERED}
    rules = {name: (op.backward_rule, op.tangent_rule) for name, op in kept.items()}
    yield
    for name, op in kept.items():
        op.backward_rule, op.tangent_rule = rules[name]
    note_registration()


def test_numpy_ordered_operators_are_the_registered_operators():
    # ppto.average, ppto.pad and ppto.diff were wrappers taking NumPy's order,
    # so isinstance, @ppto.grad_rule and fusion patterns missed the operator
    for name in NUMPY_ORDERED:
        op = getattr(ppto, name)
        assert isinstance(op, ppto.OperatorDef) and op is OPERATORS[name]
        assert ppto.get_grad_rule(op) is op.backward_rule
    x = np.arange(1.0, 7.0).reshape(2, 3)
    np.testing.assert_array_equal(ppto.pad(x, 1, "constant").numpy(), np.pad(x, 1))
    np.testing.assert_array_equal(ppto.diff(x, 1, 0).numpy(), np.diff(x, 1, 0))
    np.testing.assert_allclose(ppto.average(x, 1).numpy(), np.average(x, 1))


def padded_sines(x, w):
    return np.sum(np.sin(ppto.pad(x, 1, constant_values=w[0])) * w)


def squared_steps(x):
    return np.sum(np.diff(x) ** 2 * np.arange(1.0, x.size))


def averaged_cosines(x):
    return np.cos(ppto.average(x)) * np.sum(x)


def test_a_rule_attached_to_a_numpy_ordered_operator_is_the_one_used(rules_put_back):
    """``@ppto.grad_rule(ppto.pad)`` (and diff's, average's) replaces the
    operator's rule in generated code (the wrapper took no rule); each rule below
    is right for the calls made, and written unlike the built-in one."""
    from tests.corpus.checks import central_differences

    @ppto.grad_rule(ppto.pad)
    def _(x, constant_values, pad_width, mode="constant"):
        def backward(dY):  # (for one pad value around a vector, pad_width=1)
            dx_inside = dY[1:-1]
            return dx_inside, ppto.sum(dY) - ppto.sum(dx_inside)

        return backward

    @ppto.grad_rule(ppto.diff)
    def _(x, prepend, append, n=1, axis=-1):
        def backward(dY):  # (for one difference of a vector, no edges)
            edged = ppto.pad(dY, 1)  # (NumPy's order in a rule too)
            return edged[:-1] - edged[1:], None, None

        return backward

    @ppto.grad_rule(ppto.average)
    def _(a, weights=None, axis=None, keepdims=False, returned=False):
        def backward(dY):  # (for the mean of all elements)
            return ppto.ones_like(a) * (dY / np.size(a)), None

        return backward

    x, w = np.linspace(-0.8, 0.9, 5), np.linspace(0.5, 1.5, 7)
    # (what each rule writes that the built-in one does not)
    cases = [(padded_sines, (x, w), "[1:-1]"), (squared_steps, (x,), "[:-1]")]
    cases.append((averaged_cosines, (x,), "/ size(x)"))
    for function, args, marker in cases:
        assert marker in ppto.show_grad(function, *args, file=io.StringIO())
        for position in range(len(args)):
            gradient = ppto.grad(function, wrt=position)(*args).numpy()
            expected = central_differences(function, list(args), position)
            np.testing.assert_allclose(gradient, expected, rtol=1e-7, atol=1e-10)


def written_in_place(t, w):
    u = t * 1.0
    before = u * w  # (its backward reads u as it was before the write)
    u[0] = u[1] * 3.0
    u[2] = w[0]
    return (u * u).sum() + (before * before).sum()


def test_the_rule_tape_follows_an_item_write_into_a_tensor():
    # vjp_by_rules told u by identity and u[0] = v wrote into u's memory: the
    # tape traced u's later reads to its value before the write ([12, 4, 6]
    # for [0, 40, 6] without `before`)
    from ppto.ruletape import jvp_by_rules, vjp_by_rules

    t, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.5, 2.0])
    out, pullback = vjp_by_rules(written_in_place, [ppto.tensor(t), w], [0])
    assert float(out) == pytest.approx(written_in_place(t.copy(), w), rel=1e-12)
    (gradient,) = pullback(ppto.tensor(np.array(1.0)))
    expected = central_differences(written_in_place, [t, w], 0)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6)
    v = np.array([0.3, -1.0, 2.0])
    value, tangent = jvp_by_rules(written_in_place, [ppto.tensor(t), w], {0: v})
    assert float(value) == pytest.approx(written_in_place(t.copy(), w), rel=1e-12)
    assert float(tangent) == pytest.approx(float(expected @ v), rel=1e-6)
    (gradient_w,) = vjp_by_rules(
        written_in_place, [ppto.tensor(t), ppto.tensor(w)], [1]
    )[1](1.0)
    np.testing.assert_allclose(
        gradient_w.numpy(), central_differences(written_in_place, [t, w], 1), rtol=1e-6
    )


def product_rule_swapped(y, x):  # the operator's names, in the other order
    def backward(dY):
        return dY * x, dY * y

    return backward


def product_rule_renamed(a, b):  # names the operator does not have
    def backward(dY):
        return dY * b, dY * a

    return backward


def product_rule_with_helper(x, y):
    def zero(dY):
        return dY * 0.0, dY * 0.0

    def backward(dY):
        return dY * y, dY * x

    return backward


def product_rule_shadowing_its_cotangent(x, y):
    dY = 100.0  # noqa: F841 (shadowed by backward's parameter)

    def backward(dY):
        return dY * y, dY * x

    return backward


def product_rule_returning_no_function(x, y):
    return None


def product_rule_with_two_cotangents(x, y):
    def backward(dY, extra):
        return dY * y, dY * x

    return backward


@pytest.mark.parametrize("rule, message", [
    (product_rule_swapped, r"takes \(y, x\), the arguments of .* \(x, y\) in another"),
    (product_rule_renamed, "has a parameter 'a', but .* no argument of that name"),
    (product_rule_with_helper, r"must define one function .*\(2 defined"),
    (product_rule_shadowing_its_cotangent, "assigns 'dY' before defining backward"),
    (product_rule_returning_no_function, r"must define one function .*\(0 defined"),
    (product_rule_with_two_cotangents, "backward takes 2 parameters"),
    (lambda x, y: lambda dY: (dY * y, dY * x), "is not a def-function"),
])  # fmt: skip
def test_a_rule_the_transformer_would_misread_is_refused_as_registered(rule, message):
    # each was attached: the swapped names and the helper defined first gave a
    # silently wrong gradient (bound by name; the first function taken for
    # backward), the dY assigned before backward replaced the cotangent (wrong
    # too), and the others failed with TypeError (None bound for a name the
    # operator does not have), StopIteration or AttributeError from the inliner
    @ppto.operator
    def product(x, y):
        return x * y

    with pytest.raises(ppto.GradError, match=message):
        ppto.grad_rule(product)(rule)
    assert product.backward_rule is None
    x, y = np.linspace(0.5, 1.0, 3), np.linspace(-1.0, 2.0, 3)
    gradients = ppto.grad(lambda x, y: ppto.reduce_sum(product(x, y)), wrt=(0, 1))
    dx, dy = gradients(x, y)  # the body's derivative, as before any rule
    np.testing.assert_allclose(np.asarray(dx), y)
    np.testing.assert_allclose(np.asarray(dy), x)


def returns_none(x):
    ppto.reduce_sum(x)
    return None


def returns_text(x):
    return "loss"


def returns_an_object(x):
    return object()


@pytest.mark.parametrize("function", [returns_none, returns_text, returns_an_object])
def test_grad_of_a_function_returning_no_number_is_refused(function):
    # its gradient came out as zeros (and value_and_grad's value as a Tensor of
    # dtype object or <U4, which ppto.tensor refuses)
    for transform in (ppto.grad, ppto.value_and_grad):
        with pytest.raises(ppto.GradError, match="returned .*, not a number"):
            transform(function)(np.ones(3))
    # vjp and jvp handed it back as a Tensor of dtype object or <U4 (a pullback
    # then refusing every cotangent, a tangent of '')
    with pytest.raises(ppto.GradError, match="vjp of .* not a number"):
        ppto.vjp(function, np.ones(3))
    with pytest.raises(ppto.GradError, match="jvp of .* not a number"):
        ppto.jvp(function, (np.ones(3),), (np.ones(3),))


@ppto.operator
def shifted(x, b):
    return x + b


@ppto.grad_rule
def _(x, b):
    def backward(dY):
        return dY, ppto.reduce_sum(dY, axis=0)

    return backward


@ppto.jvp_rule
def _(x, b):
    def tangent(dx, db):
        return dx[0] + db  # one row: the tangent of another shape than x + b

    return tangent


def test_a_tangent_of_another_shape_than_its_result_is_refused():
    # jvp handed back the (3,) tangent of a (4, 3) result as it was
    x, b = np.ones((4, 3)), np.ones(3)
    with pytest.raises(
        ppto.GradError,
        match=r"its result \(of shape \(4, 3\)\) a tangent of shape \(3,\)",
    ):
        ppto.jvp(shifted, (x, b), (np.ones((4, 3)), np.zeros(3)))


@ppto.operator
def product_listed(x, y):
    return x * y


@ppto.grad_rule
def _(x, y):
    def backward(dY):
        return [dY * y, dY * x]  # a list written out reads as the tuple would

    return backward


@ppto.operator
def product_named(x, y):
    return x * y


@ppto.grad_rule
def _(x, y):
    def backward(dY):
        gradients = (dY * y, dY * x)
        return gradients

    return backward


def test_a_rule_returning_a_list_works_and_a_name_is_refused_saying_so():
    # both were refused with "returns 1 gradient from backward, but ... has 2"
    x, y = np.linspace(0.5, 1.0, 3), np.linspace(-1.0, 2.0, 3)
    dx, dy = ppto.grad(lambda x, y: ppto.reduce_sum(product_listed(x, y)), (0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(dx), y)
    np.testing.assert_allclose(np.asarray(dy), x)
    with pytest.raises(ppto.GradError, match="returns gradients from backward.*out"):
        ppto.grad(lambda x, y: ppto.reduce_sum(product_named(x, y)), (0, 1))(x, y)


def test_built_in_rules_have_the_form_a_users_rule_must_have():
    # (a user's rule is checked as it is registered; the built-in ones here,
    # rather than each time ppto is imported)
    from ppto.ops.rules import _check_shape_of_rule

    rules = [
        rule
        for op in OPERATORS.values()
        for rule in (op.backward_rule, op.tangent_rule)
        if rule is not None
    ]
    assert len(rules) > 300
    for rule in rules:
        _check_shape_of_rule(rule, rule.source)


@ppto.operator
def product_scaled(x, y):
    return x * y


@ppto.grad_rule
def _(x, y, *, factor=1.0):  # a constant of the rule's own, keyword-only
    def backward(dY):
        return dY * y * factor, dY * x * factor

    return backward


def test_a_rule_parameter_of_its_own_with_a_default_takes_the_default():
    # a keyword-only one was left unbound: NameError in the generated code
    x, y = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    dx, dy = ppto.grad(lambda x, y: ppto.reduce_sum(product_scaled(x, y)), (0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(dx), y)
    np.testing.assert_allclose(np.asarray(dy), x)


@ppto.operator
def doubled_first_row(x):
    return x * 2.0


@ppto.grad_rule
def _(x):
    def backward(dY):
        return dY[0] * 2.0  # one row: a gradient of another shape than x

    return backward


def doubled_exponentials(x):
    return np.sum(doubled_first_row(np.exp(x * 0.1)))


def test_a_users_rule_giving_a_gradient_of_another_shape_is_refused_where_it_runs():
    # the exponential's adjoint broadcast the (3,) gradient to (4, 3): a silently
    # wrong gradient, found only by check_grad
    with pytest.raises(ppto.GradError, match=r"doubled_first_row gave its input 'x'"):
        ppto.grad(doubled_exponentials)(np.ones((4, 3)))
    source = ppto.show_grad(doubled_exponentials, np.ones((4, 3)), file=io.StringIO())
    assert "rule_gradient(" in source
    # ppto's own rules are not wrapped
    assert "rule_gradient" not in ppto.show_grad(lambda_free_sum, np.ones(3), file=None)


def lambda_free_sum(x):
    return np.sum(np.exp(x) * x)


@ppto.operator
def shifted_first_row(x):
    return x + 1.0


@ppto.grad_rule
def _(x):
    def backward(dY):
        return dY

    return backward


@shifted_first_row.jvp_rule
def _(x):
    def tangent(dx):
        return dx[0]  # one row: a tangent of another shape than the result

    return tangent


def shifted_exponentials(x):
    return np.sum(np.exp(shifted_first_row(x)))


def test_a_users_tangent_rule_giving_another_shape_is_refused_where_it_runs():
    # the exponential's tangent broadcast the (3,) tangent to (4, 3): a silently
    # wrong directional derivative (only the final result's shape was checked)
    with pytest.raises(ppto.GradError, match="shifted_first_row gave its result"):
        ppto.jvp(shifted_exponentials, (np.ones((4, 3)),), (np.ones((4, 3)),))
