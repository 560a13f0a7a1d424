"""Corpus functions written with ``ppto.*`` operators, user operators and custom
gradient rules. ``CASES`` declares each one's inputs."""

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

# --- operators ---


def exp_reduce(x):
    return ppto.reduce_sum(ppto.reduce_sum(ppto.exp(x), axis=0) ** 2)


def dot_reduce(a, b):
    return ppto.reduce_sum(ppto.dot(a, b), axis=None)


def softmax_weighted(x, w):
    return ppto.reduce_sum(ppto.softmax(x, axis=1) * w)


def log_softmax_rows(x):
    return ppto.reduce_sum(ppto.log_softmax(x, axis=-1) * ppto.arange(3.0))


def builtin_logsumexp(x):
    return ppto.reduce_sum(ppto.logsumexp(x, axis=1) * ppto.tensor([1.0, -2.0]))


def relu_sigmoid(x):
    return ppto.reduce_sum(ppto.relu(x) * ppto.sigmoid(x))


def ppto_where(x, y):
    return ppto.reduce_sum(ppto.where(x > y, ppto.exp(x), y * y))


def concat_columns(a, b):
    c = ppto.concat([a, b], axis=1)
    return ppto.reduce_sum(ppto.tanh(c) * c)


def stack_rows(a, b):
    s = ppto.stack([a, b * 2.0, a * b], axis=0)
    return ppto.reduce_sum(ppto.reduce_max(s, axis=0))


def conv_small(x, w):
    y = ppto.conv2d(x, w, stride=1, padding=1)
    return ppto.reduce_sum(y * y)


def conv_strided(x, w):
    return ppto.reduce_mean(ppto.tanh(ppto.conv2d(x, w, stride=2)))


def conv_nhwc(x, w):
    return ppto.relu(ppto.conv2d(x, w, padding=1, layout="nhwc"))


def pools(x):
    a = ppto.max_pool2d(x, kernel_size=2)
    b = ppto.avg_pool2d(x, kernel_size=2)
    return ppto.reduce_sum(a * b)


def segment_sums(data, ids):
    s = ppto.segment_sum(data, ids, num_segments=3)
    return ppto.reduce_sum(s * s)


def segment_means_and_maxima(data, ids):
    m = ppto.segment_mean(data, ids, num_segments=3)
    x = ppto.segment_max(data, ids, num_segments=3)
    return ppto.reduce_sum(m * x)


def message_passing(h, w, src, dst):
    messages = ppto.gather(ppto.dot(h, w), src, axis=0)
    aggregated = ppto.segment_sum(messages, dst, num_segments=4)
    return ppto.reduce_sum(ppto.relu(aggregated + h) ** 2)


def take_and_scatter(x, y, idx):
    picked = ppto.take(x, idx, axis=0)
    out = ppto.scatter_add(y, idx, picked * 2.0, axis=0)
    return ppto.reduce_sum(out * out)


def unary_family(x):
    a = ppto.square(x) + ppto.sqrt(x) + ppto.log(x)
    b = ppto.softplus(x) * ppto.sin(x) - ppto.cos(x) / ppto.cosh(x)
    return ppto.reduce_sum(a * b + ppto.abs(x - 1.0))


def maximum_minimum_clip(a, b):
    m = ppto.maximum(a, b) - ppto.minimum(a, b * 0.5)
    return ppto.reduce_sum(ppto.clip(m, lo=-0.3, hi=0.8) * a)


def shape_operators(x):
    y = ppto.transpose(x, axes=(1, 0))
    z = ppto.reshape(y, shape=(2, 6))
    e = ppto.expand_dims(z, axis=0)
    b = ppto.broadcast_to(e, shape=(3, 2, 6))
    return ppto.reduce_sum(ppto.squeeze(b[1:2], axis=0) * z)


def reductions_keepdims(x):
    a = ppto.reduce_max(x, axis=1, keepdims=True)
    b = ppto.reduce_min(x, axis=0, keepdims=True)
    c = ppto.reduce_prod(x, axis=1)
    d = ppto.reduce_mean(x, axis=0)
    return ppto.reduce_sum(x * a * b) + ppto.reduce_sum(c) + ppto.reduce_sum(d * d)


def activations(x):
    y = ppto.gelu(x) + ppto.elu(x, alpha=0.5) + ppto.leaky_relu(x, negative_slope=0.2)
    return ppto.reduce_sum(y * ppto.tanh(x))


