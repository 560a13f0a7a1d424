"""Corpus functions with loops: ``for`` over ranges, tensor rows, lists,
``enumerate`` and ``zip``; ``while`` with data-dependent conditions; ``break`` and
``continue``; nested loops; branches and helper calls in loops; Python lists built
with ``append``; subscript writes. ``CASES`` declares each one's inputs; cases whose
path depends on the data come in pairs (one input per path), far from the
thresholds so finite differences stay on the path."""

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

# --- for over ranges ---


def shape_reaching_late(x):
    b = x * 1.0
    c = x * 1.0
    total = 0.0
    for _ in range(3):  # c's shape changes; it reaches t on the third pass only
        t = b * b
        total = total + np.sum(np.mean(t, axis=0))
        b = c
        c = c[1:]
    return total


def rnn(x, wx, wh, b):
    h = np.zeros(wh.shape[0])
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ wx + h @ wh + b)
    return np.sum(h * h)


def range_of_integer_argument(x, n):
    for _ in range(n):
        x = np.sin(x) * 1.5
    return np.sum(x)


def range_with_expression_bounds(x, n):
    total = 0.0
    for i in range(1, n - 1):
        total = total + np.sum(x[i] * x[i - 1] - x[i + 1])
    return total


def range_with_step(x):
    total = np.sum(x[0])
    for i in range(1, x.shape[0], 2):
        total = total * np.sum(x[i] * x[i - 1])
    return total


def range_counting_down(x):
    y = x[-1]
    for i in range(x.shape[0] - 2, -1, -1):
        y = y * x[i] + np.cos(y)
    return y


def empty_range(x, n):
    y = x * 2.0
    for i in range(n):
        y = y * x[i]
    return np.sum(y)


def index_as_number(x, s):
    total = s * 0.0
    for i in range(3):
        total = total + i * s * np.sum(x**i)
    return total


def power_iteration(a, v):
    for _ in range(3):
        v = a @ v
        v = v / np.sqrt(np.sum(v * v))
    return v @ a @ v


def fibonacci_pairs(x, y):
    for _ in range(4):
        x, y = y, x + y * 0.5
    return np.sum(x * y)


def augmented_accumulators(x, w):
    total = 0.0
    scale = 1.0
    for i in range(x.shape[0]):
        total += np.sum(x[i] @ w)
        scale *= 1.0 + x[i, 0] ** 2
    return total * scale


def ppto_style_loop(x, w):
    h = ppto.zeros(w.shape[1])
    for t in range(x.shape[0]):
        h = ppto.sigmoid(ppto.dot(x[t], w) + h)
    return ppto.reduce_sum(h * h)


# --- for over rows, lists, enumerate and zip ---


def rows_of_matrix(x, w):
    total = 0.0
    for row in x:
        total = total + np.sum(np.tanh(row * w))
    return total


def rows_of_tensor(x):
    out = ppto.ones(x.shape[1])
    for row in x:
        out = out * ppto.exp(row * 0.5)
    return ppto.reduce_sum(out)


def list_of_weights(x, w1, w2, w3):
    h = x
    for w in [w1, w2, w3]:
        h = np.tanh(h @ w)
    return np.sum(h)


def tuple_of_arguments(a, b):
    total = 0.0
    for v in (a, b, a * b):
        total = total + np.sum(np.sin(v) * v)
    return total


def enumerate_rows(x):
    total = 0.0
    for i, row in enumerate(x):
        total = total + (i + 1.0) * np.sum(row**2)
    return total


def enumerate_list(x, y):
    total = 0.0
    for i, v in enumerate([x, y, x - y]):
        total = total + np.sum(v * x[i])
    return total


def zip_rows(x, y):
    total = 0.0
    for a, b in zip(x, y):
        total = total + np.sum(a * np.exp(b))
    return total


def zip_list_and_rows(x, w1, w2):
    total = 0.0
    for w, row in zip([w1, w2], x):
        total = total + np.sum(np.tanh(row @ w))
    return total


# --- while ---


def while_until_threshold(x):
    h = x * 1.0
    while np.sum(h * h) < 4.0:
        h = h * 1.5 + 0.1 * x
    return np.sum(h)


