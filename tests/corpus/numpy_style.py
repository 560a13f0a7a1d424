"""Corpus functions written NumPy style: ``np.*`` calls, methods, operators,
subscripts, Python control flow. ``CASES`` declares each one's inputs."""

import functools

import numpy as np

import ppto
from tests.corpus.case import (
    Case,
    F,
    K,
    S,
    T,
    V,
)

# --- straight line ---


def affine_bias(x, w, b):
    return np.sum(x @ w + b)


def exp_sum_axis(x):
    s = np.sum(np.exp(x), axis=1)
    return np.sum(s * s)


def gram_transpose(x):
    return np.sum(x.T @ x)


def method_sum(x):
    return (x * x).sum()


def reshape_rows(x):
    y = x.reshape(2, 6)
    return np.sum(y[0] * y[1])


def shape_metadata(x):
    n = x.shape[0]
    flat = x.reshape(x.shape[0] * x.shape[1])
    return np.sum(flat * flat) / n


def first_times_last(x):
    return x[0] * x[-1]


def shifted_slices(x):
    return np.sum(x[1:4] * x[:3])


def column_differences(x):
    return np.sum((x[:, 1:] - x[:, :-1]) ** 2)


def reversed_slice(x):
    return np.sum(x * x[::-1] * np.arange(x.shape[0]))


def index_by_zero_d_boolean(x, keep):
    y = x[keep]  # a 0-d boolean index adds an axis (an integer would drop one)
    return np.sum(np.mean(y * y, axis=0))


def row_by_index(x, i):
    return np.sum(x[i, :] ** 2)


def integer_array_index(x, idx):
    return np.sum(x[idx] ** 2 * x[idx])


def relu_by_maximum(x):
    return np.sum(np.maximum(x, 0.0) * x)


def maximum_of_two(a, b):
    return np.sum(np.maximum(a, b) ** 2)


def leaky_where(x):
    return np.sum(np.where(x > 0, x, 0.1 * x) * x)


def where_of_two(a, b):
    return np.sum(np.where(a > b, a * b, a - b))


def clipped(x):
    return np.sum(np.clip(x, -0.5, 0.5) * x)


def concatenated(a, b):
    c = np.concatenate([a, b], axis=0)
    return np.sum(c * np.sin(c))


def stacked(a, b):
    s = np.stack([a, b], axis=1)
    return np.sum(s[:, 0] * s[:, 1] + s[:, 1])


def transposed_axes(x):
    return np.sum(np.transpose(x, (1, 0, 2))[0] ** 2)


def outer_by_expand_dims(x, y):
    return np.sum(np.expand_dims(x, 1) * np.expand_dims(y, 0) * np.cos(y))


def vector_dot(a, b):
    return np.dot(a, b)


def mean_of_columns(x):
    return np.sum(np.mean(x, axis=0) ** 2)


def row_maxima(x):
    return np.sum(np.max(x, axis=1) * np.max(x))


def power_scalar(x, y):
    return np.sum(x**y)


def normalized_first(a):
    return (a / np.sum(a))[0]


def negate_divide(x, y):
    return np.sum(-x / y)


def pairwise_squared_distances(x, y):
    return np.sum((x[:, None] - y[None, :]) ** 2)


def bilinear(x, a, y):
    return x @ a @ y


def squeeze_and_max(x):
    return np.squeeze(x, axis=0).max() + x.mean()


def method_transpose(x):
    return np.sum(x.transpose(1, 0) @ x * x.T.sum(axis=0))


def elementwise_chain(x):
    return np.sum(np.tanh(x) * np.log1p(x * x) + np.sqrt(np.exp(x)))


def layer_norm(x):
    mu = x.mean(axis=1, keepdims=True)
    centered = x - mu
    var = np.mean(centered**2, axis=1, keepdims=True)
    y = centered / np.sqrt(var + 1e-5)
    return np.sum(y * np.arange(x.shape[1]))


def unused_argument(x, y):
    return np.sum(x * 2.0)


def metadata_only_argument(x, y):
    return np.sum(x) * y.shape[0]


# --- overwriting and unpacking ---


def overwritten(x):
    x = x * 2
    x = np.sin(x)
    x = x + x
    return np.sum(x)


def augmented(x, w):
    s = 0.0
    s += np.sum(x @ w)
    s *= 2.0
    s -= np.sum(w)
    return s


def swapped_tuple(x, y):
    a, b = x * 2, y + 1
    a, b = b, a
    return np.sum(a * np.exp(b))


def _moments(v):
    m = np.mean(v)
    return m, np.mean((v - m) ** 2)


def tuple_from_helper(x):
    m, var = _moments(x)
    return m * var + var


def _one_element(v):
    return (v * 2.0,)


def single_element_unpacking(x):
    (y,) = _one_element(x)
    return np.sum(y * y)


def _nested_pairs(v):
    return (v, v * 2.0), v * 3.0


def nested_unpacking(x):
    (a, b), c = _nested_pairs(x)
    return np.sum(a * b * c)


# --- calls ---


def _square_sum(v):
    return np.sum(v * v)


def calls_helper_twice(x, w):
    return _square_sum(x @ w) + _square_sum(x)


def _scaled_sum(v, scale=1.0, axis=0):
    return np.sum(v, axis=axis) * scale


def helper_with_keywords(x):
    return np.sum(_scaled_sum(x, scale=2.0, axis=1) ** 2)


def helper_with_array_keyword(x, w):
    return np.sum(_scaled_sum(x, scale=w, axis=0))


@ppto.operator
def softsign(x):
    return x / (1 + abs(x))


def uses_operator(x):
    return np.sum(softsign(x) * x)


def _activation(v):
    return np.tanh(v)


def _layer(x, w, b):
    return _activation(x @ w + b)


def nested_helpers(x, w, b):
    return np.sum(_layer(x, w, b) ** 2)


# --- branches ---


def branch_on_sum(x):
    if np.sum(x) > 0:
        y = x * 2
    else:
        y = x**2
    return np.sum(y)


def elif_chain(x):
    s = np.mean(x)
    if s > 0.5:
        y = np.exp(x)
    elif s > 0:
        y = x * s
    else:
        y = -x
    return np.sum(y * x)


def nested_branches(x, y):
    if np.sum(x) > 0:
        if np.sum(y) > 0:
            z = x * y
        else:
            z = x - y
    else:
        z = x + y * y
    return np.sum(z)


def branches_assign_different_names(x):
    if np.max(x) > 0.5:
        a = np.exp(x)
        out = np.sum(a)
    else:
        b = np.sin(x)
        out = np.sum(b * b)
    return out


def branch_one_sided(x):
    y = x * 3
    if np.min(x) < 0:
        y = y * x
    return np.sum(y)