def numpy_aliases(a, b):
    c = ppto.concatenate([ppto.matmul(a, b), a], axis=1)
    return ppto.sum(c) + ppto.mean(c * c)


def tensor_methods(x):
    return (x.T @ x).sum() + x.sum(axis=0).max() + x.mean()


def builtin_abs(x, y):
    return ppto.reduce_sum(abs(x - y) * y)


def attention(q, k, v):
    scores = ppto.softmax(ppto.dot(q, k.T) / 2.0, axis=-1)
    return ppto.reduce_sum(ppto.dot(scores, v) ** 2)


def cosine_similarity(a, b):
    num = ppto.reduce_sum(a * b)
    den = ppto.sqrt(ppto.reduce_sum(a * a)) * ppto.sqrt(ppto.reduce_sum(b * b))
    return num / den


def huber(pred, target):
    r = pred - target
    small = ppto.abs(r) < 0.5
    return ppto.reduce_mean(ppto.where(small, 0.5 * r * r, 0.5 * (ppto.abs(r) - 0.25)))


def stopped_gradient(x):
    c = ppto.stop_gradient(ppto.reduce_mean(x))
    return ppto.reduce_sum((x - c) ** 2)


def ppto_layer_norm(x, gamma, beta):
    mu = ppto.reduce_mean(x, axis=-1, keepdims=True)
    var = ppto.reduce_mean(ppto.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) / ppto.sqrt(var + 1e-5) * gamma + beta
    return ppto.reduce_sum(y * ppto.sigmoid(y))


def scalar_and_array(x, s):
    return ppto.reduce_sum(ppto.exp(s * x) + s * s)


# --- user operators, helpers and custom rules ---


@ppto.operator
def logsumexp(x, axis, keepdims=False):
    m = ppto.reduce_max(x, axis=axis, keepdims=True)
    s = ppto.log(ppto.reduce_sum(ppto.exp(x - m), axis=axis, keepdims=True)) + m
    if keepdims:
        return s
    return ppto.squeeze(s, axis=axis)


@ppto.grad_rule
def _(x, axis, keepdims=False):
    def backward(dy):
        return dy * ppto.exp(x - logsumexp(x, axis, keepdims=True))

    return backward


# forward mode (jvp, the Hessian) uses an operator's tangent rule: a gradient rule
# of its own is not one (each operator below with one has both)
@logsumexp.jvp_rule
def _(x, axis, keepdims=False):
    def tangent(dx):
        weights = ppto.exp(x - logsumexp(x, axis, keepdims=True))
        return ppto.reduce_sum(dx * weights, axis=axis, keepdims=keepdims)

    return tangent


def custom_rule_keepdims(x):
    return ppto.reduce_sum(logsumexp(x, 1, keepdims=True) * ppto.tensor([[1.0], [3.0]]))


def custom_rule_axis0(x):
    return ppto.reduce_sum(ppto.sin(logsumexp(x, 0)))


@ppto.operator
def scaled_tanh(x, scale=1.0):
    return scale * ppto.tanh(x)


def operator_with_keyword(x):
    return ppto.reduce_sum(scaled_tanh(x, scale=2.0) ** 2)


def operator_with_array_keyword(x, s):
    return ppto.reduce_sum(scaled_tanh(x, scale=s))


@ppto.operator
def weighted_norm(x, *, axis):
    return ppto.sqrt(ppto.reduce_sum(x * x, axis=axis) + 1e-3)


def operator_keyword_only(x):
    return ppto.reduce_sum(weighted_norm(x, axis=1) * ppto.tensor([1.0, 2.0, 3.0]))


@ppto.operator
def mul_add(a, b):
    return a * b + a


@mul_add.grad_rule
def _(a, b):
    def backward(dy):
        return dy * (b + 1.0), dy * a

    return backward


@mul_add.jvp_rule
def _(a, b):
    def tangent(da, db):
        return da * (b + 1.0) + a * db

    return tangent


def two_input_rule(x, y):
    return ppto.reduce_sum(mul_add(x, y) ** 2)


@ppto.operator
def cube(x):
    return x * x * x


@ppto.grad_rule(cube)
def _(x):
    def backward(dy):
        return dy * 3.0 * x * x

    return backward


@cube.jvp_rule
def _(x):
    def tangent(dx):
        return dx * 3.0 * x * x

    return tangent