def while_with_counter(x, n):
    i = 0
    y = x
    while i < n:
        y = np.sin(y) + x
        i = i + 1
    return np.sum(y)


def while_halving(x):
    total = np.sum(x * x)
    steps = 0
    while total > 1.0 and steps < 10:
        total = total * 0.5 + np.mean(x) * 0.01
        steps = steps + 1
    return total


def while_true_with_break(x):
    y = x
    while True:
        y = y * 1.2 + 0.2
        if np.max(y) > 3.0:
            break
    return np.sum(y * x)


# Loops that may run no turn, with a return inside: grad(grad(f)) lost the carried
# gradient's value from before the loop (coalesce_copies renamed the loop's stores
# of it on stale counts), an UnboundLocalError where the loop ran no turn.


def returned_from_a_while_that_may_run_no_turn(w, s):
    t = np.tanh(w) * s
    h = t * 1.0
    k = 0
    while k < 2 and np.sum(h) < 1.0:  # no turn where the sum starts above 1
        k += 1
        h = np.tanh(s * t)
        if np.max(h) > 0.1:
            return np.sum(h * h)
    return np.sum(h) * s


def returned_from_a_range_that_may_be_empty(w, s, n):
    t = np.tanh(w) * s
    h = t * 1.0
    for _ in range(n):
        h = np.tanh(s * t)
        if np.max(h) > 0.1:
            return np.sum(h * h)
    return np.sum(h) * s


def returned_from_an_inner_range_that_may_be_empty(w, s, n):
    t = np.tanh(w) * s
    h = t * 1.0
    for _ in range(2):
        for _ in range(n):
            h = np.tanh(s * t)
            if np.max(h) > 0.1:
                return np.sum(h * h)
    return np.sum(h) * s


# --- break and continue ---


def break_on_data(x, w):
    h = x
    for _ in range(6):
        h = np.tanh(h @ w) * 2.0
        if np.sum(h) > 1.5:
            break
    return np.sum(h * h)