def reassigned_within_branch(x):
    if np.sum(x) > 0:
        y = x * 1.0
    else:
        y = x * 2.0
        y = y * x
    return np.sum(y)


def conditional_expression(x):
    y = x * 2 if np.max(x) > 0.5 else x / 2
    return np.sum(y)


def boolean_conditions(x, y):
    if np.sum(x) > 0 and not np.sum(y) > 1 or np.max(x) > 2:
        z = x * y
    else:
        z = x + y
    return np.sum(z * z)


def early_return(x):
    if np.min(x) > 0:
        return np.sum(np.log(x))
    y = x * x
    return np.sum(y)


def multiple_returns(x):
    s = np.sum(x)
    if s > 1:
        return s * s
    elif s > -1:
        return np.sum(np.sin(x))
    else:
        return -s


def branch_on_integer(x, n):
    if n > 1:
        y = x.reshape(n, -1)
    else:
        y = x.reshape(1, -1)
    return np.sum(y[n - 1] ** 2)


# --- integers, shapes and losses ---


def integer_shape(x, n):
    return np.sum(x.reshape(n, -1)[n - 1] * x[0])


def integer_indices(x, k):
    return x[k] * x[k + 1] + x[-k - 1]


def softmax_cross_entropy(logits, labels):
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def mlp(x, w1, b1, w2, b2, labels):
    h = np.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    return softmax_cross_entropy(logits, labels)


# --- more indexing, broadcasting and NumPy spellings ---

SCALE = 0.5
WEIGHTS = np.array([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]])


def ellipsis_and_none(x):
    return np.sum(x[..., 0] * x[None][0, :, 1])


def index_array_with_slice(x, idx):
    return np.sum(x[idx, 1:] ** 2)


def tuple_axis_sum(x):
    return np.sum(np.sum(x**2, axis=(0, 2)) * np.mean(x, axis=-1).sum())


def reshape_variants(x):
    a = x.reshape((2, -1))
    b = x.reshape(-1)
    return np.sum(a[1] * b[:3]) + np.sum(np.reshape(x, (3, 2)) ** 2)


def methods_on_results(x):
    return np.exp(x).sum(axis=0).max() + (x * 2).T.mean()


def python_scalar_arithmetic(x):
    return np.sum(2.0 / x + (1 - x) * 3 + x**0.5 - 2**x)


def numpy_ufunc_spellings(a, b):
    c = np.subtract(np.square(a), np.power(b, 3)) + np.negative(np.abs(a * b))
    return np.sum(np.multiply(c, np.add(a, 1.0)) / np.sqrt(b))


def matrix_vector_dot(a, v):
    return np.sum(np.dot(a, v) ** 2) + np.sum(np.matmul(a.T, a))


def module_constants(x):
    return np.sum(np.tanh(WEIGHTS @ x) * SCALE)


def same_argument_twice(x):
    return _weighted_inner(x, x) + _weighted_inner(x, x * 2.0)


def _weighted_inner(u, v):
    return np.sum(u * v * np.arange(u.shape[0]))


def zero_dim_and_broadcast_shapes(x, s, row, col):
    return np.sum((x * s + row) * col)


def keepdims_division(x):
    return np.sum(x / np.sum(x, axis=1, keepdims=True) * x)


def split_and_unpack(x):
    a, b = np.split(x, 2)
    return np.sum(a * np.exp(b))


def _uneven_parts(x):
    return np.split(x, [1, 3])


def _uneven_parts_scaled(x):
    return _uneven_parts(x * 3.0)


def helper_returns_an_uneven_split(x):
    # the helper returns a tuple of arrays of unlike shapes, read item by item
    # (treated as one array, its adjoint was a stack of them: a ValueError)
    parts = _uneven_parts(x)
    return np.sum(parts[0] * 2.0) + np.sum(parts[1] ** 2) + np.sum(np.sin(parts[2]))


def helper_passes_on_an_uneven_split(x):
    parts = _uneven_parts_scaled(x)
    return np.sum(parts[2] * parts[2]) + np.sum(parts[0] * parts[0][0])


def _uneven_parts_named(x):
    parts = np.split(x, [2, 5])
    return parts


def _uneven_parts_listed(x):
    return list(np.split(x, [2, 5]))


def _uneven_parts_cosines(x):
    return tuple(np.cos(part) for part in np.split(x, [2, 5]))


def _rows_of(x):
    return np.unstack(x.reshape(2, 3), axis=0)


def _later_parts(x):
    return np.split(x, [1, 4])[1:]


def slices_of_uneven_parts(x):
    # a slice of a list or tuple is one (read as an array, its items' adjoints
    # were stacked: a ValueError for parts of unlike shapes)
    parts = np.split(x, [1, 4])
    rest, tail = parts[1:], np.split(x * x, [2, 3])[1:]
    later = _later_parts(x)
    total = np.sum(rest[0] ** 2) + np.sum(rest[1] * tail[1][:2])
    return total + np.sum(np.concatenate(parts[:2]) ** 3) + np.sum(later[1] * later[1])


def split_parts_are_a_list(x):
    # np.split returns a list: code appends to it, replaces and pops its items,
    # and asks its type (made a tuple, the first three failed and the last
    # took the other branch)
    parts = np.split(x, [1, 4])
    parts.append(x[:2] * 2.0)
    parts[0] = parts[0] * 5.0
    last = parts.pop()
    scale = 2.0 if isinstance(parts, list) else 1.0
    return scale * np.sum(parts[0] ** 2) + np.sum(last * parts[1][:2]) + len(parts)


def directional_splits(x):
    grid = np.outer(x[:4], x[2:]).reshape(4, 2, 2)
    left, right = np.hsplit(grid[:, :, 0], [1])
    top = np.vsplit(grid[:, :, 1], [3])[0]
    front, back = np.dsplit(grid, 2)
    ends = np.hsplit(x, [1, 5])
    total = np.sum(left * right[:, :1]) + np.sum(top**2) + np.sum(front * back)
    return total + np.sum(ends[2] ** 3) + np.sum(ends[0])


def helpers_return_uneven_parts_other_ways(x):
    named, listed = _uneven_parts_named(x), _uneven_parts_listed(x)
    cosines, rows = _uneven_parts_cosines(x), _rows_of(x)
    first = np.sum(named[2] ** 3) + np.sum(named[0]) + np.sum(listed[1] ** 2)
    return first + np.sum(cosines[2] * listed[0][1]) + np.sum(rows[1] * rows[0])


def where_constant_branch(x):
    return np.sum(np.where(x > 0.2, x * x, 0.0))


# --- more control flow ---


def return_conditional_expression(x):
    return np.sum(x) if np.max(x) > 0.5 else np.sum(x * x)


