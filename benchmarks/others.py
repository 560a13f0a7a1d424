"""The benchmark workloads in other frameworks, for the table's extra columns: JAX
(``jit`` of ``grad``), PyTorch (eager autograd) and HIPS autograd. A framework that is
not installed has no column (``pip install -e '.[compare]'`` installs them).

The workloads are the very functions ppto differentiates, run with ``np`` bound to
the framework's NumPy (``jax.numpy``, ``autograd.numpy``, or for PyTorch the few
functions they use, spelled with ``torch``), so every column computes the same thing.
"""

from __future__ import annotations

import importlib.util
import types
from collections.abc import Callable

import numpy as np


class Unsupported(Exception):
    """The framework cannot run this workload as written (the reason is the text)."""


def available() -> dict[str, Callable]:
    """``name -> prepare`` for each installed framework; ``prepare(workload, args)``
    returns a function that computes the gradients for ``args`` (as NumPy arrays, in
    ``wrt`` order; it ignores its own arguments) or raises ``Unsupported``."""
    found = {}
    for name, prepare in (("jax", _jax), ("torch", _torch), ("autograd", _autograd)):
        if importlib.util.find_spec(name) is not None:
            found[name] = prepare
    return found


def rebound(function: Callable, numpy_module) -> Callable:
    """``function`` with the global ``np`` bound to ``numpy_module``."""
    scope = dict(function.__globals__, np=numpy_module)
    return types.FunctionType(function.__code__, scope, function.__name__)


def _jax(workload, args):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    function = rebound(workload.function, jnp)
    gradient = jax.jit(jax.grad(function, argnums=workload.wrt))
    inputs = [jnp.asarray(a) for a in args]
    try:
        jax.block_until_ready(gradient(*inputs))
    except jax.errors.ConcretizationTypeError as error:
        raise Unsupported("jit cannot trace a data-dependent if") from error

    def run(*_):  # the arguments are bound already
        return [np.asarray(g) for g in jax.block_until_ready(gradient(*inputs))]

    return run


def _autograd(workload, args):
    import autograd
    import autograd.numpy as anp

    function = rebound(workload.function, anp)
    gradient = autograd.grad(function, argnum=list(workload.wrt))

    def run(*_):  # the arguments are bound already
        return [np.asarray(g) for g in gradient(*args)]

    return run


def _torch(workload, args):
    import torch

    function = rebound(workload.function, _torch_numpy(torch))
    inputs = [
        torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
        for a in args
    ]
    wrt = [inputs[i].requires_grad_(True) for i in workload.wrt]

    def run(*_):  # the arguments are bound already
        return [g.numpy() for g in torch.autograd.grad(function(*inputs), wrt)]

    return run


def _torch_numpy(torch):
    """The NumPy functions the workloads call, in PyTorch."""

    def reduction(function):
        def reduce(x, axis=None, keepdims=False):
            if axis is None:
                return function(x)
            return function(x, dim=axis, keepdim=keepdims)

        return reduce

    return types.SimpleNamespace(
        tanh=torch.tanh,
        exp=torch.exp,
        log=torch.log,
        sin=torch.sin,
        cos=torch.cos,
        arange=torch.arange,
        maximum=torch.clamp_min,
        sum=reduction(torch.sum),
        mean=reduction(torch.mean),
        max=reduction(torch.amax),
    )