def continue_on_data(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        total = total + x[i] ** 2 * x[0]
    return total


def continue_and_break(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] < -0.5:
            continue
        total = total + np.exp(x[i])
        if total > 3.0:
            break
    return total


def break_in_inner_loop(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if x[i, j] > 0.5:
                break
            total = total + x[i, j] * x[i, 0]
    return total


# --- nested loops ---


def nested_ranges(x, w):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(w.shape[0]):
            total = total + x[i, j] * w[j] * w[j]
    return total


def triangular_loops(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(i):
            total = total + x[i] * x[j]
    return total


def nested_list_and_range(x, w1, w2):
    h = x
    for w in [w1, w2]:
        for _ in range(2):
            h = np.tanh(h @ w) + h
    return np.sum(h)


# --- branches and calls in loops ---


def branch_in_loop(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            total = total + x[i] ** 2
        else:
            total = total - np.sin(x[i])
    return total


def branch_on_index(x, w):
    h = x
    for i in range(3):
        if i == 0:
            h = h @ w
        elif i == 1:
            h = np.tanh(h)
        else:
            h = h * h
    return np.sum(h)


def branch_on_carried_value(x):
    y = x
    for _ in range(4):
        if np.sum(y) > 2.0:
            y = y * 0.5
        else:
            y = y + np.exp(y)
    return np.sum(y)


def reassigned_in_loop_branch(x):
    total = 0.0
    for _ in range(2):
        if np.sum(x) < 0:
            y = x * 2.0
            y = y + x
        else:
            y = x
        total = total + y
    return np.sum(total * x)


def replaced_by_constant_in_loop(x):
    y = x * 1.0
    total = 0.0
    for _ in range(3):
        total = total + np.sum(y * y)
        y = np.ones(3) * 2.0  # no tangent from the second pass on
    return total


def nested_branch_in_loop(x):
    total = 0.0
    for _ in range(2):
        if np.sum(x) < 0:
            if np.max(x) > -0.5:
                y = x * x
            else:
                y = np.sin(x) + x
            z = y * 2.0
        else:
            z = x
        total = total + z
    return np.sum(total * x)


def assigned_on_some_paths(x):
    # Python runs this whichever branch is taken: c may stay unbound, never read
    if np.sum(x) > 0:
        c = x * 2.0
    total = x
    for _ in range(2):
        if np.sum(x) > 0:
            c = x * 3.0
            total = total + c * x
    return np.sum(total * x)


def _scaled(v, k, power=2):
    return v**power * k


def helper_constant_changes_in_loop(x):
    # the helper's backward takes k from the call site, which differs per iteration
    total = 0.0
    for i in range(3):
        k = i * 2.0 + 1.0
        total = total + np.sum(_scaled(x, k) * x)
    return total


def helper_constant_carried(x):
    # k is carried from one iteration to the next and never differentiated
    total = 0.0
    k = 1.0
    for _ in range(3):
        total = total + np.sum(_scaled(x, k) * x)
        k = k * 2.0
    return total


def helper_constant_in_while(x):
    k = 1.0
    total = 0.0
    while k < 5.0:
        total = total + np.sum(_scaled(x, k, power=3))
        k = k + 1.5
    return total


def helpers_in_loop_branches(x):
    # each branch calls the helper and saves its values: popped in that branch only
    total = 0.0
    for i in range(4):
        if i % 2 == 0:
            total = total + np.sum(_scaled(x, i * 2.0))
        else:
            total = total + np.sum(_scaled(x, 1.0 / (i + 1.0), power=3))
    return total


def inner_loop_restarts(x):
    # the inner loop carries acc, which each outer iteration starts afresh
    total = 0.0
    for _ in range(2):
        acc = x
        for j in range(3):
            acc = acc * 0.5 + x * j
        total = total + np.sum(acc * acc)
    return total


def assigned_in_loop_read_after(x):
    # only the last iteration's value reaches the result
    for i in range(3):
        last = x * (i + 1.0)
    return np.sum(last * x)


def copied_list(x):
    xs = [x, x * 2.0]
    ys = list(xs)
    ys.append(x * x)
    total = 0.0
    for y in ys:
        total = total + np.sum(y * y)
    return total


def _cell(x, h, w):
    return np.tanh(x @ w + h)


def helper_in_loop(x, w):
    h = np.zeros(w.shape[1])
    for t in range(x.shape[0]):
        h = _cell(x[t], h, w)
    return np.sum(h)


def _loop_sum(v, n):
    total = 0.0
    for i in range(n):
        total = total + np.sum(v[i] ** 2)
    return total


def helper_with_loop(x):
    return _loop_sum(x, 3) + _loop_sum(x * x, 2)


def _step(h, w):
    if np.sum(h) > 0:
        return np.tanh(h @ w)
    return h @ w


def helper_with_branch_in_loop(x, w):
    h = x
    for _ in range(3):
        h = _step(h, w)
    return np.sum(h * h)


def for_else_after_break(x, limit):
    total = 0.0
    for v in x:
        total = total + np.sin(v)
        if total > limit:
            break
    else:  # (only where the loop did not break)
        total = total * 3.0
    return total


def while_else_and_inner_else(x):
    total = np.sum(x**2)
    k = 0
    while k < 3:
        total = total * 1.5
        for j in range(3):
            total = total + x[j] * x[k]
            if j == k:
                break
        else:  # (never: the inner loop breaks at j == k)
            total = total * 10.0
        k += 1
    else:
        total = total + np.sum(x)
    return total


# --- lists built in loops ---


def stacked_hidden_states(x, wx, wh):
    h = np.zeros(wh.shape[0])
    hs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ wx + h @ wh)
        hs.append(h)
    return np.sum(np.stack(hs) * np.arange(x.shape[0])[:, None])


def last_of_list(x, w):
    hs = [x]
    for _ in range(3):
        hs.append(np.sin(hs[-1] @ w))
    return np.sum(hs[-1] * hs[1])


def _written_list(a):
    return [a, np.sin(a) * 2.0]


def list_written_out_by_a_helper(x):
    items = _written_list(x[0])
    stacked = np.stack(_written_list(x[1]))
    return np.sum(items[0] * items[1]) + np.sum(stacked**2)


def sum_over_built_list(x):
    parts = []
    for i in range(x.shape[0]):
        parts.append(x[i] * np.exp(x[i]))
    total = 0.0
    for p in parts:
        total = total + p
    return total


def list_in_while(x):
    values = []
    y = x
    while len(values) < 3:
        y = np.cos(y) * x
        values.append(np.sum(y))
    return values[0] * values[2] + values[1]


def pairs_of_array_and_number(x):
    pairs = [(x, 1.0), (x * 2.0, 2.0)]
    total = 0.0
    for i in range(2):
        a, s = pairs[i]  # (a pair's adjoint: one per item, not one array)
        total = total + np.sum(np.sin(a)) * s
    return total


def loop_unpacking_pairs(x):
    total = 0.0
    for a, (s, b) in [(x, (1.0, x**2)), (x * 2.0, (2.0, np.sin(x)))]:
        total = total + np.sum(a * b) * s
    return total


def loop_unpacking_rows(x):
    total = 0.0
    for a, b in x:  # (rows of two)
        total = total + a * np.exp(b)
    return total


def enumerate_zip(x):
    ws = [x, x * 2.0, x**2]
    total = 0.0
    for i, (a, b) in enumerate(zip(ws, ws[1:]), start=1):
        total = total + i * np.sum(a * np.sin(b))
    for i, pair in enumerate(zip(ws, ws[::-1])):
        total = total + i * np.sum(pair[0] * pair[1])
    return total


def comprehension_unpacking(x):
    ws = [x, x * 2.0, x**2]
    total = sum(i * np.sum(a * b) for i, (a, b) in enumerate(zip(ws, ws[1:])))
    return total + sum(np.sum(a) * s for a, s in ((x, 1.0), (x**3, 2.0)))


# --- comprehensions (written as the loops above) ---


def sum_of_generator(w1, w2):
    weights = [w1, w2 * 2.0]
    return sum(np.sum(w**2) for w in weights)


def sum_over_list_argument(x, weights):
    return sum(np.sum(np.tanh(x @ w)) for w in weights)


def list_comprehension_stacked(x):
    hs = [x, x * 2.0]
    return np.sum(np.stack([np.tanh(h) for h in hs]) ** 2)


def comprehension_over_range(x, w):
    return np.sum(np.stack([x[i] * w for i in range(3)]) ** 2)


def sum_over_zip(x, y):
    return sum(np.sum(a * np.sin(b)) for a, b in zip([x, x * y], [y, x]))


def comprehension_with_filter(x):
    return np.sum(np.stack([x[i] ** 3 for i in range(x.shape[0]) if i % 2 == 0]))


def comprehension_over_two_loops(x):
    return sum(x[i] * x[j] for i in range(2) for j in range(i, 3))


def nested_comprehensions(x):
    rows = [[x[i] * x[j] for j in range(2)] for i in range(3)]
    return sum(np.sum(np.stack(row) ** 2) for row in rows)


def comprehension_variable_shadows(x):
    v = x * 3.0  # (the comprehension's own v is another variable)
    ys = [v * 2.0 for v in [x, x * x]]
    return np.sum(v * np.stack(ys))


def comprehension_over_rows(x):
    return np.sum(np.stack([np.tanh(row) * (i + 1.0) for i, row in enumerate(x)]))


def sum_of_rows_and_start(x):
    return np.sum(sum(x, np.ones(x.shape[1])) ** 2)


def comprehension_in_a_branch(x, n):
    if n > 2:
        return sum(np.sum(np.sin(row)) for row in x)
    return np.sum(x) if n > 1 else sum([np.sum(row**2) for row in x])


def comprehension_in_a_loop(x):
    total = 0.0
    for k in range(2):
        total = total + sum(np.sum(x[k] * x[j] ** 2) for j in range(3))
    return total


def generators_made_lists_and_tuples(x):
    rows = list(np.sin(r) for r in x)
    pair = tuple(r * 2.0 for r in rows)
    return np.sum(np.stack(pair) * np.stack(list(r**2 for r in rows)))


def generator_filtered_on_data(x):
    return sum(v**2 for v in x if v > 0)


def list_extended_by_comprehensions(x):
    hs = [x]
    hs.extend(np.sin(h) * k for h, k in zip([x, x**2], (2.0, 3.0)))
    hs.extend([v * 2.0 for v in x])
    return np.sum(np.stack(hs[:3]) ** 2) + hs[3] * hs[-1]


def list_joined_with_comprehensions(x, w):
    # hs += [... for ...] on a list (it was refused: hs might have been an array):
    # the items appended; one reading hs itself sees only the items before it
    hs = [x]
    hs += [x * k for k in range(1, 3)]
    for step in range(2):
        hs += [np.tanh(h * w) + step for h in hs if True]
    return np.sum(np.stack(hs) ** 2) + len(hs) * np.sum(hs[-1] * w)


STAGES = ("enc", "dec")


def dict_comprehension_reads(x, w):
    # dict comprehensions over keys known when the code is made (they were
    # refused): read by key, by loops over keys, values and items, len and in
    scaled = {k: x * (k + 1) for k in range(3)}
    stages = {name: np.tanh(x * w * len(name)) for name in STAGES}
    letters = {c: w * (ord(c) - 96) for c in "ab"}
    total = np.sum(scaled[2] * w) + sum(np.sum(v**2) for v in scaled.values())
    for k, v in scaled.items():
        total = total + k * np.sum(v * w)
    for name in stages:
        total = total + np.sum(stages[name] * x)
    if "enc" in stages and len(stages) == 2:
        total = total + np.sum(stages["enc"] * letters["b"])
    kept = list(letters.values())
    return total + np.sum(np.stack(kept) ** 2)


def assignment_expressions(x):
    if (total := np.sum(x**2)) > 10.0:  # (not taken: inputs in [-1, 1))
        return total
    kept = [y for v in x if (y := np.sin(v) * v) > -10.0]
    total = total + np.sum(np.stack(kept)) * y  # (y: the last one kept)
    for i in range(2):
        total = total + (h := np.tanh(x[i])) * h
    return total + (np.sum(x) if x.shape[0] > 9 else np.sum((u := x * 2.0) * u))


def returned_comprehension(x):
    return [np.sin(row) * row for row in x]


# --- subscript writes ---


def write_then_read(x):
    y = x * 1.0
    y[0] = x[1] * x[2]
    y[2] = np.sin(y[0])
    return np.sum(y * x)


def buffer_filled_in_loop(x):
    buf = np.zeros(x.shape[0] - 1)
    for i in range(x.shape[0] - 1):
        buf[i] = x[i] * x[i + 1]
    return np.sum(np.tanh(buf))


def column_accumulation(x, w):
    out = np.zeros((x.shape[0], w.shape[1]))
    for j in range(w.shape[1]):
        out[:, j] += x @ w[:, j]
        out[:, j] += x[:, j] * 2.0
    return np.sum(out * out)


def recurrence_in_buffer(x):
    buf = np.zeros(x.shape[0])
    buf[0] = x[0]
    for i in range(1, x.shape[0]):
        buf[i] = buf[i - 1] * x[i] + x[i]
    return np.sum(buf**2)


def overwrite_argument_row(x, v):
    x = x * 1.0
    for i in range(x.shape[0]):
        x[i] = x[i] * v + x[i - 1]
    return np.sum(x)


# --- non-scalar results (checked through vjp) ---


def hidden_state_sequence(x, wx, wh):
    h = np.zeros(wh.shape[0])
    hs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ wx + h @ wh)
        hs.append(h)
    return np.stack(hs)


def running_products(x):
    out = x * 1.0
    for i in range(1, x.shape[0]):
        out[i] = out[i - 1] * x[i]
    return out


def iterate_until_large(x):
    while np.max(np.abs(x)) < 2.0:
        x = x * 1.5 + 0.25
    return x


CASES = [
    Case(shape_reaching_late, F(5, 3)),
    Case(rnn, F(4, 3), F(3, 2), T(2, 2), F(2)),
    Case(range_of_integer_argument, F(3), K(3)),
    Case(range_with_expression_bounds, F(5, 2), K(4)),
    Case(range_with_step, F(5, 2)),
    Case(range_counting_down, F(4)),
    Case(empty_range, F(3), K(0), id="empty_range-0"),
    Case(empty_range, F(3), K(2), id="empty_range-2"),
    Case(index_as_number, F(3), S()),
    Case(power_iteration, F(3, 3), F(3)),
    Case(fibonacci_pairs, F(3), F(3)),
    Case(augmented_accumulators, F(3, 2), F(2, 2)),
    Case(ppto_style_loop, T(3, 2), T(2, 3)),
    Case(rows_of_matrix, F(3, 4), F(4)),
    Case(rows_of_tensor, T(3, 2)),
    Case(list_of_weights, F(2, 3), F(3, 3), T(3, 3), F(3, 2)),
    Case(tuple_of_arguments, F(3), F(3)),
    Case(enumerate_rows, F(3, 2)),
    Case(enumerate_list, F(3), T(3)),
    Case(zip_rows, F(3, 2), F(3, 2)),
    Case(zip_list_and_rows, F(2, 3), F(3, 2), F(3, 2)),
    Case(while_until_threshold, F(3, lo=0.3, hi=0.6), id="while_threshold-loops"),
    Case(while_until_threshold, F(3, lo=1.3, hi=1.5), id="while_threshold-skipped"),
    Case(while_with_counter, F(3), K(3)),
    Case(while_halving, F(4, lo=1.0, hi=1.5)),
    Case(while_true_with_break, F(3, lo=0.5, hi=1.0)),
    Case(
        returned_from_a_while_that_may_run_no_turn,
        F(3, 2, lo=1.5, hi=2.0),
        S(0.8, 1.0),
        id="while_may_run_no_turn-none",
    ),
    Case(
        returned_from_a_while_that_may_run_no_turn,
        F(2, lo=0.3, hi=0.4),
        S(0.8, 0.9),
        id="while_may_run_no_turn-returns",
    ),
    Case(
        returned_from_a_while_that_may_run_no_turn,
        F(2, lo=0.05, hi=0.1),
        S(0.5, 0.6),
        id="while_may_run_no_turn-if_skipped",
    ),
    Case(
        returned_from_a_range_that_may_be_empty,
        F(3, 2, lo=1.5, hi=2.0),
        S(0.8, 1.0),
        K(0),
        id="range_may_be_empty-empty",
    ),
    Case(
        returned_from_a_range_that_may_be_empty,
        F(3, 2, lo=1.5, hi=2.0),
        S(0.8, 1.0),
        K(2),
        id="range_may_be_empty-returns",
    ),
    Case(
        returned_from_a_range_that_may_be_empty,
        F(3, 2, lo=0.05, hi=0.1),
        S(0.5, 0.6),
        K(2),
        id="range_may_be_empty-if_skipped",
    ),
    Case(
        returned_from_an_inner_range_that_may_be_empty,
        F(3, 2, lo=1.5, hi=2.0),
        S(0.8, 1.0),
        K(0),
        id="inner_range_may_be_empty-empty",
    ),
    Case(
        returned_from_an_inner_range_that_may_be_empty,
        F(3, 2, lo=1.0, hi=1.5),
        S(0.8, 1.0),
        K(2),
        id="inner_range_may_be_empty-returns",
    ),
    Case(
        returned_from_an_inner_range_that_may_be_empty,
        F(3, 2, lo=0.05, hi=0.1),
        S(0.1, 0.2),
        K(2),
        id="inner_range_may_be_empty-if_skipped",
    ),
    Case(break_on_data, F(3, lo=0.5), F(3, 3, lo=0.2), id="break_on_data-taken"),
    Case(break_on_data, F(3, hi=-0.5), F(3, 3, lo=0.2), id="break_on_data-never"),
    Case(continue_on_data, F(6)),
    Case(continue_and_break, F(6, lo=-1.0, hi=1.0)),
    Case(break_in_inner_loop, F(3, 4)),
    Case(nested_ranges, F(2, 3), F(3)),
    Case(triangular_loops, F(4)),
    Case(nested_list_and_range, F(2), F(2, 2), T(2, 2)),
    Case(branch_in_loop, F(6)),
    Case(branch_on_index, F(2, 3), F(3, 2)),
    Case(branch_on_carried_value, F(3, lo=0.1, hi=0.5)),
    Case(reassigned_in_loop_branch, F(3, hi=-0.1), id="loop_branch_reassigned-if"),
    Case(reassigned_in_loop_branch, F(3, lo=0.1), id="loop_branch_reassigned-else"),
    Case(replaced_by_constant_in_loop, F(3)),
    Case(
        nested_branch_in_loop, F(3, lo=-0.4, hi=-0.1), id="nested_loop_branch-inner-if"
    ),
    Case(
        nested_branch_in_loop,
        F(3, lo=-2.0, hi=-0.6),
        id="nested_loop_branch-inner-else",
    ),
    Case(nested_branch_in_loop, F(3, lo=0.1), id="nested_loop_branch-outer-else"),
    Case(assigned_on_some_paths, F(3, lo=0.1), id="assigned_on_some_paths-if"),
    Case(assigned_on_some_paths, F(3, hi=-0.1), id="assigned_on_some_paths-else"),
    Case(helper_constant_changes_in_loop, F(3)),
    Case(copied_list, F(2)),
    Case(inner_loop_restarts, F(3)),
    Case(assigned_in_loop_read_after, F(3)),
    Case(helpers_in_loop_branches, F(3)),
    Case(helper_constant_carried, F(2)),
    Case(helper_constant_in_while, F(3)),
    Case(helper_in_loop, F(3, 2), F(2, 3)),
    Case(helper_with_loop, F(3, 2)),
    Case(helper_with_branch_in_loop, F(3, lo=0.1), F(3, 3, lo=0.1), id="loop_step-+"),
    Case(helper_with_branch_in_loop, F(3, hi=-0.1), F(3, 3, lo=0.1), id="loop_step--"),
    Case(for_else_after_break, F(4, lo=0.5), K(1.0), id="for_else-breaks"),
    Case(for_else_after_break, F(4, hi=-0.5), K(1.0), id="for_else-runs"),
    Case(while_else_and_inner_else, F(3)),
    Case(stacked_hidden_states, F(3, 2), F(2, 3), F(3, 3)),
    Case(last_of_list, F(3), T(3, 3)),
    Case(list_written_out_by_a_helper, F(2, 3)),
    Case(sum_over_built_list, F(4)),
    Case(list_in_while, F(3)),
    Case(pairs_of_array_and_number, F(3)),
    Case(loop_unpacking_pairs, F(3)),
    Case(loop_unpacking_rows, F(3, 2)),
    Case(enumerate_zip, F(3)),
    Case(comprehension_unpacking, F(3)),
    Case(sum_of_generator, F(2, 3), F(3)),
    Case(sum_over_list_argument, F(2, 3), K([np.eye(3), np.arange(6.0).reshape(3, 2)])),
    Case(list_comprehension_stacked, F(2, 3)),
    Case(comprehension_over_range, F(4, 3), F(3)),
    Case(sum_over_zip, F(3), F(3)),
    Case(comprehension_with_filter, F(5, 2)),
    Case(comprehension_over_two_loops, F(3)),
    Case(nested_comprehensions, F(3, 2)),
    Case(comprehension_variable_shadows, F(3)),
    Case(comprehension_over_rows, F(3, 2)),
    Case(sum_of_rows_and_start, F(3, 2)),
    Case(comprehension_in_a_branch, F(2, 3), K(3), id="comprehension_in_a_branch-if"),
    Case(comprehension_in_a_branch, F(2, 3), K(1), id="comprehension_in_a_branch-else"),
    Case(comprehension_in_a_loop, F(3, 2)),
    Case(generators_made_lists_and_tuples, F(2, 3)),
    Case(generator_filtered_on_data, V([0.5, -0.4, 0.9, -1.2])),
    Case(list_extended_by_comprehensions, F(3)),
    Case(list_joined_with_comprehensions, F(3), F(3)),
    Case(dict_comprehension_reads, F(3), F(3)),
    Case(assignment_expressions, F(3)),
    Case(returned_comprehension, F(3, 2), vjp=True),
    Case(write_then_read, F(4)),
    Case(buffer_filled_in_loop, F(5)),
    Case(column_accumulation, F(3, 2), F(2, 2)),
    Case(recurrence_in_buffer, F(4)),
    Case(overwrite_argument_row, F(3, 2), F(2)),
    Case(hidden_state_sequence, F(3, 2), F(2, 3), T(3, 3), vjp=True),
    Case(running_products, F(4), vjp=True),
    Case(iterate_until_large, F(3, lo=0.2, hi=0.5), vjp=True),
]

# (test, case id) -> why it still fails; the test asserts it does (see
# tests/corpus/checks.py). Remove an entry once its bug is fixed.
KNOWN_FAILING: dict = {}
