"""Python lists of arrays passed to, returned from and indexed after helper
functions of the user's, and lists of tensors in what ppto hands back: gradients,
pullbacks and tangents match float64 central differences of the plain function;
results keep the list structure the function made; what is not supported raises a
ppto error at the user's line."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences
from tests.test_pytrees import assert_tree, tree_differences

RNG = np.random.default_rng(11)


def normal(*shape):
    return RNG.normal(size=shape)


# --- helpers taking, returning and indexing lists ----------------------------------


def layers(x, ws):
    out = []
    for w in ws:
        x = np.tanh(x @ w)
        out.append(x)
    return out


def last_and_first(x, ws):
    outs = layers(x, ws)
    return np.sum(outs[-1]) + np.sum(outs[0] ** 2)


def list_built_for_the_helper(x, w1, w2):
    outs = layers(x, [w1, w2])
    return np.sum(outs[-1] * outs[0])


def pair_list(x):
    return [x * 2.0, np.sin(x)]


def unpacked_result(x):
    a, b = pair_list(x)
    return np.sum(a * b)


def looped_result(x):
    total = 0.0
    for h in pair_list(x):
        total = total + np.sum(h**3)
    return total


def squares(hs):
    return sum(np.sum(h**2) for h in hs)


def list_literal_argument(x, y):
    return squares([x, y * 3.0])


def local_list_argument(x):
    hs = [x, np.exp(x)]
    return squares(hs)


def indexed(hs, i):
    return hs[i] * hs[-1]


def helper_indexing_its_argument(x, y):
    return np.sum(indexed([x, y], 0))


def twice(x, ws):
    outs = layers(x, ws)
    return layers(outs[-1], ws)


def nested_helpers(x, ws):
    return np.sum(twice(x, ws)[1])


def list_and_value(x, ws):
    outs = layers(x, ws)
    return outs, np.sum(x)


def tuple_with_a_list(x, ws):
    outs, s = list_and_value(x, ws)
    return np.sum(outs[1]) * s


def stacked_result(x, ws):
    return np.sum(np.stack(layers(x, ws)) ** 2)


def joined_slice(x, ws):
    outs = layers(x, ws)
    return np.sum(np.concatenate(outs[1:], axis=0) * x[0])


def appended_after(x, ws):
    outs = layers(x, ws)
    outs.append(x)
    return np.sum(outs[-1] * outs[0])


def indexed_by_length(x, ws):
    outs = layers(x, ws)
    return np.sum(outs[len(outs) - 1])


def returns_list_in_a_tuple(x):
    return x * 2.0, [np.sin(x), x**2]


def reads_list_in_a_tuple(x):
    scaled, parts = returns_list_in_a_tuple(x)
    return np.sum(scaled * parts[0] + parts[-1])


def mixed_shapes(x):
    return [x * 2.0, np.sum(x**2)]


def indexes_mixed_shapes(x):
    hs = mixed_shapes(x)
    return np.sum(hs[0]) * hs[1]


def loops_over_mixed_shapes(x):
    total = 0.0
    for h in mixed_shapes(x):
        total = total + np.sum(h * h)
    return total


def nested_lists(x):
    return [[x, x * 2.0], [np.sin(x)]]


def reads_nested_lists(x):
    parts = nested_lists(x)
    return np.sum(parts[0][1] * parts[1][0])


def appends_to_a_helpers_list(x):
    hs = mixed_shapes(x)
    hs.append(np.exp(x))
    return np.sum(hs[-1]) * hs[1]


def nested_written_out(x):
    parts = [[x, np.sum(x)], [np.sin(x)]]
    return np.sum(parts[0][0] * parts[1][0]) * parts[0][1]


def weight_and_bias_pairs(x, w1, b1, w2, b2):
    layers = [[w1, b1], [w2, b2]]
    h = x
    for i in range(2):
        h = np.tanh(h @ layers[i][0] + layers[i][1])
    first = layers[0]
    return np.sum(h) + np.sum(first[1] ** 2)


def three_ws():
    return [normal(3, 3), normal(3, 3), normal(3, 3)]


CASES = [
    ("last and first", last_and_first, lambda: (normal(2, 3), three_ws())),
    (
        "list built for the helper",
        list_built_for_the_helper,
        lambda: (normal(2, 3), normal(3, 3), normal(3, 3)),
    ),
    ("unpacked result", unpacked_result, lambda: (normal(2, 3),)),
    ("looped result", looped_result, lambda: (normal(2, 3),)),
    ("list literal argument", list_literal_argument, lambda: (normal(3), normal(3))),
    ("local list argument", local_list_argument, lambda: (normal(2, 2),)),
    (
        "helper indexing its argument",
        helper_indexing_its_argument,
        lambda: (normal(2, 3), normal(2, 3)),
    ),
    ("nested helpers", nested_helpers, lambda: (normal(2, 3), three_ws())),
    ("tuple with a list", tuple_with_a_list, lambda: (normal(2, 3), three_ws())),
    ("stacked result", stacked_result, lambda: (normal(2, 3), three_ws())),
    ("joined slice", joined_slice, lambda: (normal(2, 3), three_ws())),
    ("appended after", appended_after, lambda: (normal(3, 3), three_ws())),
    ("indexed by length", indexed_by_length, lambda: (normal(2, 3), three_ws())),
    ("list in a tuple", reads_list_in_a_tuple, lambda: (normal(2, 3),)),
    ("indexes mixed shapes", indexes_mixed_shapes, lambda: (normal(2, 3),)),
    ("loops over mixed shapes", loops_over_mixed_shapes, lambda: (normal(2, 3),)),
    ("nested lists", reads_nested_lists, lambda: (normal(2, 3),)),
    ("appends to a helper's list", appends_to_a_helpers_list, lambda: (normal(3),)),
    ("nested written out", nested_written_out, lambda: (normal(2, 3),)),
    (
        "weight and bias pairs",
        weight_and_bias_pairs,
        lambda: (normal(2, 3), normal(3, 3), normal(3), normal(3, 2), normal(2)),
    ),
]


@pytest.mark.parametrize(
    "function, make", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_grad_through_list_helpers_matches_central_differences(function, make):
    arguments = make()
    for position, argument in enumerate(arguments):
        gradient = ppto.grad(function, wrt=position)(*arguments)
        what = f"{function.__name__} wrt {position}"
        if isinstance(argument, list):
            assert_tree(gradient, tree_differences(function, arguments, position), what)
        else:
            expected = central_differences(function, arguments, position)
            assert_gradient(gradient, expected, what)


def test_a_constant_list_of_tensors_is_unwrapped():
    """A list, tuple or dict of ppto tensors held constant reaches the generated code
    as raw arrays (NumPy on a Tensor inside one raised "np.add.reduce ... has no
    ppto operator")."""
    x, ws = normal(2, 3), three_ws()
    expected = central_differences(last_and_first, (x, ws), 0)
    tensors = [ppto.tensor(w) for w in ws]
    for held in (tensors, tuple(tensors)):
        gradient = ppto.grad(last_and_first, wrt=0)(ppto.tensor(x), held)
        assert_gradient(gradient, expected, type(held).__name__)

    def weighted(x, params):
        return np.sum((x @ params["w"]) ** 2) * params["scale"]

    params = {"w": normal(3, 3), "scale": 0.5}
    expected = central_differences(weighted, (x, params), 0)
    held = {"w": ppto.tensor(params["w"]), "scale": 0.5}
    assert_gradient(ppto.grad(weighted, wrt=0)(x, held), expected, "dict")


# --- lists handed back to the user ------------------------------------------------


def contracted(function, cotangents):
    """sum over the results of <cotangent, result>: its gradient is the pullback."""

    def scalar(*arguments):
        outs = function(*arguments)
        flat = list(outs[:1]) + list(outs[1]) if isinstance(outs, tuple) else outs
        return sum(float(np.sum(c * np.asarray(o))) for c, o in zip(cotangents, flat))

    return scalar


def mixed_list(x, ws):
    return [x @ ws[0], np.sum(ws[1] ** 2), np.tanh(x)]


@pytest.mark.parametrize("make_list", [list, tuple], ids=["list", "tuple of list"])
def test_vjp_hands_back_a_list_as_a_list(make_list):
    x, ws = normal(2, 3), [normal(3, 3), normal(3, 3)]
    if make_list is list:
        function = mixed_list
    else:

        def function(x, ws):
            return x * 3.0, layers(x, ws)

    out, pullback = ppto.vjp(function, x, ws)
    plain = function(x, ws)
    if make_list is list:
        assert type(out) is list and len(out) == 3  # (items of different shapes)
        results = out
    else:
        assert type(out) is tuple and type(out[1]) is list and len(out[1]) == 2
        results = [out[0], *out[1]]
        plain = [plain[0], *plain[1]]
    for result, value in zip(results, plain):
        assert isinstance(result, ppto.Tensor)
        assert np.allclose(np.asarray(result), value, rtol=1e-12)
    cotangents = [normal(*np.shape(value)) for value in plain]
    given = (
        list(cotangents)
        if make_list is list
        else (cotangents[0], [ppto.tensor(c) for c in cotangents[1:]])
    )
    dx, dws = pullback(given)
    scalar = contracted(function, cotangents)
    assert_gradient(dx, central_differences(scalar, (x, ws), 0), "dx")
    assert_tree(dws, tree_differences(scalar, (x, ws), 1), "dws")


def test_vjp_of_a_list_refuses_a_cotangent_of_another_structure():
    out, pullback = ppto.vjp(pair_list, normal(2, 3))
    with pytest.raises(ppto.ShapeError, match="a list of 2.*got a tuple of 2"):
        pullback(tuple(np.ones((2, 3)) for _ in out))
    with pytest.raises(ppto.ShapeError, match="a list of 2.*got a list of 1"):
        pullback([np.ones((2, 3))])


def test_a_list_of_one_shape_takes_its_cotangent_stacked_too():
    """As NumPy reads a list of arrays of one shape (np.asarray stacks it), one
    array of the stacked shape is a cotangent too, row by row."""
    x, ws = normal(2, 3), [normal(3, 3), normal(3, 3)]
    out, pullback = ppto.vjp(layers, x, ws)
    cotangent = normal(2, 2, 3)
    by_rows, by_items = pullback(cotangent), pullback(list(cotangent))
    for a, b in zip([by_rows[0], *by_rows[1]], [by_items[0], *by_items[1]]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    scalar = contracted(layers, list(cotangent))
    assert_gradient(by_rows[0], central_differences(scalar, (x, ws), 0), "dx")
    with pytest.raises(ppto.ShapeError, match="a list of 2"):
        pullback(normal(3, 2, 3))


def test_jvp_hands_back_a_list_of_tangents():
    x, v = normal(2, 3), normal(2, 3)
    ws = [normal(3, 3), normal(3, 3)]

    def function(x):
        return mixed_list(x, ws)

    out, tangent = ppto.jvp(function, (x,), (v,))
    assert type(out) is list and type(tangent) is list and len(tangent) == 3
    eps = 1e-6
    ahead, behind = function(x + eps * v), function(x - eps * v)
    for number, (t, a, b) in enumerate(zip(tangent, ahead, behind)):
        expected = np.asarray((a - b) / (2 * eps), dtype=np.float64)
        assert_gradient(t, expected, f"tangent {number}")


# --- a dict from a helper (see tests/test_dicts_and_nested_lists.py) --------------


def dict_from_a_helper(x):
    parts = {"a": x * 2.0, "b": [np.sin(x), x]}
    return parts


def reads_a_helpers_dict(x):
    d = dict_from_a_helper(x)
    return np.sum(d["a"] * d["b"][0])


def test_a_dict_made_in_a_helper_is_read_by_its_keys():
    """(It was refused at its line: a dict is now the list of its values.)"""
    x = normal(2, 3)
    gradient = ppto.grad(reads_a_helpers_dict)(x)
    expected = central_differences(reads_a_helpers_dict, (x,), 0)
    assert_gradient(gradient, expected, "reads_a_helpers_dict")


# --- helpers changing a list's items -----------------------------------------------


def swap_first_two(p):
    p[0], p[1] = p[1], p[0]


def swapped_by_a_helper(x):
    y, b = x * 1.0, x * 2.0
    params = [y, b]
    swap_first_two(params)
    return np.sum(params[0] * x)


def written_after_a_helper(x):
    y, b = x * 1.0, x * 2.0
    params = [y, b]
    swap_first_two(params)
    a = params[0]  # b's array, after the swap
    a += 1.0
    return np.sum(b * x)


def total(p):
    return p[0] + p[1]


def read_by_a_helper(x):
    y, b = x * 1.0, x * 2.0
    params = [y, b]
    s = total(params)
    a = params[0]
    a += 1.0  # y's array: nothing reads y afterwards
    return np.sum(a * s)


def test_a_helper_swapping_its_lists_items_is_refused_at_its_line():
    """``p[0], p[1] = p[1], p[0]`` in a helper changed the caller's list unseen:
    the gradient came out for the list before the swap ([3, 6] where central
    differences give [4, 8]); and after such a call the caller's items were taken
    as they were, so ``a = params[0]; a += 1.0`` wrote into b silently (10.0 where
    NumPy gives 13.0)."""
    x = np.array([1.0, 2.0])
    for function in (swapped_by_a_helper, written_after_a_helper):
        with pytest.raises(ppto.TransformError) as caught:
            ppto.grad(function)(x)
        message = str(caught.value)
        assert "p[0], p[1] = p[1], p[0]" in message or "a += 1.0" in message
        assert "in place" in message or "may share its array with b" in message


def other_item_read_after_a_helper(x):
    t, b = x * 1.0, x * 2.0
    params = [t, b]
    swap_first_two(params)
    a = params[0]  # b's array, after the swap: t is not changed
    a += 1.0
    return np.sum(t * x)


@pytest.mark.parametrize(
    "function, read",
    [(written_after_a_helper, "b"), (other_item_read_after_a_helper, "t")],
    ids=lambda f: getattr(f, "__name__", f),
)
def test_an_item_taken_after_a_helper_may_share_with_any_item(function, read):
    """Which array ``params[0]`` is after ``swap_first_two(params)`` is not
    known: the refusal said a shares its array with t, where it is b's (NumPy
    leaves t as it was). It says what may be, naming the call."""
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(function)(np.array([1.0, 2.0]))
    message = str(caught.value)
    lines, first = inspect.getsourcelines(function)
    call = first + [n for n, text in enumerate(lines) if "swap_first_two" in text][0]
    assert f"after `swap_first_two(params)` (line {call})" in message
    other = "y" if read == "b" else "t"
    assert f"may share its array with {' or '.join(sorted(['b', other]))}" in message
    assert f"and {read} is read afterwards" in message
    assert "a = a * 1.0" in message
    assert caught.value.lineno == call + 2


def test_a_list_read_by_a_helper_is_still_differentiated():
    x = normal(3)
    expected = central_differences(read_by_a_helper, [x], 0)
    assert_gradient(ppto.grad(read_by_a_helper)(x), expected, "read by a helper")
    assert np.isclose(float(ppto.value_and_grad(read_by_a_helper)(x)[0]),
                      read_by_a_helper(x.copy()))  # fmt: skip


def sliced_into_its_own_name(x):
    t = x * 1.0
    u = t
    t = t[1:]  # a view of u's array
    t += 1.0
    return np.sum(u * x)


def list_sliced_into_its_own_name(x):
    y, b = x * 1.0, x * 2.0
    params = [y, b]
    params = params[::-1]
    a = params[0]  # b's array
    a += 1.0
    return np.sum(b * x)


def rebound_to_a_new_array(x):
    t = x * 1.0
    u = t
    t = t * 2.0  # a new array: u is not changed below
    t += 1.0
    return np.sum(u * x) + np.sum(t)


def test_a_name_rebound_to_a_view_of_itself_keeps_what_it_shared():
    """``t = t[1:]`` read t's sharing after forgetting it, so ``t += 1.0`` wrote
    into u's array unseen (5.0 where NumPy gives 7.0), and ``params =
    params[::-1]`` lost its items (10.0 where NumPy gives 13.0)."""
    x = np.array([1.0, 2.0])
    for function, shared in ((sliced_into_its_own_name, "u"),
                             (list_sliced_into_its_own_name, "b")):  # fmt: skip
        message = f"shares its array with {shared}"
        with pytest.raises(ppto.TransformError, match=message):
            ppto.grad(function)(x)
    x = normal(3)
    expected = central_differences(rebound_to_a_new_array, [x], 0)
    gradient = ppto.grad(rebound_to_a_new_array)(x)
    assert_gradient(gradient, expected, "rebound to a new array")


# --- an item of a list replaced (``size[0] = y * 2.0``) ----------------------------
# The write was taken for an array's (``setitem``), whose adjoint is shaped like the
# items stacked: a list of an array and a number has no such shape, and the
# generated gradient raised ShapeError. A list's item replaced is a list still,
# with an adjoint per item.


def replaced_in_a_list_of_numbers(y):
    size = [1.0, 2.0]
    size[0] = y * 2.0
    h = size[0]
    return np.sum(h * y) * size[1]


def replaced_then_added_to(y):
    size = [1.0, y * 3.0]
    size[1] += y * 2.0  # (the sum is the item now)
    size[0] *= 3.0
    return np.sum(size[1] * y) * size[0]


def replaced_in_a_loop(y):
    size = [1.0, 2.0, 3.0]
    for i in range(2):
        size[i] = y * (i + 2.0)
    return np.sum(size[0] * size[1]) * size[2]


def replaced_in_a_list_argument(y, size):
    size[0] = y * 2.0
    h = size[0]
    return np.sum(h * y) * size[1]


def assert_forward_and_second_order(function, point, direction, expected):
    """``function``'s tangent along ``direction`` at ``point`` is ``expected`` (its
    gradient by central differences) times ``direction``, and the tangent of its
    gradient (a Hessian-vector product) the central difference of gradients."""
    _, tangent = ppto.jvp(function, (point,), (direction,))
    assert float(tangent) == pytest.approx(float(expected @ direction), rel=1e-6)
    _, product = ppto.jvp(ppto.grad(function), (point,), (direction,))
    gradient_at = ppto.grad(function)
    step = 1e-6
    ahead = np.asarray(gradient_at(point + step * direction))
    behind = np.asarray(gradient_at(point - step * direction))
    assert_gradient(product, (ahead - behind) / (2 * step), "Hessian-vector")


REPLACED = [
    (replaced_in_a_list_of_numbers, ()),
    (replaced_then_added_to, ()),
    (replaced_in_a_loop, ()),
    (replaced_in_a_list_argument, ([1.0, 2.0],)),
]


@pytest.mark.parametrize(
    "function, rest", REPLACED, ids=[f.__name__ for f, _ in REPLACED]
)
def test_an_item_replaced_in_a_list_of_numbers_is_differentiated(function, rest):
    def in_numpy(y, *others):  # (each call its own list: the function changes it)
        return function(y, *[list(other) for other in others])

    y, direction = normal(3), normal(3)
    copies = [list(other) for other in rest]
    value, gradient = ppto.value_and_grad(function)(y.copy(), *copies)
    assert float(value) == pytest.approx(float(in_numpy(y, *rest)), rel=1e-12)
    expected = central_differences(in_numpy, (y, *rest), 0)
    assert_gradient(gradient, expected, function.__name__)
    if rest:
        return
    # forward mode too, along one direction, and over the gradient (its code calls
    # the list helpers: a Hessian-vector product vs differences of gradients)
    assert_forward_and_second_order(function, y, direction, expected)


# --- a slice of a list replaced (``hs[1:] = [a, b]``), its length changed or not ----
# The gradient zeroed ``hs_1[1:]`` for the list before the write and read the
# values' adjoints at ``hs_1[1:]``: right where the length is kept only. Grown, the
# appends' pops took the zeros of the new items and lost the first ones' adjoints
# (hs[1:] = [x[2], x[3]] gave 0 for x[0], not 1); shrunk or inserted into
# (hs[1:1] = [v]), the pops found the adjoint list empty: ShapeError, "pop from
# empty list", from the generated code. The values' adjoints are where they landed.

WEIGHTS = RNG.normal(size=(3, 3))


def slice_grown(x):
    hs = [x[0], x[1]]
    hs[1:] = [x[2], x[3]]
    return hs[0] + hs[1] * hs[2]


def slice_shrunk(x):
    hs = [x[0], x[1], x[2]]
    hs[1:] = [x[3] * x[0]]
    return hs[0] * hs[1]


def slice_inserted(x):
    hs = [x[0], x[1]]
    hs[1:1] = [x[3], x[2] * x[3]]
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_emptied(x):
    hs = [x[0], x[1], x[2]]
    hs[1:] = []
    return hs[0] * 3.0


def whole_list_replaced(x):
    hs = [x[0], x[1]]
    hs[:] = [x[2], x[3], x[0] * x[1]]
    return hs[0] * hs[1] + hs[2]


def negative_slice_grown(x):
    hs = [x[0], x[1], x[2]]
    hs[-1:] = [x[3], x[0] * x[1]]
    return hs[0] * hs[3] + hs[1] * hs[2]


def slice_stopping_before_its_start(x):
    hs = [x[0], x[1], x[2]]
    hs[2:1] = [x[3]]  # (inserts at 2, as hs[2:2] would)
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_grown_then_appended(x):
    hs = [x[0], x[1]]
    hs[:1] = [x[2], x[3]]
    hs.append(x[0] * x[1])
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_grown_in_a_loop(x):
    hs = [x[0]]
    for i in range(3):
        hs[i:] = [hs[i] * x[i + 1], x[i] * 2.0]
    return sum(hs) + hs[0] * hs[-1]


def slice_of_numbers_grown(x):
    hs = [1.0, 2.0]
    hs[1:] = [x[0], x[1] * 3.0, 4.0]
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_grown_by_a_tuple(x):
    hs = [x[0], x[1]]
    hs[1:] = (x[2], x[3] * x[0])
    return hs[0] * hs[1] + hs[2]


def slice_grown_by_an_array(x):
    hs = [x[0], x[1]]
    hs[1:] = x[1:] * 3.0  # (the array's rows are the items)
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_of_arrays_grown(x):
    a = x[:3] * 2.0
    hs = [a, np.tanh(a)]
    hs[1:] = [a * a, np.sin(a), a @ WEIGHTS]
    return np.sum(hs[0] * hs[1]) + np.sum(hs[2] * hs[3])


def slice_of_arrays_shrunk(x):
    a = x[:3]
    hs = [a, a * 2.0, np.tanh(a), a**3]
    hs[1:3] = [np.sin(a)]
    return np.sum(hs[0] * hs[1] * hs[2])


def slice_of_arrays_inserted(x):
    a = x[:3]
    hs = [a, a * 2.0]
    hs[1:1] = [np.sin(a), a @ WEIGHTS]
    return np.sum(hs[0] * hs[1]) + np.sum(hs[2] * hs[3])


# ``del hs[a:b]`` is ``hs[a:b] = []`` (see source.py)
def slice_deleted(x):
    hs = [x[0], x[1], x[2]]
    del hs[0:2]
    return hs[0] * 3.0


def middle_deleted(x):
    hs = [x[0], x[1], x[2], x[3]]
    del hs[1:-1]
    return hs[0] * hs[1]


def slice_deleted_in_a_loop(x):
    hs = [x[0], x[1], x[2], x[3]]
    for i in range(2):
        hs.append(hs[0] * x[i])
        del hs[:1]
    return hs[0] * hs[1] + hs[-1]


def slice_of_arrays_deleted(x):
    hs = [x[:2], x[1:3] * 2.0, np.sin(x[2:])]
    del hs[1:]
    hs.append(x[:2] ** 2)
    return np.sum(hs[0] * hs[1])


# the length kept, as before: a plain slice, an extended one, a reversed one
def slice_of_the_same_length(x):
    hs = [x[0], x[1], x[2]]
    hs[1:] = [x[2] * x[3], x[3]]
    return hs[0] * hs[1] + hs[2]


def extended_slice(x):
    hs = [x[0], x[1], x[2], x[3]]
    hs[::2] = [x[3] * x[1], x[2]]
    return hs[0] * hs[1] + hs[2] * hs[3]


def reversed_slice(x):
    hs = [x[0], x[1], x[2], x[3]]
    hs[::-1] = [x[3] * x[1], x[2], x[0], x[1]]
    return hs[0] * hs[1] + hs[2] * hs[3]


def slice_in_a_variable_of_the_same_length(x):
    hs = [x[0], x[1], x[2]]
    for k in range(2):
        part = slice(k, k + 1)
        hs[part] = [x[3] * hs[k]]
    return hs[0] * hs[1] + hs[2]


SLICES_REPLACED = [
    slice_grown,
    slice_shrunk,
    slice_inserted,
    slice_emptied,
    whole_list_replaced,
    negative_slice_grown,
    slice_stopping_before_its_start,
    slice_grown_then_appended,
    slice_grown_in_a_loop,
    slice_of_numbers_grown,
    slice_grown_by_a_tuple,
    slice_grown_by_an_array,
    slice_of_arrays_grown,
    slice_of_arrays_shrunk,
    slice_of_arrays_inserted,
    slice_deleted,
    middle_deleted,
    slice_deleted_in_a_loop,
    slice_of_arrays_deleted,
    slice_of_the_same_length,
    extended_slice,
    reversed_slice,
    slice_in_a_variable_of_the_same_length,
]


@pytest.mark.parametrize(
    "function", SLICES_REPLACED, ids=[f.__name__ for f in SLICES_REPLACED]
)
def test_a_slice_of_a_list_replaced_is_differentiated(function):
    x, direction = normal(4), normal(4)
    value, gradient = ppto.value_and_grad(function)(x.copy())
    assert float(value) == pytest.approx(float(function(x.copy())), rel=1e-12)
    expected = central_differences(function, (x,), 0)
    assert_gradient(gradient, expected, function.__name__)
    # forward mode, and over the gradient (a Hessian-vector product)
    assert_forward_and_second_order(function, x, direction, expected)


# A slice held in a variable (``hs[part] = values``) takes the code of an item's
# write, which reads neither list (so that a loop writing hs[i] = h keeps no copy
# of the list per step): where it would change the length, or write an array's
# rows, it is refused when it runs, at the user's line, not differentiated wrongly.


def slice_in_a_variable_grown(x):
    hs = [x[0], x[1]]
    part = slice(1, None)
    hs[part] = [x[2], x[3]]
    return hs[0] + hs[1] * hs[2]


def slice_in_a_variable_given_an_array(x):
    hs = [x[0], x[1], x[2]]
    part = slice(1, None)
    hs[part] = x[2:] * 3.0
    return hs[0] + hs[1] * hs[2]


@pytest.mark.parametrize(
    "function, message",
    [
        (slice_in_a_variable_grown, "changes the list's length"),
        (slice_in_a_variable_given_an_array, "values that are not a list"),
    ],
)
def test_a_slice_in_a_variable_that_the_gradient_cannot_follow_is_refused(
    function, message
):
    with pytest.raises(ppto.errors.GradError) as raised:
        ppto.grad(function)(normal(4))
    text = str(raised.value)
    assert message in text and "write the slice out" in text
    assert "hs[part] = " in text  # (the user's line)