def explicit_rule_form(x):
    return ppto.reduce_sum(cube(x) + cube(x * 2.0))


def _dense(x, w, b):
    return ppto.dot(x, w) + b


def _split_halves(x):
    return x[:, :2], x[:, 2:]


def helper_tuple(x, w, b):
    left, right = _split_halves(_dense(x, w, b))
    return ppto.reduce_sum(left * ppto.sigmoid(right))


def _cross_entropy(logits, labels, classes=3):
    onehot = ppto.one_hot(labels, num_classes=classes)
    return -ppto.reduce_mean(ppto.reduce_sum(ppto.log_softmax(logits) * onehot, axis=1))


def ppto_mlp(x, w1, b1, w2, b2, labels):
    h = ppto.relu(ppto.dot(x, w1) + b1)
    logits = _dense(h, w2, b2)
    return _cross_entropy(logits, labels, classes=3)


# --- branches ---


def ppto_branch(x):
    if ppto.reduce_sum(x) > 0:
        y = ppto.exp(x)
    else:
        y = ppto.sigmoid(x)
    return ppto.reduce_sum(y)


def ppto_elif(x, w):
    m = ppto.reduce_max(x)
    if m > 0.8:
        out = ppto.reduce_sum(ppto.dot(x, w))
    elif m > 0.0:
        out = ppto.reduce_sum(ppto.relu(x))
    else:
        out = ppto.reduce_sum(w * w)
    return out


def ppto_conditional_expression(x, y):
    z = ppto.tanh(x) if ppto.reduce_mean(y) > 0 else ppto.sin(y)
    return ppto.reduce_sum(z * x * y)


def ppto_early_return(x, n):
    if n == 0:
        return ppto.reduce_sum(x)
    y = ppto.reshape(x, shape=(n, -1))
    if ppto.reduce_max(y) > 0.5 or n > 5:
        return ppto.reduce_sum(ppto.softmax(y, axis=1)[0])
    return ppto.reduce_sum(y[n - 1] ** 2)


def ppto_nested(x, y):
    s = ppto.reduce_sum(x * y)
    if s > 0:
        t = ppto.exp(s)
        if not ppto.reduce_max(x) > 0.5:
            t = t * 2.0
    else:
        t = s * s
    return t


# --- more operators ---


def split_unstack(x):
    a, b, c = ppto.split(x, indices=[1, 3], axis=0)
    r0, r1 = ppto.unstack(b, axis=0)
    return ppto.reduce_sum(a * c) + ppto.reduce_sum(r0 * ppto.exp(r1))


def functional_setitem(x, v):
    y = ppto.setitem(x, v * 2.0, index=(slice(0, 2), 1))
    return ppto.reduce_sum(y * y * x)


def index_add_rows(x, v, idx):
    y = ppto.index_add(x, v, index=idx)
    return ppto.reduce_sum(ppto.sin(y) * x)


def gather_columns(x, idx):
    return ppto.reduce_sum(ppto.gather(x, idx, axis=1) ** 2)


def tuple_axis_mean(x):
    return ppto.reduce_sum(ppto.reduce_mean(x, axis=(0, 2)) * ppto.tensor([1.0, 2.0]))


def builtin_logsumexp_keepdims(x):
    return ppto.reduce_sum(x - ppto.logsumexp(x, axis=0, keepdims=True))


def squeeze_default(x):
    return ppto.reduce_sum(ppto.squeeze(x) ** 3)


@ppto.operator
def softsign_op(x):
    return x / (1.0 + ppto.abs(x))


@ppto.operator
def double_softsign(x, y):
    return softsign_op(x) * softsign_op(y * 2.0)


def nested_operators(x, y):
    return ppto.reduce_sum(double_softsign(x, y) + softsign_op(x))


@ppto.operator
def safe_sqrt(x, eps=1e-6):
    return ppto.sqrt(x + eps)


@ppto.grad_rule
def _(x, eps=1e-6):
    def backward(dy):
        if eps > 0:
            return dy / (2.0 * safe_sqrt(x, eps)), None
        return dy / (2.0 * ppto.sqrt(x)), None

    return backward


@safe_sqrt.jvp_rule
def _(x, eps=1e-6):
    def tangent(dx):
        if eps > 0:
            return dx / (2.0 * safe_sqrt(x, eps))
        return dx / (2.0 * ppto.sqrt(x))

    return tangent


def branching_rule(x):
    return ppto.reduce_sum(safe_sqrt(x) * x + safe_sqrt(x * x, eps=0.0))


