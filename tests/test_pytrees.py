"""Dicts, lists and tuples (nested) of arrays as differentiated arguments: each
gradient has its argument's structure and matches float64 central differences of
the plain function, leaf by leaf; what is not supported raises a clear error."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

RNG = np.random.default_rng(7)


def normal(*shape):
    return RNG.normal(size=shape)


def tree_differences(function, arguments: tuple, position: int):
    """d function(*arguments) / d arguments[position], a dict, list or tuple: the
    central differences of each float leaf, in the argument's structure (None at
    leaves that are not floating point)."""

    def walk(tree, replaced):
        if type(tree) is dict:
            return {
                key: walk(item, lambda new, key=key: replaced({**tree, key: new}))
                for key, item in tree.items()
            }
        if type(tree) in (list, tuple):
            kind = type(tree)

            def at(number):
                return lambda new: replaced(
                    kind(new if n == number else t for n, t in enumerate(tree))
                )

            return kind(walk(item, at(n)) for n, item in enumerate(tree))
        if not (isinstance(tree, float) or getattr(tree, "dtype", None) == "float64"):
            return None
        return central_differences(
            lambda leaf: float(function(*replaced(leaf))), (tree,), 0
        )

    return walk(
        arguments[position],
        lambda new: arguments[:position] + (new,) + arguments[position + 1 :],
    )


def assert_tree(actual, expected, what="gradient"):
    """The same structure (container types, keys, order), leaves as close as the
    corpus asks."""
    if type(expected) in (dict, list, tuple):
        assert type(actual) is type(expected), f"{what}: {type(actual).__name__}"
    if type(expected) is dict:
        assert list(actual) == list(expected), f"{what}: keys {list(actual)}"
        for key in expected:
            assert_tree(actual[key], expected[key], f"{what}[{key!r}]")
    elif type(expected) in (list, tuple):
        assert len(actual) == len(expected), what
        for number, (a, e) in enumerate(zip(actual, expected)):
            assert_tree(a, e, f"{what}[{number}]")
    elif expected is None:
        assert actual is None, what
    else:
        assert isinstance(actual, ppto.Tensor), f"{what}: {type(actual)}"
        assert_gradient(actual, np.asarray(expected), what)


# --- functions reading pytrees ------------------------------------------------------


def mlp(params, x, labels):
    h = np.tanh(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(np.sum(labels * log_probs, axis=1))


def layers_in_a_list(ws, x):
    h = x
    for w in ws[:-1]:
        h = np.tanh(h @ w)
    return np.sum(h @ ws[-1]) + len(ws)


def zipped_layers(ws, bs, x):
    h = x
    for i, (w, b) in enumerate(zip(ws, bs)):
        h = np.tanh(h @ w + b) * (i + 1)
    return np.sum(h * h)


def unpacked_pair(params, x):
    w, b = params
    return np.sum(np.sin(x @ w + b))


def penalty(p):
    total = 0.0
    for name, value in p.items():
        if name.startswith("W"):
            total = total + np.sum(value**2)
    return total


def items_and_values(params, x):
    scale = 0.0
    for value in params.values():
        scale = scale + np.mean(value)
    keys = 0.0
    for key in params:
        if key in params and "b1" in params:
            keys = keys + 1.0
    return np.sum(np.tanh(x @ params["W1"] + params["b1"])) * scale + keys


def nested(model, x):
    h = x
    for w, b in model["layers"]:
        h = np.tanh(h @ w + b)
    return np.sum(h @ model["head"]["W"]) * model["head"]["scale"]


def helper_layers(ws, x):
    return np.sum(np.tanh(ws[0] @ x) * ws[-1])


def through_a_helper(params, x):
    return helper_layers(params["ws"], x) + np.sum(params["ws"][1] ** 2)


def dense(layer, h, scale=1.0):
    return np.tanh(h @ layer["W"] + layer["b"]) * scale


def regularized(params, strength=0.1):
    return strength * sum(np.sum(w**2) for w in params.values())


def dicts_to_helpers(params, x):
    h = dense(params["hidden"], x)
    h = dense(layer=params["out"], h=h, scale=2.0)
    return np.sum(h) + regularized(params["hidden"]) + penalty(params["out"])


def list_of_dicts(layers, x):
    h = x
    for layer in layers:
        h = dense(layer, h)
    for i, layer in enumerate(layers):
        h = h + np.sum(layer["b"]) * i
    return np.mean(h**2)


def dict_of_dicts(model, x):
    total = 0.0
    for name, block in model.items():
        total = total + np.sum(dense(block, x) ** 2) * len(name)
    for block in model.values():
        total = total + np.sum(block["b"])
    return total


def varargs(*xs):
    return np.sum(xs[0] @ xs[1]) * np.sum(xs[-1])


def with_constants(params, x):
    n = params["n"]
    return np.sum(params["w"] * x) * n + (0.0 if params["unused"] is None else 1.0)


def mlp_params():
    return {"W1": normal(3, 4), "b1": normal(4), "W2": normal(4, 2), "b2": normal(2)}


CASES = [
    (
        "mlp in a dict",
        mlp,
        lambda: (mlp_params(), normal(5, 3), np.eye(2)[[0, 1, 1, 0, 1]]),
    ),
    (
        "list",
        layers_in_a_list,
        lambda: ([normal(3, 4), normal(4, 4), normal(4, 2)], normal(5, 3)),
    ),
    (
        "zipped lists",
        zipped_layers,
        lambda: ([normal(3, 3), normal(3, 3)], (normal(3), normal(3)), normal(2, 3)),
    ),
    (
        "tuple unpacked",
        unpacked_pair,
        lambda: ((normal(3, 2), normal(2)), normal(4, 3)),
    ),
    (
        "dict items",
        penalty,
        lambda: ({"W1": normal(2, 2), "b": normal(2), "W2": normal(3)},),
    ),
    (
        "values keys in",
        items_and_values,
        lambda: ({"W1": normal(3, 2), "b1": normal(2)}, normal(4, 3)),
    ),
    (
        "nested",
        nested,
        lambda: (
            {
                "layers": [(normal(3, 3), normal(3)), (normal(3, 2), normal(2))],
                "head": {"W": normal(2, 2), "scale": 1.5},
            },
            normal(4, 3),
        ),
    ),
    (
        "helper",
        through_a_helper,
        lambda: ({"ws": (normal(3, 3), normal(3))}, normal(3)),
    ),
    (
        "dicts to helpers",
        dicts_to_helpers,
        lambda: (
            {
                "hidden": {"W": normal(3, 3), "b": normal(3)},
                "out": {"W": normal(3, 2), "b": normal(2), "W2": normal(2)},
            },
            normal(4, 3),
        ),
    ),
    (
        "list of dicts",
        list_of_dicts,
        lambda: (
            [{"W": normal(3, 3), "b": normal(3)}, {"W": normal(3, 2), "b": normal(2)}],
            normal(4, 3),
        ),
    ),
    (
        "dict of dicts",
        dict_of_dicts,
        lambda: (
            {
                "enc": {"W": normal(3, 2), "b": normal(2)},
                "decoder": {"W": normal(3, 2), "b": normal(2)},
            },
            normal(4, 3),
        ),
    ),
]


@pytest.mark.parametrize(
    "function, make", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_grad_matches_central_differences(function, make):
    arguments = make()
    trees = [n for n, a in enumerate(arguments) if type(a) in (dict, list, tuple)]
    gradients = ppto.grad(function, wrt=tuple(trees))(*arguments)
    for position, gradient in zip(trees, gradients):
        expected = tree_differences(function, arguments, position)
        assert_tree(gradient, expected, f"{function.__name__} wrt {position}")


def test_value_and_grad_of_the_mlp_in_a_dict():
    arguments = (mlp_params(), normal(5, 3), np.eye(2)[[0, 1, 1, 0, 1]])
    value, gradient = ppto.value_and_grad(mlp)(*arguments)
    np.testing.assert_allclose(np.asarray(value), mlp(*arguments), rtol=1e-12)
    assert_tree(gradient, tree_differences(mlp, arguments, 0))
    # a second call, of the same structure, reuses the code made for it
    again = ppto.grad(mlp)(*arguments)
    assert_tree(again, tree_differences(mlp, arguments, 0))


def test_the_structure_specialises_the_code():
    short = ([normal(3, 2), normal(2, 2)], normal(4, 3))
    long = ([normal(3, 3), normal(3, 3), normal(3, 2)], normal(4, 3))
    grad = ppto.grad(layers_in_a_list)
    for arguments in (short, long, short):
        assert_tree(grad(*arguments), tree_differences(layers_in_a_list, arguments, 0))


def test_varargs_are_a_tuple_differentiated():
    arguments = (normal(3, 3), normal(3), normal(2))
    gradient = ppto.grad(varargs)(*arguments)

    def as_tuple(xs):
        return varargs(*xs)

    assert_tree(gradient, tree_differences(as_tuple, (arguments,), 0))


def test_none_leaves_get_none_and_integer_leaves_are_refused():
    params = {"w": normal(3), "n": 2.0, "unused": None}
    x = normal(3)
    gradient = ppto.grad(with_constants)(params, x)
    assert_tree(gradient, tree_differences(with_constants, (params, x), 0))
    with pytest.raises(ppto.GradError, match=r"params\['n'\].*integer 2"):
        ppto.grad(with_constants)({**params, "n": 2}, x)


def test_vjp_gives_each_pytree_its_structure():
    params = {"W1": normal(3, 4), "b1": normal(4), "n": 3}
    x = normal(5, 3)

    def layer(params, x):
        return np.tanh(x @ params["W1"] + params["b1"]) * params["n"]

    out, pullback = ppto.vjp(layer, params, x)
    cotangent = normal(5, 4)
    np.testing.assert_allclose(np.asarray(out), layer(params, x), rtol=1e-12)
    d_params, d_x = pullback(cotangent)

    def contracted(params, x):
        return np.sum(cotangent * layer(params, x))

    assert_tree(d_params, tree_differences(contracted, (params, x), 0))
    assert_gradient(d_x, central_differences(contracted, (params, x), 1), "x")


def test_jvp_takes_tangents_of_the_same_structure():
    params = {"layers": [(normal(3, 3), normal(3))], "head": {"W": normal(3, 2)}}
    x = normal(4, 3)
    tangent = {"layers": [(normal(3, 3), None)], "head": {"W": normal(3, 2)}}

    def network(model, x):
        w, b = model["layers"][0]
        return np.tanh(x @ w + b) @ model["head"]["W"]

    out, tangent_out = ppto.jvp(network, (params, x), (tangent, None))
    np.testing.assert_allclose(np.asarray(out), network(params, x), rtol=1e-12)
    eps = 1e-6

    def moved(step):
        w, b = params["layers"][0]
        return {
            "layers": [(w + step * tangent["layers"][0][0], b)],
            "head": {"W": params["head"]["W"] + step * tangent["head"]["W"]},
        }

    expected = (network(moved(eps), x) - network(moved(-eps), x)) / (2 * eps)
    assert_gradient(tangent_out, expected, "jvp")
    with pytest.raises(ppto.ShapeError, match="must be a dict with keys 'layers'"):
        ppto.jvp(network, (params, x), ([normal(3, 3)], None))


def test_show_grad_names_one_adjoint_per_leaf():
    text = ppto.show_grad(mlp, mlp_params(), normal(5, 3), np.eye(2)[[0, 1, 1, 0, 1]])
    assert text.startswith("def mlp_grad(params_W1, params_b1, params_W2, params_b2,")
    assert "dparams_W1 = " in text and "dparams_b2 = " in text
    assert '# grad of: h = np.tanh(x @ params["W1"] + params["b1"])' in text


def cubic(params, x):
    return np.sum(np.tanh(x @ params["W"]) ** 2) + np.sum(params["b"] ** 3)


def test_hessian_vector_product_of_a_dict():
    params, x = {"W": normal(3, 2), "b": normal(2)}, normal(4, 3)
    v = {"W": normal(3, 2), "b": normal(2)}
    gradient, product = ppto.jvp(ppto.grad(cubic), (params, x), (v, None))
    assert_tree(gradient, tree_differences(cubic, (params, x), 0))

    # H v: the gradient's central differences along v (the gradient itself was
    # checked against the function's just above)
    eps = 1e-4
    moved = [{k: params[k] + step * v[k] for k in params} for step in (eps, -eps)]
    ahead, behind = (ppto.grad(cubic)(m, x) for m in moved)
    for key in params:
        expected = (np.asarray(ahead[key]) - np.asarray(behind[key])) / (2 * eps)
        assert_gradient(product[key], expected, f"H v [{key!r}]", rtol=1e-5)


def test_second_derivative_with_respect_to_a_dict():
    def scaled_cube(p, t):
        return np.sum(p["a"] * t**3)

    p, t = {"a": normal(3)}, 0.7
    inner = ppto.grad(scaled_cube, wrt=1)
    mixed = ppto.grad(inner, wrt=0)(p, t)  # d/dp of 3 t^2 sum(a)

    def first(p, t):
        return float(np.asarray(inner(p, t)))

    assert_tree(mixed, tree_differences(first, (p, t), 0))


def test_vjp_of_a_derivative_and_hessian_of_a_pytree_are_refused():
    params = {"W": normal(3, 2), "b": normal(2)}
    with pytest.raises(ppto.GradError, match="one parameter per array"):
        ppto.vjp(ppto.grad(cubic), params, normal(4, 3))
    with pytest.raises(ppto.GradError, match="Hessian-vector products"):
        ppto.hessian(cubic)(params, normal(4, 3))


# --- errors ---------------------------------------------------------------------------


def computed_key(params, name):
    return np.sum(params[name])  # <- error


def whole_dict_as_a_value(params, x):
    copied = dict(params)  # <- error
    return np.sum(x * copied["W"])


def break_in_an_unrolled_loop(params, x):
    for layer in params["layers"]:  # <- error
        if np.sum(x) > 0:
            break
        x = x * layer["W"]
    return np.sum(x)


def write_into_the_dict(params, x):
    params["W"] = params["W"] * 2.0  # <- error
    return np.sum(params["W"] * x)


def missing_key(params, x):
    return np.sum(params["V"] * x)  # <- error


def dict_method(params, x):
    return np.sum(params.get("W") * x)  # <- error


def rebound(ws, x):
    ws = [w * 2.0 for w in ws]  # <- error
    return np.sum(ws[0] * x)


@pytest.mark.parametrize(
    "function, message",
    [
        (computed_key, "by constant keys only"),
        (whole_dict_as_a_value, "not as a whole value"),
        (break_in_an_unrolled_loop, "break, continue or else"),
        (write_into_the_dict, "a write into params"),
        (missing_key, "has no key 'V'"),
        (dict_method, "cannot read params.get"),
        (rebound, "rebinds ws"),
    ],
)
def test_unsupported_reads_point_at_the_line(function, message):
    import inspect

    lines, first = inspect.getsourcelines(function)
    line = first + next(n for n, text in enumerate(lines) if "# <- error" in text)
    arguments = ({"W": normal(3)}, "W" if function is computed_key else normal(3))
    if function is rebound:
        arguments = ([normal(3)], normal(3))
    if function is break_in_an_unrolled_loop:
        arguments = ({"layers": [{"W": normal(3)}]}, normal(3))
    with pytest.raises(ppto.TransformError, match=message) as caught:
        ppto.grad(function)(*arguments)
    assert caught.value.lineno == line
    assert caught.value.filename == __file__
    assert "Instead:" in str(caught.value)


def test_code_is_made_once_per_structure(monkeypatch):
    import ppto.api

    def loss(params, x):
        return np.sum(np.tanh(x @ params["W"]) * params["scale"])

    made = []
    build = ppto.api.build
    monkeypatch.setattr(
        ppto.api,
        "build",
        lambda *args, **kw: made.append(args[0]) or build(*args, **kw),
    )
    params, x = {"W": normal(3, 2), "scale": normal(2)}, normal(4, 3)
    for _ in range(3):  # a grad object made on each step, as in a training loop
        ppto.grad(loss)(params, x)
    assert len(made) == 1
    ppto.grad(loss)({"W": normal(3, 2), "scale": normal(2), "extra": normal(1)}, x)
    assert len(made) == 2  # (another structure: other code)
    before, after = ppto.grad(loss).operator_counts(params, x)
    assert 0 < after <= before


def test_tensor_leaves_get_tensor_gradients_of_their_dtype():
    arguments = ({"W1": normal(3, 4), "b1": normal(4)}, normal(5, 3))
    on_tensors = (
        {"W1": ppto.tensor(arguments[0]["W1"]), "b1": arguments[0]["b1"]},
        arguments[1],
    )

    def loss(params, x):
        return np.sum(np.tanh(x @ params["W1"] + params["b1"]) ** 2)

    gradient = ppto.grad(loss)(*on_tensors)
    assert_tree(gradient, tree_differences(loss, arguments, 0))
    assert all(g.device == "cpu" for g in gradient.values())
    single = {"W1": arguments[0]["W1"].astype(np.float32), "b1": arguments[0]["b1"]}
    assert ppto.grad(loss)(single, arguments[1])["W1"].dtype == np.float32


def guarded_by_keys(p, x):
    if "b" in p and p["b"].ndim == 1:
        total = np.sum(p["a"] * p["b"] * x)
    elif "b" not in p:
        total = np.sum(p["a"] ** 2 * x)
    else:
        total = p["b"]
    scale = np.sum(p["c"]) if "c" in p else 2.0
    return total * scale


def held_guarded(x, d):
    if "b" in d:
        return np.sum(x * d["b"])
    return np.sum(x * d["a"])


@pytest.mark.parametrize(
    "keys", [("a",), ("a", "b"), ("a", "c"), ("a", "b", "c")], ids="+".join
)
def test_a_key_test_reads_only_the_branch_it_takes(keys):
    # ``if "b" in p: ... p["b"]`` was refused ("p has no key 'b'") for a dict
    # without b, though the branch does not run for it
    p = {key: normal(3) for key in keys}
    x = normal(3)
    value, gradient = ppto.value_and_grad(guarded_by_keys)(p, x)
    assert float(value) == pytest.approx(float(guarded_by_keys(p, x)), rel=1e-12)
    assert_tree(gradient, tree_differences(guarded_by_keys, (p, x), 0))
    held = {key: 2.0 + n for n, key in enumerate(keys)}  # (numbers, not differentiated)
    value, gradient = ppto.value_and_grad(held_guarded)(x, held)
    assert float(value) == pytest.approx(float(held_guarded(x, held)), rel=1e-12)
    assert_gradient(gradient, central_differences(held_guarded, (x, held), 0), "dx")


def scaled_by_settings(x, settings):
    return np.sum(np.sin(x) * settings["scale"] + settings["shift"])


def test_jvp_of_a_dict_held_constant_reads_its_leaves_as_grad_does():
    """A dict of floats given no tangent: its keys are read when the code is
    made, as by grad, so a missing key is a TransformError at the line (it was a
    KeyError from the generated code); present, the tangent matches central
    differences."""
    x, settings = normal(4), {"scale": normal(4), "shift": 0.5}
    direction = normal(4)
    value, tangent = ppto.jvp(scaled_by_settings, (x, settings), (direction, None))
    expected = central_differences(scaled_by_settings, (x, settings), 0)
    assert float(value) == pytest.approx(scaled_by_settings(x, settings), rel=1e-12)
    assert float(tangent) == pytest.approx(float(expected @ direction), rel=1e-6)
    for transform in (
        lambda: ppto.jvp(missing_key, ({"W": normal(3)}, normal(3)), (None, normal(3))),
        lambda: ppto.grad(missing_key, wrt=1)({"W": normal(3)}, normal(3)),
    ):
        with pytest.raises(ppto.TransformError, match="has no key 'V'"):
            transform()


def rebinds_an_entry(x, p):
    p["a"] = p["a"] * x
    return np.sum(p["a"] * p["b"] * x)


def adds_into_an_entry(x, p):
    p["a"] += x
    return np.sum(p["a"] * x)


def names_the_new_value(x, p):  # (the rewrite the refusal suggests)
    a = p["a"] * x
    return np.sum(a * p["b"] * x)


WRITES_INTO_A_CONSTANT_DICT = {
    "grad": lambda f, x, p: ppto.grad(f)(x, p),
    "jvp": lambda f, x, p: ppto.jvp(f, (x, p), (np.ones_like(x), None)),
    "hessian": lambda f, x, p: ppto.hessian(f)(x, p),
}


@pytest.mark.parametrize("way", sorted(WRITES_INTO_A_CONSTANT_DICT))
@pytest.mark.parametrize("function", [rebinds_an_entry, adds_into_an_entry])
def test_a_write_into_a_dict_held_constant_is_refused_at_its_line(function, way):
    # jvp crashed (a raw AttributeError, a ShapeError from generated code); grad's
    # refusal said p was differentiated
    x, p = normal(3), {"a": normal(3), "b": normal(3)}
    with pytest.raises(ppto.TransformError) as caught:
        WRITES_INTO_A_CONSTANT_DICT[way](function, x, p)
    error = caught.value
    assert "a write into p, a dict argument" in error.msg
    assert "differentiates with respect to" not in error.msg
    assert error.text.strip().startswith('p["a"]')
    assert "Instead: give the new value a name of its own (a = p[...] * x" in str(error)


def test_the_suggested_rewrite_runs():
    x, p = normal(3), {"a": normal(3), "b": normal(3)}
    expected = central_differences(names_the_new_value, (x, p), 0)
    assert_gradient(ppto.grad(names_the_new_value)(x, p), expected, "grad")
    value, tangent = ppto.jvp(names_the_new_value, (x, p), (np.ones(3), None))
    np.testing.assert_allclose(float(value), names_the_new_value(x, p), rtol=1e-12)
    np.testing.assert_allclose(float(tangent), np.sum(expected), rtol=1e-6)
