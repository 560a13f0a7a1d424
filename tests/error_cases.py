"""Functions ppto must refuse to differentiate, one per rejected construct, and near
misses it must accept.

Each rejected function marks the line the error must point at with the comment
``# <- error``; tests/test_transform_errors.py finds that line in this file's source,
so cases can be added or moved freely. Everything here is at module level (or in a
factory, where Python requires an enclosing function) so that ``inspect`` can read the
source.
"""

import builtins
import operator
import random

import numpy as np
import numpy as onp
from numpy import copyto
from numpy import multiply as numpy_multiply

import ppto

COUNTER = 0
OPTIONS = {"axis": 0}
PAIR = (1.0, 2.0)


# --- definitions ----------------------------------------------------------------------


def nested_def(x):
    def helper(v):
        return v * 2.0

    return np.sum(helper(x))


def lambda_inside(x):
    double = lambda v: v * 2.0  # noqa: E731
    return np.sum(double(x))


# local functions: Python would compute what these write differently from the
# lifted function ppto differentiates (ppto/transform/local_functions.py)


def lambda_stored(x):
    steps = [lambda v: v * 2.0]  # <- error
    return np.sum(steps[0](x))


def local_function_returned(x):
    def helper(v):
        return v * 2.0

    return np.sum(x), helper  # <- error


def local_function_passed_on(x):
    def helper(v):
        return v * 2.0

    return np.sum(apply_to(helper, x))  # <- error


def apply_to(function, x):
    return function(x)


def local_function_recursive(x):
    def power(v, n):
        return v if n == 0 else v * power(v, n - 1)  # <- error

    return np.sum(power(x, 2))


def local_function_nonlocal(x):
    total = 0.0

    def add(v):
        nonlocal total  # <- error
        total = total + np.sum(v)
        return total

    return add(x)


def default_reassigned_after_def(x):
    scale = 2.0
    scaled = lambda v, k=scale: v * k  # noqa: E731
    scale = 3.0  # <- error
    return np.sum(scaled(x))


def local_function_called_before_def(x, flag):
    if flag:
        y = twice(x)  # noqa: F821  # <- error
    else:
        y = x

    def twice(v):
        return v * 2.0

    return np.sum(twice(y))


def local_function_defined_twice(x):
    def act(v):
        return v * 2.0

    def act(v):  # noqa: F811  # <- error
        return v * 3.0

    return np.sum(act(x))


def local_function_decorated(x):
    @ppto.checkpoint
    def act(v):  # <- error
        return v * 2.0

    return np.sum(act(x))


def class_inside(x):
    class Box:  # <- error
        pass

    return np.sum(x)


def star_args_params(x, *rest):  # <- error
    return np.sum(x)


def star_kwargs_params(x, **options):  # <- error
    return np.sum(x)


def star_args_and_kwargs_params(x, *rest, scale=2.0, **options):  # <- error
    for r in rest:
        x = x * r
    return np.sum(x) * scale


async def async_function(x):  # <- error
    return np.sum(x)


async def awaiting(x):  # <- error
    y = await x
    return np.sum(y)


# --- statements -----------------------------------------------------------------------


def try_block(x):
    try:  # <- error
        y = np.log(x)
    except FloatingPointError:
        y = x
    return np.sum(y)


def match_statement(x, k):
    match k:  # <- error
        case 1:
            return np.sum(x)
        case _:
            return np.sum(x * 2.0)


def match_binding_names(x):
    match x.shape:  # <- error
        case (n,):
            return np.sum(x) * n
        case (n, *rest):
            return np.sum(x * 2.0) * len(rest)
        case {"k": 1, **others}:
            return others


def with_block(x):
    with np.errstate(all="ignore"):  # <- error
        y = np.log(x)
    return np.sum(y)


def global_declaration(x):
    global COUNTER  # <- error
    COUNTER += 1
    return np.sum(x)


def make_nonlocal_declaration():
    calls = 0

    def nonlocal_declaration(x):
        nonlocal calls  # <- error
        calls = calls + 1
        return np.sum(x)

    return nonlocal_declaration


nonlocal_declaration = make_nonlocal_declaration()


def delete(x):
    y = x * 2.0
    del y
    return np.sum(x)


def delete_an_item(x):
    items = [x, x * 2.0]
    del items[0]  # <- error
    return np.sum(items[0])


def delete_an_extended_slice(x):
    items = [x, x * 2.0, x * 3.0]
    del items[::2]  # <- error
    return np.sum(items[0])


def delete_a_slice_of_an_array(x):
    y = x * 2.0
    del y[1:3]  # <- error
    return np.sum(y)


def delete_in_a_loop_reading_it(x):
    total = 0.0
    for _ in range(2):
        y = x * 3.0
        total = total + np.sum(y)
        del y  # (y is read in the loop: refused)  # <- error
    return total


def import_inside(x):
    import math  # <- error

    return np.sum(x) * math.pi


def import_from_inside(x):
    from math import pi  # <- error

    return np.sum(x) * pi


def yield_value(x):
    yield np.sum(x)  # <- error


def yield_from(x):
    yield from (np.sum(x),)  # <- error


def starred_target(x):
    first, *rest = x  # <- error
    return np.sum(first)


def attribute_target(x):
    np.last_value = x  # <- error
    return np.sum(x)


def annotation_without_value(x):
    y: float  # noqa: F842  # <- error
    return np.sum(x)


# --- expressions ----------------------------------------------------------------------


def starred_call_argument(x):
    pair = (x, x)
    return np.sum(np.add(*pair))  # <- error


def double_starred_call_argument(x):
    return np.sum(x, **OPTIONS)  # <- error


def list_comprehension(x):
    parts = [v * 2.0 for v in (x, x)]
    return np.sum(parts[0])


def comprehension_in_while_condition(x):
    while sum(np.sum(v) for v in (x, x)) < 10.0:  # <- error
        x = x * 2.0
    return np.sum(x)


