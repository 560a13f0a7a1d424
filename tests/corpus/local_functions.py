"""Corpus functions with local functions and callables passed as arguments: a
``def`` or a lambda inside the function (called in loops and branches, closing
over differentiated values, a closed-over variable assigned again between calls,
with defaults, calling each other, defined in a loop, nested), ``map``, and
callables passed in (a ufunc, a ppto operator, a user function, a
``functools.partial``): the same function with two different callables is two
cases, each checked against its own finite differences."""

import functools

import numpy as np

import ppto
from tests.corpus.case import Case, F, K, S

# --- lambdas ---


def lambda_square(x):
    sq = lambda v: v * v  # noqa: E731
    return np.sum(sq(x))


def lambda_in_loop(x, w):
    scale = lambda v, k=2.0: v * w * k  # noqa: E731
    total = 0.0
    for i in range(3):
        if i % 2 == 0:
            total = total + np.sum(scale(x))
        else:
            total = total + np.sum(scale(x, k=0.5) ** 2)
    return total


def lambda_called_on_the_spot(x, s):
    return np.sum((lambda v: np.sin(v) * s)(x) * x)


def lambda_of_two_closures(x, a, b):
    affine = lambda v: a * v + b  # noqa: E731
    return np.sum(np.tanh(affine(affine(x))))


# --- nested defs ---


def closure_over_argument(x, w):
    def layer(v):
        return np.tanh(v * w)

    return np.sum(layer(layer(x)))


def closure_over_computed_value(x, w):
    scale = np.exp(w) * 0.5

    def layer(v):
        return np.sin(v) * scale

    return np.sum(layer(x) * layer(x * 2.0))


def defs_calling_each_other(x, w):
    def inner(v):
        return np.sin(v) * w

    def outer(v):
        return inner(v) + inner(v * 2.0)

    return np.sum(outer(x) * x)


def closure_rebound_between_calls(x, w):
    c = w

    def f(v):  # (reads c as it is at each call, as Python's closure does)
        return np.sin(v * c)

    a = f(x)
    c = w * w
    return np.sum(a * f(x))


def closure_assigned_after_def(x, w):
    def f(v):
        return v * late

    late = np.exp(w)
    return np.sum(f(x) ** 2)


def nonlocal_only_read(x, w):
    total = np.sum(x * w)

    def scaled(v):
        nonlocal total  # (a declaration only: scaled never assigns total)
        return v * total

    return np.sum(scaled(x))


def def_with_default_from_enclosing(x, w):
    shift = np.sum(w)

    def shifted(v, by=shift):
        return np.exp(v * 0.5 + by)

    return np.sum(shifted(x) + shifted(x, by=0.25))


def def_in_loop_body(x, w):
    total = 0.0
    for i in range(3):
        c = w * (i + 1.0)

        def step(v, k=i):
            return np.sin(v * c) * k

        total = total + np.sum(step(x))
    return total


def def_in_branch(x, w, flag):
    if flag:

        def act(v):
            return np.tanh(v) * w

        y = act(x)
    else:
        y = x * w
    return np.sum(y * y)


def def_inside_def(x, w):
    def outer(v):
        def inner(u):
            return u * w

        return np.exp(inner(v)) + inner(v * v)

    return np.sum(outer(x))


def def_with_its_own_loop(x, w):
    def power(v, n):
        result = v
        for _ in range(n - 1):
            result = result * v * w
        return result

    return np.sum(power(x, 3))


def def_returning_a_pair(x, w):
    def both(v):
        return np.sin(v) * w, np.cos(v)

    a, b = both(x)
    return np.sum(a * b)


def def_on_matrices(x, w):
    def dense(h):
        return np.tanh(h @ w)

    return np.sum(dense(x) ** 2)


def ppto_style_local(x, w):
    def gate(v):
        return ppto.sigmoid(v) * ppto.tanh(v * w)

    return ppto.sum(gate(x))


# --- map ---


