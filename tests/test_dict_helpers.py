"""Dicts passed from differentiated code to helper functions of the user's and to
local functions, and dicts returned by either: grad, value_and_grad, vjp, jvp and
grad of grad match float64 central differences of the plain function; what stays
unsupported raises a ppto error at the user's line with a rewrite."""

import re

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences
from tests.test_pytrees import assert_tree, tree_differences

RNG = np.random.default_rng(23)


def normal(*shape):
    return RNG.normal(size=shape)


# --- helpers taking and returning dicts ----------------------------------------------


def layer(p, x):
    return np.tanh(x @ p["W"] + p["b"])


def cell(x, h):
    return {"h": np.tanh(x + h), "c": x * h}


def params_dict_built_here(W, b, x):
    p = {"W": W, "b": b}
    return np.sum(layer(p, x) ** 2)


def params_dict_written_in_the_call(W, b, x):
    return np.sum(layer({"W": W, "b": b}, x) * x)


def params_dict_by_keyword(W, b, x):
    return np.sum(layer(x=x, p={"b": b, "W": W}))


def params_dict_argument(params, x):
    return np.sum(layer(params, x) ** 2)


def helper_dict_read_by_key(x, h):
    state = cell(x, h)
    return np.sum(state["h"] * state["c"])


def helper_dict_passed_on(W, x):
    state = cell(x, x * 0.5)
    return np.sum(layer({"W": W, "b": state["c"][0]}, state["h"]))


def helper_dict_into_a_helper(x, h):
    state = cell(x, h)
    return np.sum(reads_state(state))


def reads_state(state):
    return state["h"] * np.exp(state["c"])


def cells_in_a_loop(x, h):
    state = cell(x, h)
    for _ in range(3):
        state = cell(x, state["h"])
    return np.sum(state["h"] + state["c"])


def helpers_in_a_loop(W, b, x):
    p = {"W": W, "b": b}
    for _ in range(2):
        x = layer(p, x)
    return np.sum(x)


def helpers_in_branches(W, b, x):
    p = {"W": W, "b": b}
    if np.sum(x) > 0:
        y = layer(p, x)
    else:
        y = layer(p, -x)
    if y[0, 0] > 0:
        state = cell(y, x)
    else:
        state = cell(x, y)
    return np.sum(state["c"])


def stack(p, x):
    for W, b in zip(p["Ws"], p["bs"]):
        x = np.tanh(x @ W + b)
    return x


def dict_of_lists_built_here(W1, W2, b1, b2, x):
    p = {"Ws": [W1, W2], "bs": [b1, b2]}
    return np.sum(stack(p, x) ** 2)


def nested_params(params, x):
    for p in params["layers"]:
        x = layer(p, x)
    return np.sum(x * stack(params["extra"], x))


def nested_written_in_the_call(W1, b1, W2, b2, x):
    return np.sum(mlp({"layers": [{"W": W1, "b": b1}, {"W": W2, "b": b2}]}, x))


def mlp(params, x):
    for p in params["layers"]:
        x = layer(p, x)
    return x


def local_def_returning_a_dict(x, h):
    def split(a):
        return {"u": a * 2.0, "v": np.sin(a) * h}

    parts = split(x)
    return np.sum(parts["u"] * parts["v"])


def local_def_given_dicts(W, b, x):
    def local_layer(p, y):
        return np.tanh(y @ p["W"] + p["b"])

    p = {"W": W, "b": b}
    h = local_layer(p, x)
    return np.sum(local_layer(y=h, p={"W": W * 2.0, "b": b}))


def local_def_passing_its_dict_on(W, b, x):
    def twice(p, y):
        total = 0.0
        for _key, value in p.items():
            total = total + np.sum(value)
        return layer(p, layer(p, y)) * total

    return np.sum(twice({"W": W, "b": b}, x))