def nested_conditional_expressions(x, y):
    z = (x if np.sum(y) > 0 else y) * (y if np.sum(x) > 0 else 2.0 * x)
    return np.sum(z)


def chained_comparison(x):
    s = np.mean(x)
    if -0.5 < s < 0.5:
        y = np.sin(x)
    else:
        y = np.cos(x)
    return np.sum(y * x)


def shape_condition(x):
    if x.shape[0] > 2:
        y = x[:2] * x[1:3]
    else:
        y = x * x
    return np.sum(y)


def reassigned_in_both_branches(x):
    y = x * 1.5
    if np.sum(x) > 0:
        y = y * x
        y = y + 1.0
    else:
        y = y - x
    z = y * y
    return np.sum(z + y)


def variable_only_in_one_branch(x, w):
    out = np.sum(x)
    if np.sum(w) > 0:
        h = x @ w
        out = out + np.sum(h * h)
    return out * 2.0


def helper_in_branch(x):
    if np.sum(x) > 0:
        v = _square_sum(x * 2.0)
    else:
        v = _square_sum(x) + 1.0
    return v


def _clamped_energy(v):
    if np.max(v) > 1.0:
        return np.sum(v)
    return np.sum(v * v)


def helper_with_early_return(x):
    return _clamped_energy(x * 3.0) + _clamped_energy(x)


def return_in_nested_branch(x, y):
    if np.sum(x) > 0:
        if np.sum(y) > 0:
            return np.sum(x * y)
        z = x - y
    else:
        z = x + y
    return np.sum(z**2)


def _pair(x, y):
    return x * y, x + y


def unpack_helper_and_reuse(x, y):
    p, q = _pair(x, y)
    p, q = _pair(p, q)
    return np.sum(p * q)


# --- constants, metadata and non-differentiable operators ---


def passthrough(s):
    return s


def constant_on_one_path(x):
    if np.sum(x) > 10.0:
        return 0.0
    return np.sum(x * x)


def argument_only_in_condition(x, y):
    if np.sum(x) > 0:
        return np.sum(y * 2.0)
    return np.sum(y)


def sign_and_floor(x):
    return np.sum(x * np.sign(x) + (x - np.floor(x)) * x)


def boolean_mask_multiply(x):
    return np.sum((x > 0) * x**2 + (x < 0).astype(np.float64) * x)


def cast_differentiable(x):
    return np.sum(x.astype(np.float64) ** 2)


def length_and_size(x):
    return np.sum(x) / len(x) + np.sum(x * x) / x.size + x.ndim * np.sum(x)


def numpy_constants(x):
    return np.sum(np.sin(np.pi * x) * np.e + np.float64(2.0) * x)


def chained_integer_indexing(x, i):
    a = x[i][1] * x[-1, -1] + np.sum(x[1:3, ::-1] * x[[0, 2]])
    return a + x[[3, 1]][:, :2].sum()


def boolean_mask_index(x):
    return np.sum(x[x > 0] ** 2)


def operators_on_written_lists(x):
    # lists and tuples where an operator takes an array, read as NumPy reads them
    pair = (x[0], x[1] * 3.0)
    total = np.mean(np.add([x[0], x[1]], [x[1], x[0] * 2.0]))
    return total + np.max(pair) + np.sum(np.maximum([x[0], x[2]], 0.1) ** 2)


TRIPLE_WEIGHTS = [1.0, 2.0, 3.0]


def operators_on_constant_lists(x):
    # lists of numbers where an operator takes an array, written out, bound to a
    # name, a tuple and a global: arrays, as NumPy reads them (np.average took
    # such weights for one number, the mean; solve's and arctan2's rules failed)
    v = x[0]
    system = [[3.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 5.0]]
    solved = (
        np.linalg.solve(system, v)
        + np.linalg.solve([[2.0, 0.5], [0.5, 3.0]], v[:2]).sum()
    )
    angles = np.arctan2([1.0, -2.0, 0.5], v) + np.arctan2(v, (0.7, 0.2, -0.4))
    shares = (1.0, 0.5, 2.0)
    averaged = np.average(v, weights=[1.0, 2.0, 3.0]) + np.average(v, weights=shares)
    averaged = averaged + np.average(x, axis=1, weights=TRIPLE_WEIGHTS).sum()
    return np.sum(solved * angles) + averaged + np.dot(system, v).sum() * v[1]


# --- statements with no derivative of their own; Python spellings of calls ---


def printed_asserted_raised(x):
    print(f"{x.shape[0]} values, {np.sum(x):.2f} in all")
    assert x.ndim == 1 and 0 < x.shape[0] < 10, "a short vector"
    if not np.all(np.isfinite(x)):
        raise ValueError(f"not finite: {x}")
    return np.sum(np.sin(x) * x)


def masked_sliced_and_added_writes(x):
    y = x * 1.0
    y[x > 0] = x[x > 0] ** 2
    y[1:3] = y[0:2] * 2.0
    y[0] += x[3] ** 2
    return np.sum(y * x)


def seeded_noise(x):
    noise = np.random.default_rng(7).normal(size=x.shape)
    h = x
    for _ in range(2):
        h = np.tanh(h + noise * 0.1)
    return np.sum(h * noise)


def _passing_through(function):
    @functools.wraps(function)
    def wrapper(*args, **options):
        return function(*args, **options)

    return wrapper


def _scaled_by_ten(function):
    @functools.wraps(function)
    def wrapper(v):
        return function(v) * 10.0

    return wrapper


@_passing_through
def _squared(v, *, power=2.0):
    return np.abs(v) ** power


@_scaled_by_ten
def _sine(v):
    return np.sin(v)


def decorated_helpers(x):
    return np.sum(_squared(x, power=3.0) + _squared(x)) + np.sum(_sine(x))


class _Settings:
    scale = 1.5

    def __init__(self):
        self.offset = np.array([0.5, -0.25, 1.0, 2.0])


_SETTINGS = _Settings()


def class_and_instance_attributes(x):
    return np.sum((x * _Settings.scale + _SETTINGS.offset) ** 2)


def _closure_over_reassigned():
    factor = 1.0

    def closure_over_reassigned(x):
        return np.sum(np.exp(x * factor))

    factor = 3.0  # (the closure reads the value it has when called)
    return closure_over_reassigned


closure_over_reassigned = _closure_over_reassigned()


_OFFSET = 0.5


def global_declared_read_only(x):
    global _OFFSET  # (never assigned: the declaration changes nothing)
    return np.sum(np.sin(x + _OFFSET))


def _nonlocal_read_only():
    scale = 2.0

    def nonlocal_declared_read_only(x):  # (case ids are function names)
        nonlocal scale
        if x.shape[0] > 1:
            nonlocal scale  # (declared again, in a branch: dropped alike)
        return np.sum(np.exp(x * scale))

    return nonlocal_declared_read_only