def rule_with_keyword_inputs(x, y):
    return ppto.reduce_sum(mul_add(b=y, a=x) * mul_add(x, b=x))


def branch_inside_operator_call(x, y):
    t = scaled_tanh(x if ppto.reduce_sum(y) > 0 else y, scale=3.0)
    return ppto.reduce_sum(t * y)


def _masked_mean(x, mask):
    return ppto.reduce_sum(x * mask) / ppto.reduce_sum(mask)


def mask_from_comparison(x, y):
    mask = ppto.cast(x > 0.0, dtype="float64")
    return _masked_mean(y * y, mask) + _masked_mean(x, 1.0 - mask)


def gru_like_cell(x, h, wz, wh):
    z = ppto.sigmoid(ppto.dot(ppto.concat([x, h], axis=-1), wz))
    c = ppto.tanh(ppto.dot(ppto.concat([x, h * z], axis=-1), wh))
    h = (1.0 - z) * h + z * c
    return ppto.reduce_sum(h * h)


def _weighted_sum(u, v):
    return ppto.reduce_sum(u * ppto.exp(v))


def helper_with_mixed_activity(x, c):
    return _weighted_sum(x, c) + _weighted_sum(c, x) + _weighted_sum(c, c)


def constants_and_metadata(x):
    ones = ppto.ones_like(x)
    z = ppto.zeros(x.shape) + 2.0
    n = x.shape[0] * x.shape[1]
    return ppto.reduce_sum((x + ones) * z * x) / n


# --- non-scalar results (checked through vjp) ---


def ppto_softmax_matrix(x):
    return ppto.softmax(x, axis=0)


def ppto_dense_relu(x, w, b):
    return ppto.relu(ppto.dot(x, w) + b)


def ppto_two_outputs(x, w):
    h = ppto.dot(x, w)
    return ppto.softmax(h, axis=-1), ppto.reduce_sum(h * h, axis=0)


def ppto_branch_vector(x):
    if ppto.reduce_max(x) > 0.5:
        y = ppto.exp(x)
    else:
        y = ppto.relu(x) * 2.0
    return y[1:]


IDS = np.array([0, 2, 0, 1, 2])
SRC = np.array([0, 1, 2, 3, 1])
DST = np.array([1, 2, 3, 0, 0])
LABELS = np.array([2, 0, 1])

