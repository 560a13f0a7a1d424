"""Dicts with constant keys built inside differentiated code (written out, returned
by a helper, returned by the function for jvp/vjp) and nested lists whose items
differ in shape (a helper's, a loop over pairs): gradients, pullbacks and tangents
match float64 central differences of the plain function; what is not supported
raises a ppto error at the user's line."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

RNG = np.random.default_rng(23)


def normal(*shape):
    return RNG.normal(size=shape)


# --- dicts inside the function and from helpers ------------------------------------


def hidden_and_score(x):
    h = np.tanh(x)
    return {"h": h, "y": np.sum(h**2)}


def reads_a_helpers_dict(x):
    d = hidden_and_score(x)
    return np.sum(d["h"]) * d["y"]


def written_out(x, w):
    d = {"a": x @ w, "b": np.sin(x)}
    total = 0.0
    for key, value in d.items():
        total = total + np.sum(value**2) * len(key)
    return total + np.sum(d["a"]) * len(d)


def dict_holding_a_list(x):
    return {"a": x * 2.0, "b": [np.sin(x), np.sum(x)]}


def reads_a_list_in_a_dict(x):
    d = dict_holding_a_list(x)
    return np.sum(d["a"] * d["b"][0]) * d["b"][1]


def returned_name(x, w):
    out = {"z": x @ w, "n": np.sum(x)}
    return out


def passes_on_a_returned_name(x, w):
    return returned_name(x, w)


def through_two_helpers(x, w):
    d = passes_on_a_returned_name(x, w)
    return np.sum(np.exp(d["z"])) + d["n"] ** 2


def keys_and_values(x):
    d = hidden_and_score(x)
    total = 0.0
    for key in d:
        total = total + np.sum(d[key])
    for value in d.values():
        total = total * 0.5 + np.sum(value**2)
    return total + ("y" in d) * np.sum(d["h"] * 3.0)


def written_to(x):
    d = {"a": x, "b": np.sin(x)}
    d["a"] = d["a"] * d["b"]
    return np.sum(d["a"])


def made_in_branches(x):
    if np.sum(x) > 0:
        d = {"a": x * 2.0, "b": x}
    else:
        d = {"a": np.cos(x), "b": x}
    return np.sum(d["a"] * d["b"])


def carried_round_a_loop(x):
    d = {"h": x, "n": 0.0}
    for _ in range(3):
        d = {"h": np.tanh(d["h"]) * 1.5, "n": d["n"] + np.sum(d["h"])}
    return np.sum(d["h"]) + d["n"]


CASES = [
    ("a helper's dict", reads_a_helpers_dict, lambda: (normal(2, 3),)),
    ("written out", written_out, lambda: (normal(2, 3), normal(3, 3))),
    ("a list in a dict", reads_a_list_in_a_dict, lambda: (normal(2, 3),)),
    ("through two helpers", through_two_helpers, lambda: (normal(2, 3), normal(3, 2))),
    ("keys and values", keys_and_values, lambda: (normal(3),)),
    ("written to", written_to, lambda: (normal(3),)),
    ("made in branches", made_in_branches, lambda: (normal(3),)),
    ("made in the other branch", made_in_branches, lambda: (-np.abs(normal(3)),)),
    ("carried round a loop", carried_round_a_loop, lambda: (normal(2, 2),)),
]


@pytest.mark.parametrize(
    "function, make", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_grad_through_dicts_matches_central_differences(function, make):
    arguments = make()
    for position in range(len(arguments)):
        gradient = ppto.grad(function, wrt=position)(*arguments)
        expected = central_differences(function, arguments, position)
        assert_gradient(gradient, expected, f"{function.__name__} wrt {position}")
    direction = [normal(*np.shape(a)) for a in arguments]
    _, tangent = ppto.jvp(function, arguments, direction)
    eps = 1e-6
    ahead = function(*(a + eps * d for a, d in zip(arguments, direction)))
    behind = function(*(a - eps * d for a, d in zip(arguments, direction)))
    assert np.isclose(float(np.asarray(tangent)), (ahead - behind) / (2 * eps))


def test_vjp_hands_back_a_dict_as_a_dict():
    x, w = normal(2, 3), normal(3, 2)
    out, pullback = ppto.vjp(returned_name, x, w)
    plain = returned_name(x, w)
    assert type(out) is dict and list(out) == ["z", "n"]
    for key in plain:
        assert np.allclose(np.asarray(out[key]), plain[key], rtol=1e-12)
    cotangent = {"n": 0.7, "z": normal(2, 2)}  # (any order of the keys)

    def contracted(x, w):
        result = returned_name(x, w)
        return float(np.sum(cotangent["z"] * result["z"]) + 0.7 * result["n"])

    dx, dw = pullback(cotangent)
    assert_gradient(dx, central_differences(contracted, (x, w), 0), "dx")
    assert_gradient(dw, central_differences(contracted, (x, w), 1), "dw")
    with pytest.raises(ppto.ShapeError, match="a dict of keys .'z', 'n'.*got a list"):
        pullback([cotangent["z"], 0.7])
    with pytest.raises(ppto.ShapeError, match="got a dict of keys .'z',."):
        pullback({"z": cotangent["z"]})


def test_jvp_hands_back_a_dict_of_tangents():
    x, v, w = normal(2, 3), normal(2, 3), normal(3, 2)
    out, tangent = ppto.jvp(returned_name, (x, w), (v, None))
    assert type(out) is dict and type(tangent) is dict and list(tangent) == ["z", "n"]
    eps = 1e-6
    ahead, behind = returned_name(x + eps * v, w), returned_name(x - eps * v, w)
    for key in ("z", "n"):
        expected = np.asarray((ahead[key] - behind[key]) / (2 * eps))
        assert_gradient(tangent[key], expected, f"tangent {key}")


def test_vjp_and_jvp_of_a_dict_holding_a_list():
    x, v = normal(2, 3), normal(2, 3)
    out, pullback = ppto.vjp(dict_holding_a_list, x)
    assert type(out) is dict and type(out["b"]) is list and len(out["b"]) == 2
    ca, cb = normal(2, 3), normal(2, 3)

    def contracted(x):
        result = dict_holding_a_list(x)
        return float(
            np.sum(ca * result["a"]) + np.sum(cb * result["b"][0]) + result["b"][1]
        )

    (dx,) = pullback({"a": ca, "b": [cb, 1.0]})
    assert_gradient(dx, central_differences(contracted, (x,), 0), "dx")
    _, tangent = ppto.jvp(dict_holding_a_list, (x,), (v,))
    eps = 1e-6
    ahead, behind = dict_holding_a_list(x + eps * v), dict_holding_a_list(x - eps * v)
    for number in range(2):
        expected = np.asarray((ahead["b"][number] - behind["b"][number]) / (2 * eps))
        assert_gradient(tangent["b"][number], expected, f"tangent b {number}")


# --- what stays refused -------------------------------------------------------------


def test_grad_and_jacobian_of_a_function_returning_a_dict_say_so():
    x, w = normal(2, 3), normal(3, 2)
    with pytest.raises(ppto.GradError, match="returned_name returns a dict"):
        ppto.grad(returned_name)(x, w)
    for mode in ("reverse", "forward"):
        with pytest.raises(ppto.GradError, match="returned_name returns a dict"):
            ppto.jacobian(returned_name, mode=mode)(x, w)


def key_known_only_when_run(x, name):
    d = hidden_and_score(x)
    return np.sum(d[name])


def dict_of_other_keys(x):
    if np.sum(x) > 0:
        return {"a": x}
    return {"b": x}


def reads_dict_of_other_keys(x):
    d = dict_of_other_keys(x)
    return np.sum(d["a"])


def new_key(x):
    d = {"a": x}
    d["b"] = x
    return np.sum(d["b"])


def helpers_dict_read_in_place(x):
    return np.sum(hidden_and_score(x)["h"])


def _refusal(function, *arguments):
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(function)(*arguments)
    error = caught.value
    assert error.filename == __file__
    assert "Instead:" in str(error)
    return error


def _line_of(function, text: str) -> int:
    lines, start = inspect.getsourcelines(function)
    return start + next(n for n, line in enumerate(lines) if text in line)


def test_a_key_known_only_when_the_code_runs_is_refused():
    error = _refusal(key_known_only_when_run, normal(3), "h")
    assert error.lineno == _line_of(key_known_only_when_run, "d[name]")
    assert "key must be written out" in str(error)


def test_a_new_key_is_refused():
    error = _refusal(new_key, normal(3))
    assert error.lineno == _line_of(new_key, 'd["b"] = x')
    assert "cannot add the key 'b' to d" in str(error)


def test_returns_of_different_keys_are_refused():
    with pytest.raises(ppto.TransformError) as caught:
        ppto.vjp(dict_of_other_keys, normal(3))
    error = caught.value
    assert error.filename == __file__ and "Instead:" in str(error)
    assert error.lineno == _line_of(dict_of_other_keys, 'return {"b"')
    assert "dict of other keys" in str(error)
    with pytest.raises(ppto.TransformError) as caught:  # (at the call, then there)
        ppto.grad(reads_dict_of_other_keys)(normal(3))
    error = caught.value
    assert error.lineno == _line_of(reads_dict_of_other_keys, "d = ")
    assert error.__cause__.lineno == _line_of(dict_of_other_keys, 'return {"b"')


def test_a_helpers_dict_read_in_place_is_refused():
    error = _refusal(helpers_dict_read_in_place, normal(3))
    assert error.lineno == _line_of(helpers_dict_read_in_place, "hidden_and_score(x)")
    assert "assign it to a name first" in str(error)


# --- nested lists whose items differ in shape ---------------------------------------


def scaled_and_summed(x):
    return [[x, np.sum(x)], [np.sin(x), x[0]]]


def reads_inner_items_of_unlike_shapes(x):
    parts = scaled_and_summed(x)
    first = parts[0]
    return np.sum(first[0]) * first[1] + np.sum(parts[1][1] * parts[1][0][0])


def loops_over_pairs_of_unlike_shapes(x):
    total = 0.0
    for a, b in scaled_and_summed(x):
        total = total + np.sum(a) * np.sum(b)
    return total


def partly_nested(x):
    return [x * 2.0, [np.sin(x), np.sum(x**2)]]


def reads_partly_nested(x):
    parts = partly_nested(x)
    return np.sum(parts[0] * parts[1][0]) * parts[-1][1]


def written_out_partly_nested(x):
    parts = [np.exp(x), [x, np.sum(x)]]
    return np.sum(parts[0]) * parts[1][1] + np.sum(parts[1][0] ** 2)


def weight_and_bias_loop(x, w1, b1, w2, b2):
    layers = [[w1, b1], [w2, b2]]
    h = x
    for w, b in layers:
        h = np.tanh(h @ w + b)
    return np.sum(h**2)


NESTED = [
    ("inner items of unlike shapes", reads_inner_items_of_unlike_shapes, (2, 3)),
    ("loop over pairs of unlike shapes", loops_over_pairs_of_unlike_shapes, (2, 3)),
    ("partly nested from a helper", reads_partly_nested, (3,)),
    ("partly nested written out", written_out_partly_nested, (2, 2)),
]


@pytest.mark.parametrize(
    "function, shape", [c[1:] for c in NESTED], ids=[c[0] for c in NESTED]
)
def test_grad_through_nested_lists_matches_central_differences(function, shape):
    arguments = (normal(*shape),)
    gradient = ppto.grad(function)(*arguments)
    expected = central_differences(function, arguments, 0)
    assert_gradient(gradient, expected, function.__name__)


def test_a_loop_over_weight_and_bias_pairs():
    arguments = (normal(2, 3), normal(3, 3), normal(3), normal(3, 2), normal(2))
    for position in range(len(arguments)):
        gradient = ppto.grad(weight_and_bias_loop, wrt=position)(*arguments)
        expected = central_differences(weight_and_bias_loop, arguments, position)
        assert_gradient(gradient, expected, f"wrt {position}")


# --- dicts given to the function: iterated, they give their keys ------------------

ORDER = {0: 1, 1: 0}  # (keys 0, 1; read by position, its items were 1, 0)
SCALES = {"a": 2.0, "bb": -1.0}


def loops_over_a_module_level_dict(x):
    t = 0.0
    for k in ORDER:
        t = t * 2.0 + x[k] * (k + 1.0)
    return t


def loops_over_a_dict_of_scales(x):
    t = 0.0
    for name in SCALES:
        t = t + SCALES[name] * np.sum(x * x) * len(name)
    return t


def loops_over_an_argument(x, order):
    t = 0.0
    for k in order:
        t = t * 2.0 + x[k] * (k + 1.0)
    return t


def _weighted_by_keys(x, order):
    t = 0.0
    for i, k in enumerate(order):
        t = t + x[k] * (i + 1.0)
    for k, s in zip(order, [3.0, 4.0]):
        t = t + x[k] * s
    return t


def passes_an_argument_on(x, order):
    return _weighted_by_keys(x, order) * 2.0 + loops_over_an_argument(x, ORDER)


@pytest.mark.parametrize(
    "function, given",
    [
        (loops_over_a_module_level_dict, ()),
        (loops_over_a_dict_of_scales, ()),
        (loops_over_an_argument, ({0: 1, 1: 0},)),
        (loops_over_an_argument, ({2: "a", 0: "b"},)),
        (loops_over_an_argument, ([2, 0],)),  # (a list: its items, as before)
        (passes_an_argument_on, ({2: 5, 0: 7},)),
        (passes_an_argument_on, ((1, 2),)),
    ],
    ids=[
        "global",
        "global of strings",
        "argument",
        "argument of strings",
        "list",
        "to a helper",
        "tuple to a helper",
    ],
)
def test_a_loop_over_a_dict_runs_over_its_keys(function, given):
    """``for k in d`` with d a module-level dict or an argument not differentiated
    ran over d[0], d[1], ... (the generated code reads the loop's items by
    position): a silently wrong value and gradient, or a KeyError. It runs over
    list(d), d's keys, now."""
    x = np.array([1.0, 2.0, 3.0])
    value, gradient = ppto.value_and_grad(function)(x, *given)
    assert float(value) == pytest.approx(function(x, *given), rel=1e-12)
    expected = central_differences(function, (x, *given), 0)
    assert_gradient(gradient, expected, function.__name__)


def guarded_local_dict(x):
    d = {"a": x * 2.0, "c": np.sin(x)}
    if "b" in d:
        return np.sum(d["b"])
    scale = d["b"] if "b" in d else d["c"]
    return np.sum(d["a"] ** 2 * scale) + ("b" in d and d["b"])


def test_a_key_test_of_a_dict_made_here_reads_only_the_branch_it_takes():
    # d["b"] in a branch that does not run was refused ("d has no such key")
    x = np.array([0.3, -0.5, 1.2])
    value, gradient = ppto.value_and_grad(guarded_local_dict)(x)
    assert float(value) == pytest.approx(float(guarded_local_dict(x)), rel=1e-12)
    expected = central_differences(guarded_local_dict, (x,), 0)
    assert_gradient(gradient, expected, "gradient")