def comprehension_in_assert_message(x):
    assert x.shape[0] > 0, [float(v) for v in PAIR]  # <- error
    return np.sum(x)


def dict_comprehension_over_unknown_keys(x, ks):
    parts = {k: x * k for k in ks}  # <- error
    return np.sum(parts[1.0])


def dict_comprehension_keyed_by_a_value(x):
    parts = {float(v): v for v in x}  # <- error
    return parts[0.5]


def dict_comprehension_read_at_unknown_key(x, i):
    parts = {k: x * k for k in range(2)}
    return np.sum(parts[i])  # <- error


def dict_comprehension_passed_on(x):
    parts = {k: x * k for k in range(2)}
    return np.sum(np.stack(parts))  # <- error


def dict_comprehension_over_a_parameter(x, parts):
    parts = {k: x * k for k in range(2)}  # <- error
    return np.sum(parts[1])


def dict_comprehension_inside_a_call(x):
    return np.sum(len({k: x for k in "ab"}) * x)  # <- error


def set_comprehension(x):
    parts = {float(v) for v in PAIR}  # <- error
    return np.sum(x) * len(parts)


def generator_expression(x):
    return sum(np.sum(v) for v in (x, x))


def dict_literal(x):
    parts = {str(x.ndim): x}  # <- error
    return np.sum(parts["1"])


def set_literal(x):
    scales = {1.0, 2.0}  # <- error
    return np.sum(x) * len(scales)


def walrus(x):
    return np.sum((y := x * 2.0) * y)


def walrus_after_a_use(x):
    scale = 2.0
    return np.sum(x * scale) * (scale := 3.0)  # <- error


def walrus_in_while_condition(x):
    k = 0
    while (k := k + 1) < 3:  # <- error
        x = x * 2.0
    return np.sum(x)


def starred_in_list(x):
    parts = [*PAIR]  # <- error
    return np.sum(x) * parts[0]


def shift_operator(x):
    return np.sum(x) * (1 << 2)  # <- error


def shift_assignment(x):
    scale = 1
    scale <<= 2  # <- error
    return np.sum(x) * scale