CASES = [
    Case(exp_reduce, T(3, 4)),
    Case(dot_reduce, T(2, 3), F(3, 4)),
    Case(softmax_weighted, T(2, 4), F(2, 4)),
    Case(log_softmax_rows, T(3, 3)),
    Case(builtin_logsumexp, T(2, 5)),
    Case(relu_sigmoid, T(7)),
    Case(ppto_where, T(6), F(6)),
    Case(concat_columns, T(2, 2), T(2, 3)),
    Case(stack_rows, T(4), F(4)),
    Case(conv_small, T(1, 1, 3, 3), T(2, 1, 2, 2)),
    Case(conv_strided, T(1, 2, 3, 3), F(2, 2, 2, 2)),
    Case(pools, T(1, 1, 4, 4)),
    Case(segment_sums, T(5, 2), K(IDS)),
    Case(segment_means_and_maxima, T(5, 2), K(ppto.tensor(IDS))),
    Case(message_passing, T(4, 3), T(3, 3), K(SRC), K(DST)),
    Case(take_and_scatter, T(5), F(6), K(np.array([1, 3, 3]))),
    Case(unary_family, T(6, lo=0.2, hi=0.9)),
    Case(maximum_minimum_clip, T(8), T(8)),
    Case(shape_operators, T(4, 3)),
    Case(reductions_keepdims, T(3, 4, lo=0.5, hi=1.5)),
    Case(activations, T(8)),
    Case(numpy_aliases, T(2, 3), F(3, 2)),
    Case(tensor_methods, T(3, 4)),
    Case(builtin_abs, T(5), F(5)),
    Case(attention, T(2, 3), T(4, 3), F(4, 2)),
    Case(cosine_similarity, T(6), F(6)),
    Case(huber, T(8, lo=-2.0, hi=2.0), F(8)),
    Case(stopped_gradient, T(5)),
    Case(ppto_layer_norm, T(3, 4), F(4), T(4)),
    Case(scalar_and_array, T(4), S(0.5, 1.5)),
    Case(custom_rule_keepdims, T(2, 4)),
    Case(custom_rule_axis0, T(3, 2)),
    Case(operator_with_keyword, T(5)),
    Case(operator_with_array_keyword, T(2, 3), F(3)),
    Case(operator_keyword_only, T(3, 4)),
    Case(two_input_rule, T(4), F(4)),
    Case(explicit_rule_form, T(5)),
    Case(helper_tuple, T(3, 2), T(2, 4), F(4)),
    Case(ppto_mlp, T(3, 4), F(4, 5), T(5), T(5, 3), F(3), K(LABELS)),
    Case(ppto_branch, T(4, lo=0.1), id="ppto_branch-then"),
    Case(ppto_branch, T(4, hi=-0.1), id="ppto_branch-else"),
    Case(ppto_elif, T(2, 3, lo=0.85, hi=1.0), T(3, 2), id="ppto_elif-if"),
    Case(ppto_elif, T(2, 3, lo=0.1, hi=0.7), T(3, 2), id="ppto_elif-elif"),
    Case(ppto_elif, T(2, 3, hi=-0.1), T(3, 2), id="ppto_elif-else"),
    Case(ppto_conditional_expression, T(4), T(4, lo=0.1), id="ppto_ifexp-then"),
    Case(ppto_conditional_expression, T(4), T(4, hi=-0.1), id="ppto_ifexp-else"),
    Case(ppto_early_return, T(6), K(0), id="ppto_early_return-0"),
    Case(ppto_early_return, T(6, lo=0.6), K(2), id="ppto_early_return-softmax"),
    Case(ppto_early_return, T(6, hi=0.4), K(3), id="ppto_early_return-last"),
    Case(ppto_nested, T(3, lo=0.6), T(3, lo=0.1), id="ppto_nested-big"),
    Case(ppto_nested, T(3, lo=0.1, hi=0.4), T(3, lo=0.1), id="ppto_nested-small"),
    Case(ppto_nested, T(3, lo=0.1), T(3, hi=-0.1), id="ppto_nested-neg"),
    Case(split_unstack, T(4, 2)),
    Case(functional_setitem, T(3, 3), F(2)),
    Case(index_add_rows, T(4, 2), F(3, 2), K(np.array([0, 3, 0]))),
    Case(gather_columns, T(2, 4), K(np.array([3, 1, 1]))),
    Case(tuple_axis_mean, T(2, 2, 3)),
    Case(builtin_logsumexp_keepdims, T(3, 2)),
    Case(squeeze_default, T(1, 4, 1)),
    Case(nested_operators, T(5), F(5)),
    Case(branching_rule, T(5, lo=0.5, hi=2.0)),
    Case(rule_with_keyword_inputs, T(4), T(4)),
    Case(branch_inside_operator_call, T(3), T(3, lo=0.1), id="ifexp_in_call-then"),
    Case(branch_inside_operator_call, T(3), T(3, hi=-0.1), id="ifexp_in_call-else"),
    Case(mask_from_comparison, T(6), F(6)),
    Case(gru_like_cell, T(2, 2), T(2, 3), F(5, 3), T(5, 3)),
    Case(helper_with_mixed_activity, T(4), K(np.array([0.5, -1.0, 0.25, 2.0]))),
    Case(constants_and_metadata, T(2, 3)),
    Case(ppto_softmax_matrix, T(3, 2), vjp=True),
    Case(ppto_dense_relu, T(2, 3), F(3, 4), T(4), vjp=True),
    Case(ppto_two_outputs, T(2, 3), F(3, 3), vjp=True),
    Case(ppto_branch_vector, T(4, lo=0.6), vjp=True, id="ppto_branch_vector-then"),
    Case(ppto_branch_vector, T(4, hi=0.4), vjp=True, id="ppto_branch_vector-else"),
    Case(conv_nhwc, T(1, 3, 3, 2), T(2, 2, 2, 2), vjp=True),
    Case(
        message_passing,
        V([[0.3, -0.2, 0.5], [0.1, 0.4, -0.6], [0.7, 0.2, 0.1], [-0.3, 0.9, 0.2]]),
        T(3, 3),
        K(SRC),
        K(DST),
        wrt=(0,),
        id="message_passing-given",
    ),
]

# (test, case id) -> why it still fails; the test asserts it does (see
# tests/corpus/checks.py). Remove an entry once its bug is fixed.
KNOWN_FAILING: dict = {}