def map_of_lambda(x, w):
    hs = [x, x * 2.0, x * 3.0]
    ys = list(map(lambda h: np.tanh(h * w), hs))
    return np.sum(np.stack(ys)) + sum(map(np.sum, hs))


def map_of_local_def(x, w):
    def layer(h):
        return np.sin(h) * w

    total = 0.0
    for y in map(layer, [x, x * x]):
        total = total + np.sum(y)
    return total


# --- callables passed as arguments ---


def applied(x, act):
    return np.sum(act(x) * x)


def softplus(v):
    return np.log(1.0 + np.exp(v))


def applied_in_closure(x, w, act):
    def layer(v):
        return act(v * w)

    return np.sum(layer(layer(x)) ** 2)


def scaled_sine(v, k, shift=0.0):
    return np.sin(v * k) + shift


def row_energy(x, reduce):
    return np.sum(reduce(x * x) ** 2)


def dense(x, w, act):
    return act(x @ w)


def passed_on_to_a_helper(x, w1, w2, act):
    return np.sum(dense(dense(x, w1, act), w2, np.sin))


def helper_given_two_callables(x, w):
    return np.sum(dense(x, w, np.tanh) * dense(x, w, ppto.sigmoid))


CASES = [
    Case(lambda_square, F(3)),
    Case(lambda_in_loop, F(3), F(3)),
    Case(lambda_called_on_the_spot, F(4), S()),
    Case(lambda_of_two_closures, F(3), F(3), S()),
    Case(closure_over_argument, F(3), F(3)),
    Case(closure_over_computed_value, F(3), F(3)),
    Case(defs_calling_each_other, F(3), F(3)),
    Case(closure_rebound_between_calls, F(3), F(3)),
    Case(closure_assigned_after_def, F(3), F(3)),
    Case(nonlocal_only_read, F(3), F(3)),
    Case(def_with_default_from_enclosing, F(3), F(2)),
    Case(def_in_loop_body, F(3), F(3)),
    Case(def_in_branch, F(3), F(3), K(True), id="def_in_branch-taken"),
    Case(def_in_branch, F(3), F(3), K(False), id="def_in_branch-not_taken"),
    Case(def_inside_def, F(3), F(3)),
    Case(def_with_its_own_loop, F(3), F(3)),
    Case(def_returning_a_pair, F(3), F(3)),
    Case(def_on_matrices, F(2, 3), F(3, 4)),
    Case(ppto_style_local, F(3), F(3)),
    Case(map_of_lambda, F(3), F(3)),
    Case(map_of_local_def, F(3), F(3)),
    Case(applied, F(3), K(np.tanh), id="applied-tanh"),
    Case(applied, F(3), K(np.sin), id="applied-sin"),
    Case(applied, F(3), K(ppto.sigmoid), id="applied-ppto_sigmoid"),
    Case(applied, F(3), K(softplus), id="applied-user_function"),
    Case(applied, F(3), K(lambda v: v * v * v), id="applied-lambda"),
    Case(
        applied,
        F(3),
        K(functools.partial(scaled_sine, k=3.0, shift=0.5)),
        id="applied-partial",
    ),
    Case(applied_in_closure, F(3), F(3), K(np.tanh), id="applied_in_closure-tanh"),
    Case(applied_in_closure, F(3), F(3), K(softplus), id="applied_in_closure-softplus"),
    Case(row_energy, F(3, 2), K(functools.partial(np.sum, axis=1)), id="row_energy"),
    Case(
        passed_on_to_a_helper,
        F(2, 3),
        F(3, 4),
        F(4, 2),
        K(np.tanh),
        id="passed_on_to_a_helper-tanh",
    ),
    Case(
        passed_on_to_a_helper,
        F(2, 3),
        F(3, 4),
        F(4, 2),
        K(softplus),
        id="passed_on_to_a_helper-softplus",
    ),
    Case(helper_given_two_callables, F(2, 3), F(3, 4)),
]