def local_def_returning_a_named_dict(x, h):
    def split(a):
        out = {"u": a * h, "v": np.cos(a)}
        return out

    first = split(x)
    second = split(first["v"])
    return np.sum(first["u"] * second["u"] + second["v"])


CASES = [
    (
        "dict built here",
        params_dict_built_here,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "dict written in the call",
        params_dict_written_in_the_call,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "dict by keyword",
        params_dict_by_keyword,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "params argument",
        params_dict_argument,
        lambda: ({"W": normal(3, 3), "b": normal(3)}, normal(2, 3)),
    ),
    (
        "helper's dict read by key",
        helper_dict_read_by_key,
        lambda: (normal(2, 3), normal(2, 3)),
    ),
    (
        "helper's dict passed on",
        helper_dict_passed_on,
        lambda: (normal(3, 3), normal(2, 3)),
    ),
    (
        "helper's dict into a helper",
        helper_dict_into_a_helper,
        lambda: (normal(2, 3), normal(2, 3)),
    ),
    ("cells in a loop", cells_in_a_loop, lambda: (normal(2, 3), normal(2, 3))),
    (
        "helpers in a loop",
        helpers_in_a_loop,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "helpers in branches",
        helpers_in_branches,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "dict of lists built here",
        dict_of_lists_built_here,
        lambda: (normal(3, 3), normal(3, 3), normal(3), normal(3), normal(2, 3)),
    ),
    (
        "nested params",
        nested_params,
        lambda: (
            {
                "layers": [{"W": normal(3, 3), "b": normal(3)} for _ in range(2)],
                "extra": {"Ws": [normal(3, 3)], "bs": [normal(3)]},
            },
            normal(2, 3),
        ),
    ),
    (
        "nested written in the call",
        nested_written_in_the_call,
        lambda: (normal(3, 3), normal(3), normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "local def given dicts",
        local_def_given_dicts,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "local def passing its dict on",
        local_def_passing_its_dict_on,
        lambda: (normal(3, 3), normal(3), normal(2, 3)),
    ),
    (
        "local def returning a dict",
        local_def_returning_a_dict,
        lambda: (normal(2, 3), normal(2, 3)),
    ),
    (
        "local def returning a named dict",
        local_def_returning_a_named_dict,
        lambda: (normal(2, 3), normal(2, 3)),
    ),
]


def expected_gradient(function, arguments, position):
    if isinstance(arguments[position], (dict, list)):
        return tree_differences(function, arguments, position)
    return central_differences(function, arguments, position)


def check(actual, expected, what):
    if isinstance(expected, (dict, list)):
        assert_tree(actual, expected, what)
    else:
        assert_gradient(actual, expected, what)


@pytest.mark.parametrize(
    "function, make", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_grad_and_value_and_grad_match_central_differences(function, make):
    arguments = make()
    for position in range(len(arguments)):
        what = f"{function.__name__} wrt {position}"
        expected = expected_gradient(function, arguments, position)
        check(ppto.grad(function, wrt=position)(*arguments), expected, what)
        value, gradient = ppto.value_and_grad(function, wrt=position)(*arguments)
        assert np.allclose(np.asarray(value), function(*arguments), rtol=1e-12)
        check(gradient, expected, f"value_and_grad {what}")


@pytest.mark.parametrize(
    "function, make", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_vjp_and_jvp_match_central_differences(function, make):
    arguments = make()
    out, pullback = ppto.vjp(function, *arguments)
    assert np.allclose(np.asarray(out), function(*arguments), rtol=1e-12)
    grads = pullback(np.float64(1.5))
    for position in range(len(arguments)):
        expected = expected_gradient(function, arguments, position)
        scaled = _like(expected, lambda leaf: np.asarray(leaf) * 1.5)
        check(grads[position], scaled, f"vjp {function.__name__} {position}")
    # jvp along a random direction of every float leaf
    tangents = _like(arguments, lambda leaf: normal(*np.shape(leaf)))
    out, tangent = ppto.jvp(function, arguments, tangents)
    eps = 1e-6
    ahead = function(*_moved(arguments, tangents, eps))
    behind = function(*_moved(arguments, tangents, -eps))
    assert_gradient(tangent, np.asarray((ahead - behind) / (2 * eps)), "jvp")


def _like(tree, leaf):
    if isinstance(tree, dict):
        return {key: _like(item, leaf) for key, item in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_like(item, leaf) for item in tree)
    return leaf(tree)


def _moved(tree, direction, step):
    if isinstance(tree, dict):
        return {key: _moved(tree[key], direction[key], step) for key in tree}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_moved(t, d, step) for t, d in zip(tree, direction))
    return tree + step * direction


W0, B0, X0 = normal(3, 3), normal(3), normal(2, 3)


def scaled_dict_built_here(s):
    p = {"W": W0 * s, "b": B0}
    return np.sum(layer(p, X0) ** 2)


def scaled_helper_dict(s):
    state = cell(X0 * s, X0)
    return np.sum(reads_state(state) * state["c"])


def scaled_local_def(s):
    def split(a):
        return {"u": a * s, "v": np.sin(a * s)}

    parts = split(X0)
    return np.sum(parts["u"] * parts["v"])


@pytest.mark.parametrize(
    "function", [scaled_dict_built_here, scaled_helper_dict, scaled_local_def]
)
def test_grad_of_grad_matches_second_differences(function):
    s, h = 0.7, 1e-3
    second = ppto.grad(ppto.grad(function))(s)
    expected = (function(s + h) - 2 * function(s) + function(s - h)) / h**2
    assert_gradient(second, np.asarray(expected), function.__name__, rtol=1e-4)


# --- what stays unsupported ---------------------------------------------------------


def key_not_constant(p, x, name):
    return x @ p[name]


def computed_key(W, b, x):
    return np.sum(key_not_constant({"W": W, "b": b}, x, "W"))


def writes_into(p, x):
    p["W"] = p["W"] * 2.0
    return x @ p["W"]


def mutated_in_the_helper(W, b, x):
    return np.sum(writes_into({"W": W, "b": b}, x))


def as_keywords(W, b, x):
    p = {"W": W, "b": b}
    return np.sum(keywords_layer(x, **p))


def keywords_layer(x, W, b):
    return np.tanh(x @ W + b)


def local_def_given_dicts_of_other_keys(W, b, x):
    def local_layer(p, y):
        return np.tanh(y @ p["W"])

    h = local_layer({"W": W, "b": b}, x)
    return np.sum(local_layer({"W": W}, h))


def local_def_given_a_dict_and_an_array(W, b, x):
    def local_layer(p, y):
        return np.tanh(y @ p)

    h = local_layer({"W": W, "b": b}, x)
    return np.sum(local_layer(W, h))


def local_def_given_a_list_of_dicts(W, b, x):
    def local_layer(ps, y):
        return np.tanh(y @ ps[0]["W"])

    return np.sum(local_layer([{"W": W, "b": b}], x))


def local_def_rebinding_its_dict(W, b, x):
    def local_layer(p, y):
        p = p["W"] * 2.0
        return np.tanh(y @ p)

    return np.sum(local_layer({"W": W, "b": b}, x))


@ppto.operator
def operator_layer(p, x):
    return np.tanh(x @ p["W"] + p["b"])


def dict_to_an_operator(W, b, x):
    return np.sum(operator_layer({"W": W, "b": b}, x))


def helper_dict_to_star_args(x, h):
    state = cell(x, h)
    return np.sum(summed(state))


def summed(*parts):
    return parts[0]


def line_of(function, text):
    import inspect

    lines, first = inspect.getsourcelines(function)
    for number, line in enumerate(lines):
        if text in line:
            return first + number
    raise AssertionError(text)


@pytest.mark.parametrize(
    "function, line_text, where, message, advice",
    [
        (
            computed_key,
            "key_not_constant({",
            computed_key,
            "constant keys",
            "p['name']",
        ),
        (
            mutated_in_the_helper,
            "writes_into({",
            mutated_in_the_helper,
            "a write into p",
            "new dict",
        ),
        (as_keywords, "keywords_layer(x, **p)", as_keywords, "**p", "W=p['W']"),
        (
            local_def_given_dicts_of_other_keys,
            'local_layer({"W": W}, h)',
            local_def_given_dicts_of_other_keys,
            "dicts of different keys",
            "same keys",
        ),
        (
            local_def_given_a_dict_and_an_array,
            "local_layer(W, h)",
            local_def_given_a_dict_and_an_array,
            "something else at another",
            "two functions",
        ),
        (
            local_def_given_a_list_of_dicts,
            'local_layer([{"W": W, "b": b}], x)',
            local_def_given_a_list_of_dicts,
            "a local function",
            "module level",
        ),
        (
            local_def_rebinding_its_dict,
            'p = p["W"] * 2.0',
            local_def_rebinding_its_dict,
            "rebinding p",
            "another name",
        ),
        (
            dict_to_an_operator,
            "operator_layer({",
            dict_to_an_operator,
            "a ppto operator",
            "without @ppto.operator",
        ),
        (
            helper_dict_to_star_args,
            "summed(state)",
            helper_dict_to_star_args,
            "*parts",
            "parameter",
        ),
    ],
    ids=[
        "key not constant",
        "mutated in the helper",
        "**kwargs",
        "local def given dicts of other keys",
        "local def given a dict and an array",
        "local def given a list of dicts",
        "local def rebinding its dict",
        "dict to an operator",
        "*args",
    ],
)
def test_unsupported_forms_name_the_users_line(
    function, line_text, where, message, advice
):
    arguments = (normal(3, 3), normal(3), normal(2, 3))
    if function is helper_dict_to_star_args:
        arguments = (normal(2, 3), normal(2, 3))
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(function, wrt=0)(*arguments)
    error = caught.value
    text = str(error)
    assert error.filename == __file__, text
    assert error.lineno == line_of(where, line_text), text
    assert message in text, text
    if function in INSIDE_THE_HELPER:  # (raised at the call, from the helper's line)
        helper, helper_line = INSIDE_THE_HELPER[function]
        assert f"call to {helper.__name__}:" in text, text
        text = str(error.__cause__)
        assert error.__cause__.lineno == line_of(helper, helper_line), text
    assert re.search("Instead: .*" + re.escape(advice), text), text


INSIDE_THE_HELPER = {
    computed_key: (key_not_constant, "return x @ p[name]"),
    mutated_in_the_helper: (writes_into, 'p["W"] = p["W"] * 2.0'),
}


# --- the rewrites the refusals of nested and conditionally chosen dicts suggest --


def _doubled(x):
    return {"k": x * 2.0, "j": x}


def _sine(x):
    return {"k": np.sin(x)}


def chosen_in_an_if_statement(W, x):
    if np.sum(x) > 0:
        d = _doubled(x)
        v = d["k"]
    else:
        e = _sine(x)
        v = e["k"]
    return np.sum(v * (W @ x))


def inner_dict_joined_or_named(W, x):
    d = {"a_w": W}
    a = {"w": W * 0.5, "b": x}
    return np.sum(np.tanh(d["a_w"] @ x + a["w"] @ a["b"]))


@pytest.mark.parametrize(
    "function", [chosen_in_an_if_statement, inner_dict_joined_or_named]
)
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["positive", "negative"])
def test_suggested_rewrites_match_central_differences(function, sign):
    arguments = (normal(3, 3), sign * np.abs(normal(3)))
    gradients = ppto.grad(function, wrt=(0, 1))(*arguments)
    for position, gradient in enumerate(gradients):
        expected = central_differences(function, arguments, position)
        assert_gradient(np.asarray(gradient), expected, f"d/d arg {position}")


# --- helpers whose result is unused, changing the dict they are given -------------


def sets_an_entry(p, x):
    p["b"] = p["W"][0] * x


def updates(p, x):
    p.update({"b": p["W"][0] * x})


def adds_into_an_entry(p, x):
    p["b"] += p["W"][0] * x


def entry_set_unused(W, b, x):
    p = {"W": W, "b": b * 1.0}
    sets_an_entry(p, b)
    return np.sum(p["b"] * x)


def entry_updated_unused(W, b, x):
    p = {"W": W, "b": b * 1.0}
    updates(p, b)
    return np.sum(p["b"] * x)


def entry_added_into_unused(W, b, x):
    p = {"W": W, "b": b * 1.0}
    adds_into_an_entry(p, b)
    return np.sum(p["b"] * x)


def entry_set_in_a_loop_unused(W, b, x):
    p = {"W": W, "b": b * 1.0}
    for _ in range(2):
        sets_an_entry(p, b)
    return np.sum(p["b"] * x)


def argument_entry_set_unused(p, b, x):
    sets_an_entry(p, b)
    return np.sum(p["b"] * x)


def entry_set_with_no_differentiated_value(W, b, x):
    p = {"W": np.ones((3, 3)), "b": np.zeros(3)}
    sets_an_entry(p, 2.0)
    return np.sum(p["b"] * x)


@pytest.mark.parametrize(
    "function, helper, call_text, line_text",
    [
        (entry_set_unused, sets_an_entry, "sets_an_entry(p, b)", 'p["b"] = p'),
        (entry_updated_unused, updates, "updates(p, b)", "p.update("),
        (entry_added_into_unused, adds_into_an_entry, "adds_into", 'p["b"] +='),
        (entry_set_in_a_loop_unused, sets_an_entry, "sets_an_entry(", 'p["b"] ='),
        (
            entry_set_with_no_differentiated_value,
            sets_an_entry,
            "sets_an_entry(p, 2.0)",
            'p["b"] = p',
        ),
        (argument_entry_set_unused, sets_an_entry, "sets_an_entry(", 'p["b"] ='),
    ],
    ids=["set", "update", "augmented", "in a loop", "constants", "an argument"],
)
def test_a_helper_changing_its_dict_is_refused_where_it_runs_as_written(
    function, helper, call_text, line_text
):
    # (the call ran as written on a dict made of the values: the caller read the
    # old entry, value sum(b * x) where NumPy gives sum(W[0] * b * x), gradient
    # x where NumPy gives W[0] * x; the entry added into: the value right, as
    # the array itself changed, but the gradient x; the constants: value 0
    # where NumPy gives 2 * sum(x), gradient with respect to x 0 where it is 2)
    W, b, x = normal(3, 3), normal(3), normal(3)
    if function is argument_entry_set_unused:
        W = {"W": W, "b": normal(3)}
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(function, wrt=1)(W, b, x)
    error = caught.value
    assert error.filename == __file__, str(error)
    assert error.lineno == line_of(function, call_text), str(error)
    assert f"call to {helper.__name__}: " in str(error), str(error)
    assert "a write into p" in str(error), str(error)
    assert error.__cause__.lineno == line_of(helper, line_text), str(error.__cause__)


def shows(p):
    print(sorted(p), p)
    for key in p:
        print(key, np.sum(p[key]))


def shown_unused(W, b, x):
    p = {"W": W, "b": b * 1.0}
    shows(p)
    return np.sum(np.tanh(p["W"] @ x + p["b"]))


def test_a_helper_reading_its_dict_with_its_result_unused_runs():
    W, b, x = normal(3, 3), normal(3), normal(3)
    for position in range(3):
        expected = central_differences(shown_unused, (W, b, x), position)
        gradient = ppto.grad(shown_unused, wrt=position)(W, b, x)
        assert_gradient(gradient, expected, f"shown_unused wrt {position}")