def floor_division(x):
    return np.sum(x // 2.0)


def remainder_and_floor_division(x, y):
    return np.sum(np.sin(x % 1.5) * (y % 0.7) + (x // 0.5) * y)


def numpy_function_without_operator(x):
    return np.sum(np.nancumprod(x))  # <- error


def average_with_too_many_positionals(x):
    return np.average(x, 0, x, False, True)  # <- error


def average_returned_not_written_out(x, pair):
    return np.average(x, weights=x, returned=pair)  # <- error


def slogdet_field_of_a_name(x):
    result = np.linalg.slogdet(np.outer(x, x) + np.eye(3))
    return result.logabsdet  # <- error


def method_without_operator(x):
    return x.compress([True, False, True]).sum()  # <- error


class _Doubling:
    def __call__(self, x):
        return x * 2.0


def object_made_inside(x):
    double = _Doubling()
    return np.sum(double(x))  # <- error


def attribute_without_operator(x):
    return np.sum(x.real)  # <- error


def non_differentiable_use(x):
    # (float(x) is differentiated, as ppto.to_float: int(x) has no derivative)
    total = int(x.sum())  # <- error
    return total * np.sum(x)


def opaque_call_into_list(x):
    xs = [x, x * 2.0]
    ys = list(reversed(xs))  # <- error
    return np.sum(ys[0] * ys[1])


def differentiated_index(x, position):
    return x[position]  # <- error


def differentiated_parameter(x, shape):
    return np.sum(np.reshape(x, shape))  # <- error


def missing_operator_argument(x):
    return np.sum(ppto.reshape(x))  # <- error


def unknown_operator_keyword(x):
    return ppto.reduce_sum(x, axes=0)  # <- error


def returns_nothing(x):  # <- error
    np.sum(x)


def calls_rejected_helper(x):
    return np.sum(lambda_stored(x) * x)


# --- loops ---------------------------------------------------------------------------


def for_else(x):
    total = 0.0
    for v in x:
        total = total + v
    else:
        total = total * 2.0
    return total


def subscript_as_loop_target(x):
    y = x * 1.0
    total = 0.0
    for y[0] in (1.0, 2.0):  # <- error
        total = total + np.sum(y * x)
    return total


def while_else(x):
    total = np.sum(x)
    while total > 1.0:
        total = total / 2.0
    else:
        total = total * 2.0
    return total


# --- gradient errors (raised as ppto.GradError, not at a line) ------------------------


def scale(x, n):
    return np.sum(x) * n


def elementwise_square(x):
    return x * x


def list_built_in_a_loop(x):
    rows = []
    for row in x:
        rows.append(np.sin(row))
    return rows


def through_floor(x):
    return np.sum(ppto.floor(x) * 2.0)


# --- near misses: non-differentiable uses that do not feed the gradient ---------------


def floor_division_of_metadata(x):
    half = x.shape[0] // 2
    return np.sum(x[:half] * x[half:])


def length_of_argument(x):
    return np.sum(x) / len(x)


def float_in_condition(x):
    total = float(np.sum(x))
    if total > 0.0:
        return np.sum(x * x)
    return np.sum(x)


def integer_index_from_argmax(x):
    position = int(np.argmax(x))
    return x[position]


def argmax_index(x):
    return x[np.argmax(x)]


def for_loop(x):
    total = 0.0
    for v in x:
        total = total + v
    return total


def while_loop(x):
    total = np.sum(x)
    while total > 1.0:
        total = total / 2.0
    return total


def subscript_assignment(x):
    y = x * 1.0
    y[0] = x[1]
    return np.sum(y)


def opaque_result_returned(x):
    return np.i0(x)  # <- error


def opaque_result_squared(x):
    scale = np.i0(x)  # <- error
    return scale * scale + 1.0


def two_opaque_results(x):
    query = np.i0(x)  # <- error
    key = np.i0(x)  # (the later call, whose name sorts first)
    return np.sum(query * key)


def gradient_spaced_by_a_differentiated_value(x):
    return np.sum(np.gradient(x, x[0] * 2.0) ** 2)  # <- error


def trapezoid_spaced_by_a_differentiated_value(x):
    return np.trapezoid(x, dx=x[0])  # <- error


def einsum_of_three(x):
    return np.sum(np.einsum("i,i,i->", x, x, x))  # <- error


def ppto_einsum_in_numpys_order(x):
    return ppto.reduce_sum(ppto.einsum("i,i->", x, x))  # <- error


def write_through_view(x):
    y = x * 1.0
    rest = y[1:]
    rest *= 2.0  # <- error
    return np.sum(y**2)


def write_through_alias(x):
    y = x * 1.0
    z = y
    z[0] = 0.0  # <- error
    return np.sum(y * x)


def write_to_base_of_view(x):
    y = x * 1.0
    flipped = y.T
    y += 1.0  # <- error
    return np.sum(flipped * x)


def write_to_list_element_in_loop(x):
    hs = [x * 1.0, x * 2.0]
    total = 0.0
    for i in range(2):
        h = hs[i]
        h[0] = 1.0  # <- error
        total = total + np.sum(hs[i] * x)
    return total


def joined_list_names(x):
    first = [x * 2.0]
    second = [x * 3.0]
    both = first + second  # <- error
    return np.sum(np.stack(both))


def extend_through_second_name(x):
    hs = [x]
    kept = hs
    hs += [x * 2.0]  # <- error
    return np.sum(np.stack(kept))


def array_added_a_comprehension(x):
    total = x * 2.0
    total += [v * 3.0 for v in x]  # <- error
    return np.sum(total)


def list_parameter_joined_with_comprehension(x, hs):
    hs += [x * k for k in range(2)]  # <- error
    return np.sum(np.stack(hs))


def append_through_second_name(x):
    hs = [x]
    gs = hs
    gs.append(np.sin(x))  # <- error
    return np.sum(hs[1])


def append_to_the_first_name(x):
    hs = []
    gs = hs
    hs.append(x * 2.0)  # <- error
    return np.sum(np.stack(gs))


def pop_through_second_name_in_a_loop(x):
    hs = [x, x * 2.0, x * 3.0]
    total = 0.0
    for _ in range(2):
        rest = hs
        total = total + np.sum(rest.pop())  # <- error
    return total + np.sum(hs[0])


def sine_into_out(x):
    z = np.empty(3)
    np.sin(x, out=z)  # <- error
    return np.sum(z)


def copied_into(x):
    z = x * 1.0
    np.copyto(z, x**2)  # <- error
    return np.sum(z * x)


def written_item_of_an_item(x):
    y = x * 1.0
    y[0][1] = 5.0  # <- error
    return np.sum(y**2)


def joined_by_r_(x):
    return np.sum(np.r_[x[:2], x[1:] * 2.0] ** 2)  # <- error


def joined_by_c_(x):
    return np.sum(np.c_[x, x**2] ** 2)  # <- error


def put_into(x):
    z = x * 1.0
    np.put(z, [0, 2], x[:2] ** 2)  # <- error
    return np.sum(z * x)


def sorted_in_place(x):
    z = x * 1.0
    z.sort()  # <- error
    return np.sum(z * np.arange(3))


_SCATTERED = np.zeros(3)


def added_at_into_a_global(x):
    np.add.at(_SCATTERED, [0, 0, 2], x)  # <- error
    return np.sum(_SCATTERED * x)


def multiplied_at_indices(x):
    z = np.ones(3)
    np.multiply.at(z, [0, 0, 1], x)  # <- error
    return np.sum(z * z)


def filled(x):
    z = x.copy()
    z.fill(2.0)  # <- error
    return np.sum(z * x)


# the same on a view or an item of the array, or through the class or operator
# (each gave the gradient of the value unchanged)


def filled_row(x):
    m = np.stack([x, x]) * 1.0
    m[0].fill(0.0)  # <- error
    return np.sum(m * x)


def sorted_tail(x):
    z = x * 1.0
    z[1:].sort()  # <- error
    return np.sum(z * np.arange(3))


def sorted_transposed(x):
    m = np.outer(x, np.arange(3.0))
    m.T.sort()  # <- error
    return np.sum(m * x)


def sorted_item_of_a_list(x):
    hs = [x * 1.0, x * 2.0]
    hs[0].sort()  # <- error
    return np.sum(hs[0] * np.arange(3)) + np.sum(hs[1])


def filled_item_of_a_dict(x):
    d = {"a": x * 1.0}
    d["a"].fill(1.0)  # <- error
    return np.sum(d["a"] * x)


def _zero_first_row(m):
    m[0].fill(0.0)  # <- error


def filled_by_a_helper(x):
    m = np.stack([x, x]) * 1.0
    _zero_first_row(m)
    return np.sum(m * x)


def filled_through_the_class(x):
    z = x * 1.0
    np.ndarray.fill(z, 1.0)  # <- error
    return np.sum(z * x)


def item_set_by_operator(x):
    z = x * 1.0
    operator.setitem(z, 0, 9.0)  # <- error
    return np.sum(z * x)


def multiplied_by_operator(x):
    z = x * 1.0
    operator.imul(z, 3.0)  # <- error
    return np.sum(z * x)


def shuffled_in_place(x):
    z = x * 1.0
    np.random.shuffle(z)  # <- error
    return np.sum(z * np.arange(3))


def shuffled_by_a_generator(x):
    z = x * 1.0
    np.random.default_rng(0).shuffle(z)  # <- error
    return np.sum(z * np.arange(3))


def list_shuffled_by_python(x):
    items = [x[0], x[1] * 2.0, x[2] * 3.0]
    random.shuffle(items)  # <- error
    return items[0] + items[1] * 10.0


def copied_into_by_an_imported_name(x):
    z = np.zeros(3)
    copyto(z, x**2)  # <- error
    return np.sum(z)


def copied_into_through_another_module_name(x):
    z = np.zeros(3)
    onp.copyto(z, x**2)  # <- error
    return np.sum(z)


def item_set_by_its_method(x):
    z = x * 1.0
    z.__setitem__(0, 5.0)  # <- error
    return np.sum(z * z)


def _doubled_in_place(a):
    a *= 2.0  # <- error
    return a


def _shrunk_in_place(u):
    u -= u**2  # <- error
    return u * 2.0


def helper_result_unused_changes_its_argument(x):
    # (found by the random programs: the helper's result reaches no derivative
    # so it ran as written unchecked; NumPy changed x, ppto's value did not)
    _ = _shrunk_in_place(x)
    return np.sum(np.tanh(x))


def helper_measured_changes_its_argument(x):
    # the same where only the length of the helper's result is read
    count = len(_shrunk_in_place(x))
    return np.sum(np.tanh(x)) / count


def _first_zeroed(a):
    a[0] = 0.0  # <- error


def _pushed(items, v):
    items.append(v * 2.0)  # <- error


def _same(a):
    return a


def helper_doubles_its_argument(x):
    y = x * 1.0
    _doubled_in_place(y)
    return np.sum(y * x)


def helper_zeroes_an_item(x):
    y = x * 1.0
    _first_zeroed(y)
    return np.sum(y * x)


def helper_appends_to_a_list(x):
    items = [x[0]]
    _pushed(items, x[1])
    return items[0] * items[-1]


def write_into_what_a_helper_returned(x):
    y = x * 1.0
    z = _same(y)
    z[0] = 5.0  # <- error
    return np.sum(y * x)


def add_into_rows_of_a_reshaped_copy(x):
    m = x.reshape(2, 2) * 1.0
    for row in m:
        row *= 2.0  # <- error
    return np.sum(m * m)


_BUFFER = np.zeros(3)
_SEEN = []


def write_into_a_module_array(x):
    _BUFFER[:] = x * 2.0  # <- error
    return np.sum(_BUFFER * x)


def append_to_a_module_list(x):
    _SEEN.append(x * 2.0)  # <- error
    return np.sum(_SEEN[-1] * x)


def item_replaced_in_a_list_named_twice(x):
    a = [x[0], x[1]]
    b = a
    a[0] = x[2] ** 2  # <- error
    return b[0] + b[1]


def _cell(h, xt, hs):
    h = np.tanh(h * 0.5 + xt)
    hs.append(h)  # <- error
    return h


def helper_appends_to_a_list_its_result_unused(x):
    hs = []
    h = 0.0
    for t in range(3):
        h = _cell(h, x[t], hs)
    return hs[0] + hs[1] * hs[2]


def lists_named_in_one_statement(x):
    hs = gs = []
    hs.append(x[0] * 2.0)  # <- error
    gs.append(x[1])
    return gs[0] * hs[1]


def copied_into_in_an_assignment(x):
    z = np.zeros(3)
    _ = np.copyto(z, x * 2.0)  # <- error
    return np.sum(z * x)


class _Model:
    def same(self, a):
        return a


_MODEL = _Model()


def write_into_what_a_method_returned(x):
    y = x * 1.0
    z = _MODEL.same(y)
    z[0] = 5.0  # <- error
    return np.sum(y * x)


def add_into_a_matrix_of_unknown_rank_after_a_row(x):
    m = np.outer(x, x)
    row = m[-1]  # a view of m's last row
    m += 1.0  # <- error
    return np.sum(row * x)


class _Tracker:
    def record(self, v):
        self.last = v

    def halve(self, a):
        a *= 0.5  # <- error


_TRACKER = _Tracker()


def method_keeps_a_value(x):
    h = np.tanh(x)
    _TRACKER.record(h)  # <- error
    return np.sum(_TRACKER.last * x)


def _record_into(tracker, v):
    tracker.last = v


def function_keeps_a_value(x):
    """(the same through a function given the object: a silently wrong gradient,
    tanh(x) read back as a constant)"""
    h = np.tanh(x)
    _record_into(_TRACKER, h)  # <- error
    return np.sum(_TRACKER.last * x)


def method_halves_its_argument(x):
    y = x * 1.0
    _TRACKER.halve(y)
    return np.sum(y * y)


def _polynomial(a, *coefficients):
    total = 0.0
    for c in coefficients:
        total = total * a + c
    return total


def helper_with_star_args(x):
    return _polynomial(x[0], x[1], x[2], 3.0)  # <- error


def checkpointed_loop_reads_its_list(x):
    hs = [x]
    for _ in ppto.checkpoint(range(3)):
        hs.append(np.tanh(hs[-1] * 1.1))  # <- error
    return np.sum(hs[-1])


def _as_given(items):
    return items


def _first_of(items):
    return items[0]


def append_through_what_a_helper_returned(x):
    hs = [x]
    ys = _as_given(hs)
    ys.append(x * 2.0)  # <- error
    return np.sum(hs[-1])


def add_into_an_item_a_helper_returned(x):
    hs = [x * 1.0, x * 2.0]
    a = _first_of(hs)
    a += 1.0  # <- error
    return np.sum(hs[0] ** 2)


class _History:
    def __init__(self):
        self.seen = []

    def record(self, v):
        self.seen.append(v)


_HISTORY = _History()


def method_appends_a_value_read_back(x):
    h = np.sin(x)
    _HISTORY.record(h)  # <- error
    return np.sum(_HISTORY.seen[-1] * x)


def _add_to_first_row(rows, v):
    rows[0].append(v)  # <- error
    return 0.0


def helper_appends_to_an_inner_list(x):
    rows = [[x], [x * 2.0]]
    z = _add_to_first_row(rows, np.sin(x))
    return np.sum(rows[0][-1]) + z


def row_kept_in_a_branch_then_added_into(x):
    m = np.outer(x, x)
    row = m[-1] if x[0] > 0 else m[0]
    m += 1.0  # <- error
    return np.sum(row * x)


def rows_kept_by_a_loop_then_added_into(x):
    m = np.outer(x, x)
    rows = []
    for r in m:
        rows.append(r)
    m += 1.0  # <- error
    return np.sum(rows[-1] * x)


def _same_list(items):
    return items


def list_read_under_another_name_then_changed(x):
    hs = [x]
    ys = _same_list(hs)
    total = np.sum(ys[-1] ** 2)
    hs.append(np.sin(x))  # <- error
    return total + np.sum(hs[-1])


class _Keeper:
    def keep(self, v):
        self.last = v

    def get_last(self):
        return self.last


_KEEPER = _Keeper()


def kept_value_read_back_by_a_method(x):
    h = np.sin(x)
    _KEEPER.keep(h)  # <- error
    return np.sum(_KEEPER.get_last() * x)


# --- what an object holds, changed (each gave a zero gradient, some a wrong value)


class _Recorder:
    def __init__(self):
        self.acts = []
        self.w = np.zeros(3)
        self.hs = [np.zeros(3)]
        self.buf = {"h": np.zeros(3)}
        self.h = np.zeros(3)

    def appended(self, x):
        self.acts.append(x**2)  # <- error
        return np.sum(self.acts[-1] * x)

    def extended(self, x):
        self.acts.extend([x**2])  # <- error
        return np.sum(self.acts[-1] * x)

    def appended_through_a_local_name(self, x):
        hs = self.acts
        hs.append(x**2)  # <- error
        return np.sum(self.acts[-1] * x)

    def written_through_a_local_name(self, x):
        b = self.w
        b[:] = x**2  # <- error
        return np.sum(self.w * x)

    def added_into_through_a_local_name(self, x):
        b = self.w
        b += x**2  # <- error
        return np.sum(self.w * x)

    def item_replaced_through_a_local_name(self, x):
        hs = self.hs
        hs[0] = x**2  # <- error
        return np.sum(self.hs[0] * x)

    def key_set_through_a_local_name(self, x):
        b = self.buf
        b["h"] = x**2  # <- error
        return np.sum(self.buf["h"] * x)

    def set_by_setattr(self, x):
        setattr(self, "h", x**2)  # noqa: B010  # <- error
        return np.sum(self.h * x)

    def set_by_object_setattr(self, x):
        object.__setattr__(self, "h", x**2)  # <- error
        return np.sum(self.h * x)

    def set_through_its_dict(self, x):
        self.__dict__.update(h=x**2)  # <- error
        return np.sum(self.h * x)

    def buffer_updated(self, x):
        self.buf.update(h=x**2)  # <- error
        return np.sum(self.buf["h"] * x)

    def buffer_item_set(self, x):
        self.buf.__setitem__("h", x**2)  # <- error
        return np.sum(self.buf["h"] * x)

    def updated_through_vars(self, x):
        vars(self).update(h=x**2)  # <- error
        return np.sum(self.h * x)

    def items_added_into_by_a_loop(self, x):
        for h in self.hs:
            h += x**2  # <- error
        return np.sum(self.hs[0] * x)

    def written_through_getattr(self, x):
        b = getattr(self, "w")  # noqa: B009
        b[:] = x**2  # <- error
        return np.sum(self.w * x)

    def item_set_by_operator(self, x):
        operator.setitem(self.buf, "h", x**2)  # <- error
        return np.sum(self.buf["h"] * x)

    def updated_through_the_class(self, x):
        dict.update(self.buf, h=x**2)  # <- error
        return np.sum(self.buf["h"] * x)

    def added_into_by_operator(self, x):
        operator.iadd(self.w, x**2)  # <- error
        return np.sum(self.w * x)


_RECORDER = _Recorder()


def attribute_appended_to(x):
    return _RECORDER.appended(x)


def attribute_extended(x):
    return _RECORDER.extended(x)


def attribute_appended_to_through_a_local_name(x):
    return _RECORDER.appended_through_a_local_name(x)


def attribute_written_through_a_local_name(x):
    return _RECORDER.written_through_a_local_name(x)


def attribute_added_into_through_a_local_name(x):
    return _RECORDER.added_into_through_a_local_name(x)


def attribute_item_replaced_through_a_local_name(x):
    return _RECORDER.item_replaced_through_a_local_name(x)


def attribute_key_set_through_a_local_name(x):
    return _RECORDER.key_set_through_a_local_name(x)


def attribute_set_by_setattr(x):
    return _RECORDER.set_by_setattr(x)


def attribute_set_by_object_setattr(x):
    return _RECORDER.set_by_object_setattr(x)


def attribute_set_through_the_objects_dict(x):
    return _RECORDER.set_through_its_dict(x)


def attribute_dict_updated(x):
    return _RECORDER.buffer_updated(x)


def attribute_dict_item_set_by_its_method(x):
    return _RECORDER.buffer_item_set(x)


def attribute_updated_through_vars(x):
    return _RECORDER.updated_through_vars(x)


def attribute_items_added_into_by_a_loop(x):
    return _RECORDER.items_added_into_by_a_loop(x)


def attribute_written_through_getattr(x):
    return _RECORDER.written_through_getattr(x)


def attribute_item_set_by_operator(x):
    return _RECORDER.item_set_by_operator(x)


def attribute_updated_through_the_class(x):
    return _RECORDER.updated_through_the_class(x)


def attribute_added_into_by_operator(x):
    return _RECORDER.added_into_by_operator(x)


class _Weights:
    def __init__(self):
        self.w = np.zeros(3)


def argument_attribute_written_through_a_local_name(x, k):
    b = k.w
    b[:] = x**2  # <- error
    return np.sum(k.w * x)


def argument_attribute_added_into_through_a_local_name(x, k):
    b = k.w  # (k's class is not known here: w may be an array)
    b += x**2  # <- error
    return np.sum(k.w * x)


_STATE = {"h": np.zeros(3)}


def module_level_dict_updated(x):
    _STATE.update(h=x**2)  # <- error
    return np.sum(_STATE["h"] * x)


def method_of_a_local_name(x):
    keeper = _KEEPER  # (followed: the object is known)
    h = np.sin(x)
    keeper.keep(h)  # <- error
    return np.sum(_KEEPER.last * x)


def method_of_a_local_name_chosen_when_run(x):
    keeper = _KEEPER if np.sum(x) < 100.0 else _Keeper()
    h = np.sin(x)
    keeper.keep(h)  # <- error
    return np.sum(_KEEPER.last * x)


class _Scaled:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, v):
        return v * self.scale


def method_of_an_object_made_inside(x):
    scaled = _Scaled(2.0)
    return np.sum(scaled.apply(x) ** 2)  # <- error


def add_into_alias_in_a_branch(x, flag):
    z = x
    if flag:
        z += 1.0  # <- error
    return np.sum(z * x)


def add_into_alias_in_a_loop(x):
    acc = x
    for _ in range(3):
        acc += 1.0  # <- error
        acc = acc * 2.0
    return np.sum(acc * x)


def add_into_rows(x):
    for row in x:
        row += 1.0  # <- error
    return np.sum(x * x)


def list_after_a_literal(x):
    xs = [x[0]]
    ys = [x[1]] + xs + [x[2]]  # <- error
    return np.sum(np.stack(ys))


def numpy_dtype_by_position(x):
    return np.sum(x.var(0, np.float64))  # <- error


def numpy_function_dtype_by_position(x):
    return np.sum(np.var(x, 0, None))  # <- error


def repeated_by_a_name(x, n=3):
    ys = [x] * n  # <- error
    return np.sum(np.stack(ys))


def repeated_tuple_variable(x):
    pair = (x[0], x[1])
    both = pair * 2  # <- error
    return both[0] * both[3]


def repeated_zero_times(x):
    ys = [x[0]] * 0  # <- error
    return np.sum(np.stack(ys + [x[1]]))


def add_into_a_row_of_a_copy(x):
    copy = x * 1.0  # (x: a matrix)
    row = copy[0]
    row += 1.0  # <- error
    return np.sum(copy * copy)


def add_into_a_name_for_a_reshape(x):
    flat = x.reshape(-1)
    again = flat
    again += 1.0  # <- error
    return np.sum(x * x)


def add_into_an_unpacked_row(x):
    first, second = x  # (x: a matrix of two rows)
    first += 1.0  # <- error
    return np.sum(x * x)


def last_row_and_square(u):
    return u[-1], u * u  # the first item is a view of u


def add_into_an_unpacked_helper_result(x):
    # (found by the random programs: NumPy changed x; ppto's value did not)
    row, square = last_row_and_square(x)
    row *= 2.0  # <- error
    return np.sum(square) + np.sum(x * x)


def _leading_axis(u):
    return np.expand_dims(u, 0)  # a view of u


def add_into_a_helper_result(x):
    y = x * 1.0
    row = _leading_axis(y)
    row *= 2.0  # <- error
    return np.sum(y * y)


def _leading_axis_named(u):
    stacked = np.expand_dims(u, 0)
    return stacked


def add_into_a_named_helper_result(x):
    y = x * 1.0
    row = _leading_axis_named(y)
    row *= 2.0  # <- error
    return np.sum(y * y)


def _tanh_and_its_flat_view(u):
    t = np.tanh(u)
    return t, t.reshape(-1)  # the second item is a view of the first


def _tanh_and_its_flat_view_passed_on(u):
    return _tanh_and_its_flat_view(u)


def _flat_view(u):
    return u.reshape(-1)


def subtract_from_an_item_another_item_views(x):
    # (found by the random programs: NumPy changed b; ppto's value did not)
    a, b = _tanh_and_its_flat_view(x)
    a -= 0.5  # <- error
    return np.sum(b)


def subtract_from_the_view_of_another_item(x):
    a, b = _tanh_and_its_flat_view(x)
    b -= 0.5  # <- error
    return np.sum(a)


def subtract_from_an_item_of_a_result_passed_on(x):
    a, b = _tanh_and_its_flat_view_passed_on(x)
    a -= 0.5  # <- error
    return np.sum(b)


def subtract_from_an_item_of_a_named_result(x):
    both = _tanh_and_its_flat_view(x)
    a, b = both
    a -= 0.5  # <- error
    return np.sum(b)


def add_into_the_argument_of_a_flat_view(x):
    y = x * 1.0
    flat = _flat_view(y)
    y += 1.0  # <- error
    return np.sum(flat * flat)


def _tanh_and_a_view_in_a_list(u):
    t = np.tanh(u)
    return [t, t[:]]


def subtract_from_an_item_of_a_list_of_views(x):
    t = np.tanh(x)
    views = [t, t[:]]
    views[0] -= 0.5  # <- error
    return np.sum(views[1])


def subtract_from_an_item_of_a_returned_list_of_views(x):
    views = _tanh_and_a_view_in_a_list(x)
    views[0] -= 0.5  # <- error
    return np.sum(views[1])


def add_into_a_sum_kept_twice(x):
    total = 0.0
    total += x
    kept = total
    kept += 1.0  # <- error
    return np.sum(total * total)


def add_into_a_chained_name(x):
    a = b = x * 1.0
    a += 1.0  # <- error
    return np.sum(b * b)


def write_on_the_third_turn(x):
    a, b, c = x * 1.0, x * 2.0, x * 3.0
    for _ in range(3):
        c *= 2.0  # <- error
        c = b
        b = a
    return np.sum(a * x)


def joined_lists(x):
    items = [x[0]] + [x[1] * 2.0]  # <- error
    return np.sum(np.stack(items))


def write_through_chained_alias(x):
    y = x * 1.0
    z = w = y
    z[0] = 0.0  # <- error
    return np.sum(y * x) + np.sum(w)


def write_through_unpacked_alias(x):
    y = x * 1.0
    a, b = y, 2.0
    a[0] = b  # <- error
    return np.sum(y * x)


def write_through_loop_target(x):
    y = x * 1.0
    for row in [y]:
        row[0] = 0.0  # <- error
    return np.sum(y * x)


def add_into_argument_alias(x):
    z = x
    z += 1.0  # <- error
    return np.sum(x * x)


def scale_alias_of_product(x):
    y = np.tanh(x) * 2.0
    z = y
    z *= 3.0  # <- error
    return np.sum(y * x)


# aliases that reach a write only by leaving a loop early (break, continue), or
# through an element of a list of arrays: each gave a wrong gradient


def alias_kept_by_break(x):
    z = x * 1.0
    y = x * 2.0
    for i in range(3):
        y = z
        if i == 1:
            break
        y = z * 2.0
    y += 1.0  # <- error
    return np.sum(z * x)


def alias_kept_by_continue(x):
    z = x * 1.0
    y = x * 3.0
    for i in range(1):
        if i == 0:
            y = z
            continue
        y = y * 1.0
    y += 1.0  # <- error
    return np.sum(z * x)


def add_into_a_list_element(x):
    c = [x * 2.0, x * 3.0]
    a = c[0]
    a += 1.0  # <- error
    return np.sum(c[0] * x)


def add_into_a_tuple_item_in_a_loop(x):
    pair = (x * 2.0, x * 3.0)
    total = 0.0
    for item in pair:
        item += 1.0  # <- error
        total = total + np.sum(item * x)
    return total + np.sum(pair[0])


# items of lists made by append, repetition, copies, slices, enumerate and zip, and
# of lists holding numbers too: a write into one changed the array in NumPy


def add_into_an_appended_item(x):
    y = x * 2.0
    c = []
    c.append(y)
    a = c[0]
    a += 1.0  # <- error
    return np.sum(y * x)


def add_into_a_repeated_item(x):
    y = x * 2.0
    c = [y] * 2
    a = c[0]
    a += 1.0  # <- error
    return np.sum(y * x)


def add_into_an_item_of_a_copy(x):
    c = [x * 2.0, x * 3.0]
    d = list(c)
    a = d[0]
    a += 1.0  # <- error
    return np.sum(c[0] * x)


def add_into_an_item_of_a_slice(x):
    c = [x * 2.0, x * 3.0]
    d = c[:1]
    a = d[0]
    a += 1.0  # <- error
    return np.sum(c[0] * x)


def add_into_enumerated_items(x):
    c = [x * 2.0, x * 3.0]
    total = 0.0
    for i, a in enumerate(c):
        a += 1.0  # <- error
        total = total + np.sum(a * x) * i
    return total + np.sum(c[0] * x)


def add_into_zipped_items(x):
    c = [x * 2.0, x * 3.0]
    d = [x * 4.0, x * 5.0]
    total = 0.0
    for a, b in zip(c, d):
        a += b  # <- error
        total = total + np.sum(a * x)
    return total + np.sum(c[0] * x)


def add_into_an_item_beside_a_number(x):
    y = x * 2.0
    c = [y, 1.0]
    a = c[0]
    a += 1.0  # <- error
    return np.sum(y * x) + np.sum(a)


def add_into_a_listed_row(x):
    m = x[:, None] * x[None, :]
    rows = [m[0], m[1]]
    a = rows[0]
    a += 1.0  # <- error
    return np.sum(m * x)


def opaque_value_in_a_list(x):
    m = np.nancumprod(x)  # <- error
    c = [m, m * 2.0]
    return np.sum(c[0])  # (a zero gradient for a while: the list hid the taint)


def alias_kept_on_the_first_turn_of_an_endless_loop(x):
    z = x * 1.0
    y = z
    while True:
        if x[0] > 0:
            break  # on the first turn y is still z
        y = x * 2.0
    y += 1.0  # <- error
    return np.sum(z * x)


def extended_list(x):
    hs, gs = [], [x[0] * 2.0]
    hs.extend(gs)  # <- error
    hs.append(x[1])  # (extend was left out of the gradient: a wrong one)
    return hs[0] * hs[1] * x[2]


# a list made an array on one path only: its adjoint stayed a list on both (a
# TypeError, or the array path's factor lost)
def list_made_an_array_in_one_branch(x):
    xs = [x * 2.0, x * 3.0]
    if np.sum(x) > 0.0:
        xs = np.stack(xs) * 3.0  # <- error
    return np.sum(xs)


def list_made_an_array_in_a_loop(x):
    xs = [x * 2.0, x * 3.0]
    for _ in range(2):
        if np.sum(x) > 0.0:
            xs = np.stack(xs) * 3.0  # <- error
    return np.sum(xs)


def list_made_an_array_in_a_while_loop(x):
    xs = [x * 2.0, x * 3.0]
    while np.sum(xs[0]) < 5.0:
        xs = np.stack(xs) * 3.0  # <- error
    return np.sum(xs)


# --- NumPy spellings that mean something else than the operator for some ranks ---


def numpy_dot_of_stacks(a, b):
    return np.sum(np.dot(a, b) ** 2)  # <- error


def dot_method_of_stacks(a, b):
    return np.sum(a.dot(b) ** 2)  # <- error


def numpy_dot_by_a_number(a):
    return np.sum(np.dot(a, 2.0))  # <- error


def write_into_a_row_zipped_with_another(x):
    z = x.reshape(3, 1) * 1.0
    w = x.reshape(3, 1) * 2.0
    for a, b in zip(w, z):
        b[0] = a[0] * 2.0  # <- error
    return np.sum(z * z)


def write_into_a_row_enumerated_in_a_zip(x):
    z = x.reshape(3, 1) * 1.0
    y = x.reshape(3, 1) * 2.0
    for i, (a, b) in enumerate(zip(y, z)):
        b[0] = a[0] * 2.0 + i  # <- error
    return np.sum(z * z)


def write_through_an_annotated_name(x):
    z = x * 1.0
    v: np.ndarray = z[1:]
    v *= 2.0  # <- error
    return np.sum(z * x)


def write_into_an_unpacked_leaf_read_later(x, p):
    y, b = p
    b *= 2.0  # <- error
    return np.sum(b * x) + np.sum(y) + np.sum(p[1])


def write_into_an_unpacked_item_of_a_list_read_later(x):
    p = [x * 1.0, x * 2.0]
    y, b = p
    b *= 2.0  # <- error
    return np.sum(b * x) + np.sum(y) + np.sum(p[1])


def dict_inside_a_dict(x):
    d = {"a": {"w": x}}  # <- error
    return np.sum(d["a"]["w"])


def _keyed_twice(x):
    return {"k": x * 2.0, "j": x}


def _keyed_once(x):
    return {"k": np.sin(x)}


def dict_chosen_in_a_conditional_expression(x):
    chosen = (_keyed_twice(x) if np.sum(x) > 0 else _keyed_once(x))["k"]  # <- error
    return np.sum(chosen)


def write_into_a_name_of_a_loop_over_pairs(x):
    z = x * 1.0
    w = x * 2.0
    for a, b in [(z, w)]:
        a[0] = b[0] * 2.0  # <- error
    return np.sum(z * w)


# --- variables read or written by a name in a string (fence.py) --------------------
# (the analysis saw no dependency: eval("x ** 2") had a zero gradient)


def read_by_eval(x):
    return np.sum(eval("x ** 2"))  # <- error


def run_by_exec(x):
    exec("y = x * 2.0")  # <- error
    return np.sum(x)


def read_from_locals(x):
    y = x * 3.0
    return np.sum(locals()["y"] ** 2)  # <- error


def read_from_vars(x):
    return np.sum(vars()["x"] ** 2)  # <- error


def written_into_globals(x):
    globals()["LAST"] = x * 2.0  # <- error
    return np.sum(x)


def _evaluated(x):
    return eval("x * 2.0")  # <- error


def eval_in_a_called_function(x):
    return np.sum(_evaluated(x))


class _Scale:
    factor = 3.0


def read_from_vars_of_an_object(x):
    return np.sum(x * vars(_Scale)["factor"])


def parameter_named_eval(x, eval):
    return np.sum(eval(x))


# the same built-ins reached under another name (a zero gradient, or a raw
# KeyError / NameError from the generated code)
EVAL_ALIAS = eval
LOCALS_ALIAS = locals


def eval_by_a_global_alias(x):
    return np.sum(EVAL_ALIAS("x ** 2"))  # <- error


def eval_by_a_local_alias(x):
    ev = eval  # <- error
    return np.sum(ev("x ** 2"))


def eval_of_the_builtins_module(x):
    return np.sum(builtins.eval("x ** 2"))  # <- error


def locals_by_a_global_alias(x):
    y = x * 2.0  # noqa: F841 (read by name)
    return np.sum(LOCALS_ALIAS()["y"] ** 2)  # <- error


def eval_by_getattr(x):
    y = x * 2.0  # noqa: F841 (read by name)
    return np.sum(getattr(builtins, "eval")("y") ** 2)  # noqa: B009 # <- error


# the same built-ins held in a container or by an object (a zero gradient: the fence
# read names and attributes only)
CALLS = {"run": eval}


def eval_from_the_builtins_dict(x):
    y = x * 2.0  # noqa: F841 (read by name)
    return np.sum(builtins.__dict__["eval"]("y") ** 2)  # <- error


def eval_from_a_module_dict(x):
    y = x * 2.0  # noqa: F841 (read by name)
    return np.sum(CALLS["run"]("y") ** 2)  # <- error


def eval_from_the_builtins_dict_by_a_local_alias(x):
    ev = builtins.__dict__["eval"]  # <- error
    return np.sum(ev("x ** 2"))


class _Evaluating:
    def __init__(self) -> None:
        self.run = eval

    def loss(self, x):
        y = x * 2.0  # noqa: F841 (read by name)
        return np.sum(self.run("y") ** 2)  # <- error


EVALUATING = _Evaluating()


def eval_held_by_an_object(x):
    return EVALUATING.loss(x)


# --- writes a probe of silently wrong gradients found getting through -------------
# (each gave a zero or wrong gradient without a word)
HALVES = np.arange(1.0, 5.0)


def exp_into_a_positional_out(x):
    y = np.zeros(4)
    np.exp(x, y)  # <- error
    return np.sum(y * HALVES)


def divided_in_place_by_position(x):
    p = np.exp(x)
    np.divide(p, np.sum(p), p)  # <- error
    return np.sum(p * HALVES)


def cumsum_into_a_positional_out(x):
    y = np.zeros(4)
    np.cumsum(x, 0, None, y)  # <- error
    return np.sum(y * HALVES)


def clipped_in_place_by_a_method(x):
    z = x * 1.0
    z.clip(0.0, 1.0, z)  # <- error
    return np.sum(z * HALVES)


def multiplied_at_by_a_ufunc_imported_by_name(x):
    y = np.ones(4)
    numpy_multiply.at(y, [0, 0, 1], x[:3])  # <- error
    return np.sum(y * HALVES)


def diagonal_read_then_matrix_written(x):
    z = x.reshape(2, 2) * 1.0
    d = np.diag(z)
    z *= 2.0  # <- error
    return np.sum(d * HALVES[:2])


REBOUND = np.zeros(4)


def _rebind(value):
    global REBOUND
    REBOUND = value


def global_rebound_by_a_helper(x):
    _rebind(x**2)  # <- error
    return np.sum(REBOUND * HALVES)


# --- complex values inside a real function (fence.py): ppto's rules take no
# conjugates (np.sum(np.abs(x * 1j)) had a zero gradient)


def complex_literal(x):
    return np.sum(np.abs(x * (1 + 1j)) ** 2)  # <- error


def complex_exponential(x):
    return np.sum(np.abs(1 + np.exp(1j * x)) ** 2)  # <- error


def complex_made_by_a_call(x):
    return np.sum(np.abs(x * complex(0.0, 2.0)))  # <- error
