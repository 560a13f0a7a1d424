"""Random elementwise programs for testing fusion: each is a NumPy function of
``x`` (1-D or 2-D), ``y`` (broadcast along x's rows), ``w`` (0-d, or of x's shape, or
broadcast) and a Python number ``s``, built from unary and binary operations,
comparisons used as masks and conditions, values used as conditions, full and
axis-wise reductions (row maxima and sums kept as ``(n, 1)`` columns, as softmax
makes them), and a short loop; the result is a sum. The same seed gives the same
program and arguments."""

import linecache
import random

import numpy as np

UNARY = [
    "np.tanh({})",
    "np.sin({})",
    "np.cos({})",
    "np.exp(-np.abs({}))",
    "-{}",
    "np.abs({})",
    "np.square({})",
    "np.sqrt(np.abs({}) + 1.0)",
    "np.log1p(np.abs({}))",
    "np.maximum({}, 0.0)",
    "np.expm1({} * 0.1)",
    "np.exp({0} - np.max({0}, axis=-1, keepdims=True))",
    "np.where({}, s, 0.0)",  # between numbers: float64 whatever the arrays
]
BINARY = [
    "{} + {}",
    "{} - {}",
    "{} * {}",
    "{} / (np.abs({}) + 1.0)",
    "np.maximum({}, {})",
    "np.minimum({}, {})",
    "({} > {}) * 1.5",
    "{} * s + {}",
    "np.sum({} * {}, axis=0)",
    "np.mean({} - {}, axis=-1, keepdims=True)",
    "{} / np.sum(np.abs({}) + 1.0, axis=-1, keepdims=True)",
    "np.where({}, {}, 0.0)",  # a condition of numbers: true where nonzero
]
PARAMETERS = ["x", "y", "w", "s"]


def source(seed: int) -> str:
    """The source of program ``f<seed>``."""
    rng = random.Random(seed)
    lines = [f"def f{seed}(x, y, w, s):"]
    values = list(PARAMETERS)
    for number in range(rng.randint(2, 9)):
        pick = rng.choice
        if rng.random() < 0.4:
            expression = pick(UNARY).format(pick(values))
        elif rng.random() < 0.15:
            expression = "np.where({} > {}, {}, {})".format(*rng.choices(values, k=4))
        else:
            expression = pick(BINARY).format(pick(values), pick(values))
        if rng.random() < 0.15:
            expression = f"np.sum({expression}) * x"
        target = f"t{number}"
        if rng.random() < 0.1:
            lines += [
                f"    {target} = x * 1.0",
                "    for i in range(3):",
                f"        {target} = np.tanh({target} * {pick(values)} + {expression})",
            ]
        else:
            lines.append(f"    {target} = {expression}")
        values.append(target)
    made = values[len(PARAMETERS) :]
    results = rng.sample(made, min(len(made), rng.randint(1, 3)))
    total = " + ".join(f"np.sum({name})" for name in results)
    return "\n".join(lines + [f"    return {total} + np.sum(x * 0.0)"]) + "\n"


def function(seed: int):
    """Program ``f<seed>`` as a function whose source ppto can read."""
    text = source(seed)
    filename = f"<random program {seed}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope = {"np": np}
    exec(compile(text, filename, "exec"), scope)
    return scope[f"f{seed}"]


def arguments(seed: int) -> tuple:
    """``(x, y, w, s)`` for program ``seed``: float64 or float32, x 1-D or 2-D."""
    rng = np.random.default_rng(seed)
    dtype = rng.choice(["float64", "float32"])
    shape = [(37,), (4, 37)][rng.integers(2)]
    x = rng.standard_normal(shape).astype(dtype)
    y = rng.standard_normal(shape[-1:]).astype(dtype)
    w_shapes = [(), shape, shape[-1:], (shape[0], 1)]
    w = np.asarray(rng.standard_normal(w_shapes[rng.integers(4)]), dtype)
    return x, y, w, float(rng.standard_normal())
