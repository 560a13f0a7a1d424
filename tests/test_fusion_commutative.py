"""The fusion matcher takes a commutative operator's operands (``+``, ``*``,
``maximum``, ``minimum``) in either order (ppto/transform/fuse_match.py), a
non-commutative one's (``-``, ``/``) only in its own; fused code computes what the
code did (gradients against central differences, float64)."""

import io

import numpy as np
import pytest

import ppto
from ppto.fusion.kernels import LARGE
from ppto.transform import fuse_match
from tests.test_fusion import own_rules  # noqa: F401  (a fixture)
from tests.test_golden import central_differences

# user rules: a product with a matrix product inside (not elementwise, so the
# matcher, not an elementwise signature, finds it), its pattern's math in NumPy


def product_sum(A, B, s, xp=ppto):
    return xp.sum(xp.matmul(A, B) * s, axis=1)


def larger(A, B, s, xp=ppto):
    return xp.sum(xp.maximum(xp.matmul(A, B), s), axis=1)


def difference(A, B, s, xp=ppto):
    return xp.sum(xp.matmul(A, B) - s, axis=1)


def quotient(A, B, s, xp=ppto):
    return xp.sum(xp.matmul(A, B) / s, axis=1)


# the code: the rule's operand order, then swapped


def product_in_order(A, B, s):
    return np.sum(np.sum(A @ B * s, axis=1) ** 2)


def product_swapped(A, B, s):
    return np.sum(np.sum(s * (A @ B), axis=1) ** 2)


def larger_in_order(A, B, s):
    return np.sum(np.sum(np.maximum(A @ B, s), axis=1) ** 2)


def larger_swapped(A, B, s):
    return np.sum(np.sum(np.maximum(s, A @ B), axis=1) ** 2)


def difference_in_order(A, B, s):
    return np.sum(np.sum(A @ B - s, axis=1) ** 2)


def difference_swapped(A, B, s):
    return np.sum(np.sum(s - A @ B, axis=1) ** 2)


def quotient_in_order(A, B, s):
    return np.sum(np.sum(A @ B / s, axis=1) ** 2)


def quotient_swapped(A, B, s):
    return np.sum(np.sum(s / (A @ B), axis=1) ** 2)


def register(pattern):
    name = f"my_{pattern.__name__}"

    def rule_pattern(A, B, s):
        return pattern(A, B, s)

    def implementation(A, B, s):
        return pattern(A, B, s, xp=np)

    shapes = [(4, 3), (3, 5), (5,)]
    ppto.fusion_rule(rule_pattern, name=name, shapes=shapes)(implementation)
    return f"__fused_{name}(A, B, s)"


def arguments():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((4, 3)), rng.standard_normal((3, 5)),
            rng.uniform(0.5, 1.5, 5)]  # fmt: skip


def check_gradients(function):
    args = arguments()
    value, grads = ppto.value_and_grad(function, wrt=(0, 1, 2))(*args)
    np.testing.assert_allclose(float(value), float(function(*args)), rtol=1e-12)
    for position, gradient in enumerate(grads):
        expected = central_differences(function, args, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-8)


CASES = [
    (product_in_order, product_sum, True),
    (product_swapped, product_sum, True),
    (larger_in_order, larger, True),
    (larger_swapped, larger, True),
    (difference_in_order, difference, True),
    (difference_swapped, difference, False),  # another value: never the rule's
    (quotient_in_order, quotient, True),
    (quotient_swapped, quotient, False),
]


@pytest.mark.parametrize(
    "function, pattern, fused", CASES, ids=[case[0].__name__ for case in CASES]
)
def test_only_a_commutative_operator_matches_swapped(function, pattern, fused,
                                                     own_rules):  # fmt: skip  # noqa: F811
    call = register(pattern)
    source = ppto.show_source(function, *arguments(), fused=True, file=io.StringIO())
    assert (call in source) == fused, source
    check_gradients(function)


def test_swapped_tries_are_bounded(own_rules, monkeypatch):  # noqa: F811
    # with no swapped tries left, the matcher takes the code's order only
    call = register(product_sum)
    monkeypatch.setattr(fuse_match, "SWAPS", 0)
    source = ppto.show_source(product_swapped, *arguments(), fused=True,
                              file=io.StringIO())  # fmt: skip
    assert call not in source, source
    check_gradients(product_swapped)