nonlocal_declared_read_only = _nonlocal_read_only()


def halves_by_integer_division(x):
    half = x.shape[0] // 2
    total = 0.0
    for i in range(half):
        total = total + x[i] * x[i + half]
    return total / (len(x) // 2)


# --- non-scalar results (checked through vjp) ---


def rows_softmax(x):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def matmul_tanh(x, w):
    return np.tanh(x @ w)


def two_outputs(x, y):
    return x * y, np.sum(x)


def branch_matrix(x, w):
    if np.sum(x) > 0:
        return x @ w
    return (x * 2.0) @ w


def pairs_from_helper(x, y):
    return _pair(x, y)


def causal_attention_swapaxes(q, k, v):
    # keys to columns written the two NumPy ways (np.swapaxes had no operator)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores + 0.5 * (q @ k.swapaxes(1, 2))
    scores = np.where(np.triu(np.ones(scores.shape[-2:]), k=1) > 0, -1e9, scores)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return np.sum(np.tanh(weights @ v))


def logistic_loss_logaddexp(w, x, y):
    # log(1 + exp(-y z)) without overflow, and a softplus written the other way
    z = x @ w
    return np.mean(np.logaddexp(0.0, -y * z)) + np.sum(np.logaddexp(z, z * z))


def nll_take_along_axis(logits, labels):
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    picked = np.take_along_axis(logp, labels[:, None], axis=1)
    return -np.mean(picked) + np.sum(np.take_along_axis(logits, labels[None, 1:], 0))


def attention_by_einsum(x, w_query, w_key):
    # projections and scores written with np.einsum (it had no operator)
    query = np.einsum("btd,de->bte", x, w_query)
    key = np.einsum("btd,de->bte", x, w_key)
    scores = np.einsum("bqd,bkd->bqk", query, key)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return np.sum(np.einsum("...qk,...kd->...qd", weights, x) ** 2)


def discounted_returns(rewards):
    # running sums from the end, as in returns of an episode (np.flip, np.cumsum)
    returns = np.flip(np.cumsum(np.flip(rewards, axis=1), axis=1), axis=1)
    return np.sum(returns**2) + np.sum(rewards.cumsum() * np.flip(rewards).ravel())


def survival_probabilities(hazards):
    # the chance of lasting through each step, np.cumprod along time and flattened
    alive = np.cumprod(1.0 - hazards, axis=1)
    return np.sum(alive * hazards) + np.sum(hazards.cumprod() ** 2)


def weighted_averages(x, w):
    # np.average with NumPy's positional order (a, axis, weights) and by name
    rows = np.average(x, 1, w)
    whole = np.average(x, weights=x * x + 0.5)
    return np.sum(rows**2) + whole + np.sum(np.average(x, axis=0, keepdims=True))


def averages_with_their_weights_sums(x, w):
    # returned=True: the pair (average, sum of the weights), positional too; both
    # differentiated (1-D weights along an axis, weights of x's shape, none)
    rows, row_weights = np.average(x, 1, w, returned=True)
    whole, total = np.average(x, weights=x * x + 0.5, returned=True)
    columns, count = np.average(x, 0, None, True, keepdims=True)
    ppto_pair = ppto.average(x, 1, w * w, returned=True)
    return (
        np.sum(rows**2 * row_weights)
        + whole * np.sqrt(total)
        + np.sum(columns * count)
        + np.sum(ppto_pair[0] / ppto_pair[1])
    )


def averages_weighted_by_none(x):
    # weights=None, NumPy's default (code passing optional weights on): the mean
    rows = np.average(x, 1, None)
    return np.sum(rows**2) + np.average(x**2, weights=None)


def linear_systems(A, b):
    # np.linalg's inverse, solves (one vector, columns, a stack) and determinant
    x = np.linalg.solve(A, b)
    columns = np.linalg.solve(A, np.stack([b, b * b], axis=1))
    stacked = np.linalg.solve(np.stack([A, A.T]), b)
    inverse = np.linalg.inv(A)
    determinants = np.linalg.det(A) + np.linalg.slogdet(A).logabsdet  # (a field)
    return np.sum(x**2) + np.sum(inverse @ columns) + np.sum(stacked) + determinants


def gaussian_log_likelihood(factor, x):
    # a covariance from a factor: its Cholesky factor, log-determinant and solve
    covariance = factor @ factor.T + np.eye(3)
    lower = np.linalg.cholesky(covariance)
    sign, logdet = np.linalg.slogdet(covariance)
    z = np.linalg.solve(lower, x)
    return -0.5 * (np.sum(z * z) + sign * logdet) + np.sum(np.tanh(lower))


def gaussian_process_nll(x, y, log_scale, log_noise):
    # a GP's negative log likelihood: two triangular solves, the second on the
    # first's result (a solve of a value whose rank the tangent rule's branch reads)
    squared = np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    kernel = np.exp(-0.5 * squared / np.exp(2 * log_scale))
    covariance = kernel + (np.exp(2 * log_noise) + 1e-6) * np.eye(x.shape[0])
    lower = np.linalg.cholesky(covariance)
    alpha = np.linalg.solve(lower.T, np.linalg.solve(lower, y))
    sign, logdet = np.linalg.slogdet(covariance)
    return 0.5 * y @ alpha + 0.5 * logdet


def spectral_features(A, W):
    # a symmetric matrix's eigenvalues and the projection onto its top eigenvector
    # (which does not depend on the vector's sign), singular values, the first
    # singular pair's rank-one matrix and an orthonormal basis (np.linalg.qr)
    S = A + A.T
    w, V = np.linalg.eigh(S)
    top = V[:, -1:] @ V[:, -1:].T
    values = np.linalg.eigvalsh(S, UPLO="U")
    U, s, Vh = np.linalg.svd(A @ W, full_matrices=False)
    rank_one = s[0] * (U[:, :1] @ Vh[:1])
    Q, R = np.linalg.qr(W)
    spectra = (
        np.sum(w * np.arange(3)) + np.sum(values**2) + np.sum(np.linalg.svdvals(W))
    )
    vectors = np.sum(top * A) + np.sum(rank_one * np.cos(A @ W))
    return spectra + vectors + np.sum(Q * W) + np.sum(np.diag(R) ** 2)


def stacked_decompositions(A):
    # stacks of matrices: each one's eigenvalues (a field of the result), singular
    # values (compute_uv=False) and QR factors
    S = A @ np.swapaxes(A, -1, -2)
    w = np.linalg.eigh(S).eigenvalues
    s = np.linalg.svd(A, compute_uv=False)
    Q, R = np.linalg.qr(A)
    return (
        np.sum(np.log(w + 1.0))
        + np.sum(s**3)
        + np.sum(Q[..., 0] * A[..., 0])
        + np.sum(R)
    )


def pseudo_inverse_and_powers(A, B, x):
    # np.linalg.pinv of a tall matrix, powers of a square one (a negative one
    # through its inverse) and a chain of products with vectors at its ends
    square = A + 2.0 * np.eye(3)
    powers = np.linalg.matrix_power(square, 3) + np.linalg.matrix_power(square, -1)
    chain = np.linalg.multi_dot([x, square, B.T, B, x])
    return np.sum(np.linalg.pinv(B) ** 2) + np.sum(powers * A) + chain


def least_squares_fit(a, b):
    # np.linalg.lstsq's solution (its item 0), residuals and singular values
    x, residuals, rank, s = np.linalg.lstsq(a, b)
    columns = np.linalg.lstsq(a, np.stack([b, b**2], axis=1), rcond=None)[0]
    return np.sum(x**2) + np.sum(residuals) + np.sum(np.cos(columns)) + s[0]


def matrix_and_vector_norms(A, x):
    # np.linalg.norm's other orders: of a vector (1, inf, a p) and of a matrix
    # (nuclear, spectral, smallest singular value, column and row sums)
    vector = np.linalg.norm(x, 1) + np.linalg.norm(x, np.inf) + np.linalg.norm(x, 3)
    matrix = np.linalg.norm(A, "nuc") + np.linalg.norm(A, 2) + np.linalg.norm(A, -2)
    sums = np.linalg.norm(A, 1) + np.linalg.norm(A, -np.inf)
    return vector + matrix**2 + sums * np.sum(x)


def torque_and_normal(r, f):
    # np.cross of rows, of a row with every row, and along the first axis
    torque = np.cross(r, f)
    normal = np.cross(r[0], f)
    return np.sum(torque**2) + np.sum(normal * r) + np.sum(np.cross(r.T, f.T, axis=0))


def polar_coordinates(x, y):
    # angle and radius of points, as a NumPy user writes them (np.arctan2, np.hypot)
    angle = np.arctan2(y, x)
    radius = np.hypot(x, y)
    return np.sum(np.cos(angle) * radius**2) + np.sum(np.arctan2(1.0, radius))


def other_bases_and_roots(x):
    # bits and decibels, cube roots and reciprocals, each through its operator
    bits = np.log2(x) + np.exp2(-x)
    decibels = 10.0 * np.log10(x * x)
    return np.sum(bits * decibels + np.cbrt(x - 1.0) + np.reciprocal(x + 1.0))


def wrapped_phase(x, period):
    # C's remainder (the sign of x), a saw wave of x
    return np.sum(np.fmod(3.0 * x, period) ** 2 + np.fmod(period, 0.3))


def shifted_and_copied(x):
    # a circular shift and copies of rows and columns (np.roll, np.tile, np.repeat
    # and x.repeat had no operator)
    shifted = np.roll(x, 1, axis=1) - x
    tiled = np.tile(x[0], (2, 1))
    copies = np.repeat(x[:, :1], 3, axis=1)
    return np.sum(shifted**2 * tiled) + np.sum(np.sin(copies * x.repeat(2)[:3]))


def cleaned_inputs(x, w):
    # the input-cleaning lines NumPy code starts with, and a vector built of
    # differentiated numbers with np.array
    x = np.asarray(x, dtype=np.float64)
    w = np.ascontiguousarray(w)
    corners = np.array([x[0, 0], 2.0 * x[-1, -1], w[1]])
    return np.sum(np.array(x) @ w) + np.sum(corners**2) + np.sum(np.asarray(x * w))


def padded_differences(x):
    # neighbours' differences with a constant border (np.pad, np.diff)
    padded = np.pad(x, ((0, 0), (1, 1)), constant_values=0.5)
    steps = np.diff(padded, axis=1)
    return np.sum(steps**2) + np.sum(np.cos(np.diff(x, n=2)))


def sorted_largest(x):
    # the two largest of each row, and the smallest three overall (np.sort)
    ordered = np.sort(x, axis=1)
    smallest = np.sort(x, axis=None)[:3]
    return np.sum(ordered[:, -2:] ** 2) + np.sum(smallest * np.array([1.0, 2.0, 3.0]))


def kronecker_and_base_two(a, b):
    # a block matrix of scaled copies of b (np.kron) and sums of probabilities
    # held as base-2 logarithms (np.logaddexp2), neither of which had an operator
    blocks = np.kron(a, b)
    bits = np.logaddexp2(a[:, :1], b[0])
    return np.sum(np.tanh(blocks) * blocks) + np.sum(bits**2) + np.sum(np.kron(a[0], b))


def filtered_signal(signal, kernel):
    # a smoothing filter and a matched filter (np.convolve, np.correlate had no
    # operator), with NumPy's modes
    smooth = np.convolve(signal, kernel, mode="same")
    matched = np.correlate(signal, kernel)
    echo = np.convolve(kernel, signal) + np.correlate(kernel, signal, "full")
    return np.sum(np.tanh(smooth) * signal) + np.sum(matched**2) + np.sum(echo**3)


def interpolated_curve(x, knots, heights):
    # a piecewise linear curve through a table of points (np.interp had no
    # operator), differentiated in where it is read, the points and their heights;
    # beyond the ends, fp's end values or left= and right=
    y = np.interp(x, knots, heights)
    bounded = np.interp(x * 2.0, knots, heights**2, left=0.0, right=1.0)
    return np.sum(np.sin(y) * x) + np.sum(bounded)


def covariance_penalty(features, targets):
    # decorrelating features (np.cov, np.corrcoef had no operator): observations
    # along rows (rowvar=False), the targets' variables after the features'
    covariance = np.cov(features, rowvar=False)
    off_diagonal = covariance - np.diag(np.diag(covariance))
    correlation = np.corrcoef(features, targets, rowvar=False)
    spread = np.cov(targets[:, 0], bias=True)
    return np.sum(off_diagonal**2) - np.sum(correlation[:3, 3:] ** 2) + spread


def field_on_a_grid(x, y):
    # a function sampled on coordinate grids (np.meshgrid had no operator), by
    # unpacking and by index, 'xy' and sparse 'ij' grids
    X, Y = np.meshgrid(x, y)
    rows, columns = np.meshgrid(x, y, indexing="ij", sparse=True)
    grids = np.meshgrid(x * 2.0, y)
    field = np.sin(X) * Y**2 + grids[0] * grids[1]
    return np.sum(field) + np.sum(np.exp(rows * columns))


def robust_summaries(x):
    # a median, quartiles, percentiles and the range (np.median, np.quantile,
    # np.percentile and np.ptp had no operator): the gradient goes to the order
    # statistics each one interpolates between
    center = np.median(x, axis=0)
    quartiles = np.quantile(x, [0.25, 0.75], axis=1, keepdims=True)
    tails = np.percentile(x, 90) - np.percentile(x, 10, method="lower")
    spread = np.sum((quartiles[1] - quartiles[0]) ** 2)
    return np.sum(center**3) + spread * tails + np.sum(np.ptp(x, axis=1) * x[:, 0])


def nan_skipping_statistics(x):
    # readings above 0.7 marked missing (NaN), then summarised without them
    # (np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanvar and np.nanstd)
    readings = np.where(x > 0.7, np.nan, x)
    rows = np.nanmean(readings, axis=1) * np.nanstd(readings, axis=1, ddof=1)
    columns = np.nanmax(readings, axis=0) - np.nanmin(readings, axis=0)
    total = np.nansum(readings**3) + np.nanvar(readings)
    return np.sum(rows**2) + np.sum(np.sin(columns)) + total


def missing_entries(x):
    # NaN entries of an argument itself take no gradient (read by the NaN-skipping
    # reductions directly: x * x would pass them 0 * NaN, as in JAX and PyTorch)
    means = np.sum(np.nanmean(x, axis=0) ** 2) + np.nanmax(x) ** 2
    middles = np.nanmedian(x) + np.sum(np.nanquantile(x, 0.3, axis=1) ** 2)
    return np.nansum(x) ** 2 + means + middles * np.nanpercentile(x, 80)


def scores_by_tensordot(q, k):
    # products over named axes (np.tensordot, np.inner had no operator)
    scores = np.tensordot(q, k, axes=([1], [1]))
    return (
        np.sum(np.tanh(scores))
        + np.inner(q[0], k[1]) ** 2
        + np.sum(np.inner(q, k) * scores)
        + np.sum(np.tensordot(q, q, 2) * k)
    )


def triangles_and_diagonals(a):
    # np.tril, np.triu, np.diag both ways, np.trace and a.trace()
    product = np.tril(a) @ np.triu(a, k=1)
    diagonal = np.diag(a)
    shifted = np.diag(diagonal * diagonal, 1)[:3, 1:]
    return np.trace(product) + np.sum(shifted * a) + a.trace(offset=1) ** 2


def triangles_of_a_vector(v):
    # np.tril and np.triu of a vector are square (each row is v): the analysis took
    # them to have v's shape and summed the product's gradient down to it
    lower = np.tril(v, 1) * np.arange(16.0).reshape(4, 4)
    return np.sum(lower) + np.sum(np.triu(v) @ np.triu(v, -1))


def triangles_of_a_vector_of_unknown_length(v, order):
    # the same after np.take_along_axis, whose result's rank (1) the analysis knows
    # but not its shape: tril's rank was taken to be 1 too, and triu's rule, its
    # test of x.ndim decided as it was inlined, summed its gradient as a vector's
    u = np.take_along_axis(v, order, 0)
    return np.sum(np.triu(np.tril(u, 1), -1) * np.arange(16.0).reshape(4, 4))


def diagonals_of_a_stack(x):
    # each matrix's diagonal (np.diagonal) and one over other axes (x.diagonal())
    main = np.diagonal(x, axis1=1, axis2=2)
    shifted = x.diagonal(1, 0, 2)
    return np.sum(main**2 * x[:, 0, :]) + np.sum(np.tanh(shifted))


def stacked_rows(x, y):
    # rows and columns joined the NumPy ways, and an axis moved to the end
    rows = np.vstack([x, y[None, :]])
    pair = np.vstack([y, y * 2.0])
    wide = np.hstack([x, pair])
    moved = np.moveaxis(np.stack([x, pair]), 0, -1)
    return (
        np.sum(rows @ rows)
        + np.sum(wide**2)
        + np.sum(moved[..., 0] * moved[..., 1])
        + np.sum(np.hstack([y, x[0]]) ** 3)
    )


def numbers_compared(x, s):
    # Python's max and min of numbers: of two, of three, of a Python float
    total = np.sum(x)
    return max(total, s) * min(s, 2.0, np.sum(x * x)) + max(float(x[0]), s * s)


def largest_row(x, w):
    # max of a generator's items and min of a list built in a loop
    energies = []
    for row in x:
        energies.append(np.sum(row * w))
    return max(np.sum(np.tanh(row) * w) for row in x) - min(energies)


def one_operand_einsums(a, b):
    return np.einsum("ii->", a) * np.sum(np.einsum("ij->j", b) ** 2) + np.sum(
        np.einsum("ii->i", a) * np.einsum("ji", b)[0]
    )


def columns_split_apart(x, y):
    joined = np.column_stack([y, x, y * y])
    left, middle, right = np.array_split(joined, 3, axis=1)
    return np.sum(left * right) + np.sum(np.sin(middle))


def partitioned_scores(x, w):
    scores = x * w
    return np.sum(np.partition(scores, 1, axis=1)[:, :2] ** 2)


def reduced_in_fortran_order(x, w):
    top = np.maximum.reduce(x * w)
    flat = np.add.reduce(x, axis=1).reshape((1, -1), order="F")
    return (
        np.sum(top**2)
        + np.sum(flat * x.ravel(order="F")[:3])
        + np.sum(x.flatten("F") * w.reshape(-1, order="F").repeat(3))
    )


def number_of_a_sum(x, s):
    value = float(np.sum(x * s))
    return value * value + np.sum(x).item() * s


LABELS = np.array([0, 2, 1, 2])


CASES = [
    Case(numbers_compared, F(4), S()),
    Case(largest_row, F(3, 4), T(4)),
    Case(one_operand_einsums, T(3, 3), F(3, 4)),
    Case(columns_split_apart, F(4, 2), F(4)),
    Case(partitioned_scores, F(3, 5), F(5)),
    Case(reduced_in_fortran_order, F(3, 4), F(4)),
    Case(number_of_a_sum, T(2, 3), S()),
    Case(index_by_zero_d_boolean, F(3), K(np.array(True))),
    Case(affine_bias, F(3, 4), T(4, 2), F(2)),
    Case(exp_sum_axis, F(3, 4)),
    Case(gram_transpose, T(4, 3)),
    Case(method_sum, F(2, 3)),
    Case(reshape_rows, F(3, 4)),
    Case(shape_metadata, T(3, 4)),
    Case(first_times_last, F(5)),
    Case(shifted_slices, F(6)),
    Case(column_differences, F(3, 4)),
    Case(reversed_slice, F(5)),
    Case(row_by_index, F(4, 3), K(2)),
    Case(integer_array_index, F(5), K(np.array([0, 2, 2, 4]))),
    Case(relu_by_maximum, F(2, 5)),
    Case(maximum_of_two, F(6), T(6)),
    Case(leaky_where, F(7)),
    Case(where_of_two, F(2, 3), F(2, 3)),
    Case(clipped, F(8)),
    Case(concatenated, F(2, 3), T(1, 3)),
    Case(stacked, F(4), F(4)),
    Case(transposed_axes, F(2, 3, 2)),
    Case(outer_by_expand_dims, F(3), F(4)),
    Case(vector_dot, F(5), T(5)),
    Case(mean_of_columns, F(4, 3)),
    Case(row_maxima, F(3, 4)),
    Case(power_scalar, F(2, 3, lo=0.5, hi=2.0), S(1.5, 3.0)),
    Case(normalized_first, F(5, lo=0.5, hi=2.0)),
    Case(negate_divide, F(4), F(4, lo=0.5, hi=2.0)),
    Case(pairwise_squared_distances, F(3), F(4)),
    Case(bilinear, F(3), F(3, 4), T(4)),
    Case(squeeze_and_max, F(1, 6)),
    Case(method_transpose, F(3, 3)),
    Case(elementwise_chain, F(2, 4)),
    Case(layer_norm, F(3, 5)),
    Case(unused_argument, F(3), F(2)),
    Case(metadata_only_argument, F(3), F(4)),
    Case(overwritten, F(5)),
    Case(augmented, F(2, 3), F(3, 2)),
    Case(swapped_tuple, F(4), F(4)),
    Case(tuple_from_helper, F(6)),
    Case(single_element_unpacking, F(3)),
    Case(nested_unpacking, F(3)),
    Case(calls_helper_twice, F(2, 3), F(3, 2)),
    Case(helper_with_keywords, F(3, 4)),
    Case(helper_with_array_keyword, F(3, 4), F(4)),
    Case(uses_operator, F(6)),
    Case(nested_helpers, F(2, 3), F(3, 4), T(4)),
    Case(branch_on_sum, F(5, lo=0.1, hi=1.0), id="branch_on_sum-then"),
    Case(branch_on_sum, F(5, lo=-1.0, hi=-0.1), id="branch_on_sum-else"),
    Case(elif_chain, F(4, lo=0.6, hi=1.0), id="elif_chain-if"),
    Case(elif_chain, F(4, lo=0.1, hi=0.4), id="elif_chain-elif"),
    Case(elif_chain, F(4, lo=-1.0, hi=-0.1), id="elif_chain-else"),
    Case(nested_branches, F(3, lo=0.1), F(3, lo=0.1), id="nested_branches-pp"),
    Case(nested_branches, F(3, lo=0.1), F(3, hi=-0.1), id="nested_branches-pn"),
    Case(nested_branches, F(3, hi=-0.1), F(3), id="nested_branches-n"),
    Case(branches_assign_different_names, F(4, lo=0.6), id="different_names-then"),
    Case(branches_assign_different_names, F(4, hi=0.4), id="different_names-else"),
    Case(branch_one_sided, F(4, lo=-1.0, hi=0.5), id="branch_one_sided-taken"),
    Case(branch_one_sided, F(4, lo=0.1, hi=1.0), id="branch_one_sided-skipped"),
    Case(reassigned_within_branch, F(3, lo=0.1), id="reassigned_within-then"),
    Case(reassigned_within_branch, F(3, hi=-0.1), id="reassigned_within-else"),
    Case(conditional_expression, F(4, lo=0.6), id="conditional_expression-then"),
    Case(conditional_expression, F(4, hi=0.4), id="conditional_expression-else"),
    Case(boolean_conditions, F(3, lo=0.1), F(3, hi=0.3), id="boolean_conditions-t"),
    Case(boolean_conditions, F(3, hi=-0.1), F(3), id="boolean_conditions-f"),
    Case(early_return, F(4, lo=0.5, hi=2.0), id="early_return-early"),
    Case(early_return, F(4, lo=-1.0, hi=-0.1), id="early_return-late"),
    Case(multiple_returns, F(4, lo=0.5, hi=1.0), id="multiple_returns-1"),
    Case(multiple_returns, F(4, lo=-0.2, hi=0.2), id="multiple_returns-2"),
    Case(multiple_returns, F(4, lo=-1.0, hi=-0.5), id="multiple_returns-3"),
    Case(branch_on_integer, F(12), K(3), id="branch_on_integer-3"),
    Case(branch_on_integer, F(12), K(1), id="branch_on_integer-1"),
    Case(integer_shape, F(12), K(3)),
    Case(integer_indices, F(6), K(2)),
    Case(softmax_cross_entropy, F(4, 3), K(LABELS)),
    Case(causal_attention_swapaxes, F(2, 3, 2), F(2, 3, 2), F(2, 3, 2)),
    Case(logistic_loss_logaddexp, F(3), F(4, 3), K(np.array([1.0, -1.0, -1.0, 1.0]))),
    Case(nll_take_along_axis, F(4, 3), K(LABELS)),
    Case(discounted_returns, F(2, 4)),
    Case(survival_probabilities, F(2, 4, lo=0.1, hi=0.9)),
    Case(weighted_averages, F(3, 4), F(4, lo=0.5, hi=1.5)),
    Case(averages_weighted_by_none, F(3, 4)),
    Case(averages_with_their_weights_sums, F(3, 4), F(4, lo=0.5, hi=1.5)),
    Case(
        linear_systems, V([[2.0, 0.3, -0.5], [0.1, 1.8, 0.4], [-0.2, 0.6, 2.2]]), F(3)
    ),
    Case(gaussian_log_likelihood, F(3, 3), F(3)),
    Case(spectral_features, F(3, 3), F(3, 2)),
    Case(stacked_decompositions, F(2, 3, 3)),
    Case(pseudo_inverse_and_powers, F(3, 3), F(4, 3), F(3)),
    Case(matrix_and_vector_norms, F(3, 4), F(4)),
    Case(least_squares_fit, F(5, 3), F(5)),
    Case(gaussian_process_nll, F(5, 2), F(5), S(lo=-0.5, hi=0.5), S(lo=-1.5, hi=-0.5)),
    Case(torque_and_normal, F(4, 3), F(4, 3)),
    Case(polar_coordinates, F(3, lo=0.3, hi=1.0), F(3, lo=-1.0, hi=-0.3)),
    Case(other_bases_and_roots, F(2, 3, lo=1.2, hi=2.0)),
    Case(wrapped_phase, V([-0.55, 0.1, 0.7]), V([0.7, 0.7, 0.45])),
    Case(shifted_and_copied, F(2, 3)),
    Case(cleaned_inputs, F(3, 3), F(3)),
    Case(padded_differences, F(2, 4)),
    Case(sorted_largest, F(3, 4)),
    Case(kronecker_and_base_two, F(2, 2), F(2, 3)),
    Case(filtered_signal, F(7), F(3)),
    Case(interpolated_curve, F(2, 3), V([-0.8, -0.3, 0.1, 0.6, 0.9]), F(5)),
    Case(covariance_penalty, F(6, 3), F(6, 2)),
    Case(field_on_a_grid, F(3), F(2)),
    Case(robust_summaries, F(4, 5)),
    Case(nan_skipping_statistics, F(3, 5)),  # (x[:, 3] keeps one reading)
    Case(missing_entries, V([[0.3, np.nan, -0.8], [np.nan, 1.1, 0.4]])),
    Case(scores_by_tensordot, F(3, 2), F(4, 2)),
    Case(triangles_and_diagonals, F(3, 3)),
    Case(triangles_of_a_vector, F(4)),
    Case(triangles_of_a_vector_of_unknown_length, F(4), K(np.array([2, 0, 1, 3]))),
    Case(diagonals_of_a_stack, F(2, 3, 3)),
    Case(stacked_rows, F(2, 3), F(3)),
    Case(attention_by_einsum, F(2, 3, 2), F(2, 2), F(2, 2)),
    Case(mlp, F(4, 3), F(3, 5), F(5), T(5, 3), F(3), K(LABELS)),
    Case(ellipsis_and_none, F(3, 2)),
    Case(index_array_with_slice, F(4, 3), K(np.array([3, 0, 3]))),
    Case(tuple_axis_sum, F(2, 3, 2)),
    Case(reshape_variants, F(6)),
    Case(methods_on_results, F(2, 3)),
    Case(python_scalar_arithmetic, F(5, lo=0.5, hi=2.0)),
    Case(numpy_ufunc_spellings, F(4), F(4, lo=0.5, hi=1.5)),
    Case(matrix_vector_dot, F(3, 2), F(2)),
    Case(module_constants, F(3, 2)),
    Case(same_argument_twice, F(4)),
    Case(zero_dim_and_broadcast_shapes, F(3, 4), F(), F(1), T(3, 1)),
    Case(keepdims_division, F(2, 3, lo=0.5, hi=2.0)),
    Case(split_and_unpack, F(6)),
    Case(helper_returns_an_uneven_split, F(5, 3)),
    Case(helper_passes_on_an_uneven_split, F(6)),
    Case(helpers_return_uneven_parts_other_ways, F(6)),
    Case(slices_of_uneven_parts, F(6)),
    Case(split_parts_are_a_list, F(6)),
    Case(directional_splits, F(6)),
    Case(where_constant_branch, F(8)),
    Case(return_conditional_expression, F(3, lo=0.6), id="return_ifexp-then"),
    Case(return_conditional_expression, F(3, hi=0.4), id="return_ifexp-else"),
    Case(
        nested_conditional_expressions, F(3, lo=0.1), F(3, lo=0.1), id="nested_ifexp-pp"
    ),
    Case(
        nested_conditional_expressions,
        F(3, hi=-0.1),
        F(3, hi=-0.1),
        id="nested_ifexp-nn",
    ),
    Case(chained_comparison, F(4, lo=-0.3, hi=0.3), id="chained_comparison-in"),
    Case(chained_comparison, F(4, lo=0.6, hi=1.0), id="chained_comparison-out"),
    Case(shape_condition, F(4), id="shape_condition-long"),
    Case(shape_condition, F(2), id="shape_condition-short"),
    Case(reassigned_in_both_branches, F(3, lo=0.1), id="reassigned_both-then"),
    Case(reassigned_in_both_branches, F(3, hi=-0.1), id="reassigned_both-else"),
    Case(
        variable_only_in_one_branch, F(2, 3), F(3, 2, lo=0.1), id="one_branch_var-taken"
    ),
    Case(
        variable_only_in_one_branch,
        F(2, 3),
        F(3, 2, hi=-0.1),
        id="one_branch_var-skipped",
    ),
    Case(helper_in_branch, F(3, lo=0.1), id="helper_in_branch-then"),
    Case(helper_in_branch, F(3, hi=-0.1), id="helper_in_branch-else"),
    Case(helper_with_early_return, F(4, lo=0.4, hi=0.9)),
    Case(return_in_nested_branch, F(3, lo=0.1), F(3, lo=0.1), id="nested_return-pp"),
    Case(return_in_nested_branch, F(3, lo=0.1), F(3, hi=-0.1), id="nested_return-pn"),
    Case(return_in_nested_branch, F(3, hi=-0.1), F(3), id="nested_return-n"),
    Case(unpack_helper_and_reuse, F(3), T(3)),
    Case(passthrough, S()),
    Case(constant_on_one_path, F(4, lo=3.0, hi=4.0), id="constant_path-const"),
    Case(constant_on_one_path, F(4), id="constant_path-value"),
    Case(argument_only_in_condition, F(3, lo=0.1), F(3), id="condition_only-then"),
    Case(argument_only_in_condition, F(3, hi=-0.1), F(3), id="condition_only-else"),
    Case(sign_and_floor, F(6, lo=-3.0, hi=3.0)),
    Case(boolean_mask_multiply, F(6)),
    Case(cast_differentiable, F(4)),
    Case(length_and_size, F(5)),
    Case(numpy_constants, F(4)),
    Case(chained_integer_indexing, F(4, 3), K(2)),
    Case(boolean_mask_index, F(7)),
    Case(operators_on_written_lists, F(3, 2)),
    Case(operators_on_constant_lists, F(2, 3)),
    Case(printed_asserted_raised, F(4)),
    Case(masked_sliced_and_added_writes, V([0.5, -0.4, 0.9, -1.2])),
    Case(seeded_noise, F(4)),
    Case(decorated_helpers, F(4, lo=0.2)),
    Case(class_and_instance_attributes, F(4)),
    Case(closure_over_reassigned, F(4)),
    Case(global_declared_read_only, F(4)),
    Case(nonlocal_declared_read_only, F(4)),
    Case(halves_by_integer_division, F(6)),
    Case(rows_softmax, F(2, 3), vjp=True),
    Case(matmul_tanh, F(3, 2), T(2, 4), vjp=True),
    Case(two_outputs, F(3), F(3), vjp=True),
    Case(branch_matrix, F(2, 3, lo=0.1), F(3, 2), vjp=True, id="branch_matrix-then"),
    Case(branch_matrix, F(2, 3, hi=-0.1), F(3, 2), vjp=True, id="branch_matrix-else"),
    Case(pairs_from_helper, F(4), T(4), vjp=True),
]

# (test, case id) -> why it still fails; the test asserts it does (see
# tests/corpus/checks.py). Remove an entry once its bug is fixed.
KNOWN_FAILING: dict = {}
