"""The fusion matcher takes a commutative operator's operands (``+``, ``*``,
``maximum``, ``minimum``) in either order (ppto/transform/fuse_match.py), a
non-commutative one's (``-``, ``/``) only in its own; fused code computes what the
code did (gradients against central differences, float64)."""

import io

import numpy as np
import pytest

import ppto
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