# elementwise rules: found by their pattern's canonical signature (fuse.py
# ``_canonical``), a commutative operation's operands sorted there. The code reads g
# twice, so the chain computing it is the rule's pattern, not part of a larger one;
# the gradients asked for read no intermediate of the chain, so the gradient's code
# computes g with the rule too. Arrays are large: smaller ones run unfused code.


def product_plus(a, b, c):
    return a * b + c


def scaled_difference(a, b, c):
    return (a - b) * c


def centred_scale(a, b):
    return (a - b) * a


def plus_product_swapped(x, y, z):
    g = z + y * x
    return np.sum(g * g)


def scaled_difference_swapped(x, y, z):
    g = z * (x - y)
    return np.sum(g * g)


def scaled_difference_reversed(x, y, z):
    g = z * (y - x)  # the rule's a is y here, its b x
    return np.sum(g * g)


def centred_scale_swapped(x, y, z):
    g = x * (x - y)
    return np.sum(g * g + z)


def centred_scale_other_operand(x, y, z):
    g = x * (y - x)  # a - b with a = y, times x: not (a - b) * a
    return np.sum(g * g + z)


def elementwise_arguments():
    rng = np.random.default_rng(11)
    return list(rng.standard_normal((3, LARGE + 3)))


ELEMENTWISE_CASES = [
    (plus_product_swapped, product_plus, "(y, x, z)", (0, 1)),
    (scaled_difference_swapped, scaled_difference, "(x, y, z)", (0, 1)),
    (scaled_difference_reversed, scaled_difference, "(y, x, z)", (0, 1)),
    # (x's gradient reads x - y: then g's chain is not one of its own)
    (centred_scale_swapped, centred_scale, "(x, y)", (1,)),
    (centred_scale_other_operand, centred_scale, None, (1,)),  # another value
]


@pytest.mark.parametrize(
    "function, pattern, arguments, wrt",
    ELEMENTWISE_CASES,
    ids=[case[0].__name__ for case in ELEMENTWISE_CASES],
)
def test_an_elementwise_rule_matches_commutative_operands_swapped(
    function,
    pattern,
    arguments,
    wrt,
    own_rules,  # noqa: F811
):
    calls = []

    def implementation(*values):
        calls.append(len(values))
        return pattern(*values)

    name = f"my_{pattern.__name__}"
    ppto.fusion_rule(pattern, name=name)(implementation)
    calls.clear()  # (registration checked it against the pattern)
    args = elementwise_arguments()
    shown = ppto.show_grad(function, *args, wrt=wrt, fused=True, file=None)
    if arguments is None:
        assert f"__fused_{name}" not in shown, shown
    else:
        assert f"g = __fused_{name}{arguments}" in shown, shown
    value, grads = ppto.value_and_grad(function, wrt=wrt)(*args)
    assert len(calls) == (0 if arguments is None else 1)
    # the same operations, commutative operands swapped: the same bits
    assert float(value) == float(function(*args))
    rng = np.random.default_rng(12)
    for position, gradient in zip(wrt, grads):
        direction = rng.standard_normal(LARGE + 3)
        moved = [list(args), list(args)]
        moved[0][position] = args[position] + 1e-6 * direction
        moved[1][position] = args[position] - 1e-6 * direction
        expected = (function(*moved[0]) - function(*moved[1])) / 2e-6
        computed = np.dot(gradient.numpy(), direction)
        np.testing.assert_allclose(computed, expected, rtol=1e-6)


def test_built_in_elementwise_rules_keep_signatures_of_their_own():
    # sorting commutative operands must not make two rules' patterns one
    from ppto.fusion.registry import RULES, elementwise_tree
    from ppto.symbolic import Operator
    from ppto.transform.fuse import _canonical

    seen = {}
    for rule in RULES:
        if rule.kind != "elementwise" or not isinstance(rule.template, Operator):
            continue
        tree = elementwise_tree(rule.template, rule.parameters)
        if tree is not None:
            signature, _ = _canonical(tree)
            assert signature not in seen, (rule.name, seen.get(signature))
            seen[signature] = rule.name
    assert len(seen) > 30
