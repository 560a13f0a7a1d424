"""Fusion on random programs (``tests/random_programs.py``): with fused kernels and
regions forced on for arrays of any size, chunks of a few elements and three
threads, each program's value and gradients equal those of the unfused code (same
shape and dtype); programs fused for CUDA, their CUDA C run as host code, too.
Running these first found a NumPy bool scalar made a float in numexpr kernels and
constants made booleans next to a mask alone; values used as conditions later found
numexpr's missing ``where`` of a float condition and a region computing in float32
the float64 of ``np.where(y, s, 0.0)``."""

import warnings

import numpy as np
import pytest

import ppto
from ppto.runtime.backends import backend_for
from ppto.runtime.device import CPU
from ppto.transform.lower import lower
from tests.random_programs import arguments, function
from tests.test_fusion import counted_kernel_calls

PROGRAMS = 300
ON_CUDA = 8  # each region costs an nvcc run


def unfused(f, args):
    """Value and gradients of the unfused code, or None where NumPy itself fails on
    the program (an axis a 0-d value lacks) or ppto refuses it (an operation with no
    gradient at some argument): neither is this test's subject."""
    try:
        f(*args)
    except Exception:  # NumPy's own error: the program is not valid
        return None
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        return ppto.value_and_grad(f, wrt=(0, 1, 2))(*args)
    except ppto.PptoError:
        return None
    finally:
        ppto.set_precision(previous)


def assert_same(value, gradients, expected, dtype, label):
    """Same value and gradients, shapes and dtypes. (Generated code's own results,
    before ``ppto.grad`` casts each gradient to its argument's dtype, may be of the
    dtype NumPy's promotion gives: there the dtype of the value is compared.)"""
    tolerance = 1e-10 if dtype == np.float64 else 2e-4
    expected_value, expected_gradients = expected
    assert np.shape(value) == () and value.dtype == expected_value.dtype, label
    np.testing.assert_allclose(
        float(value), float(expected_value), rtol=tolerance, err_msg=label
    )
    for gradient, wanted in zip(gradients, expected_gradients):
        gradient, wanted = np.asarray(gradient), wanted.numpy()
        assert gradient.shape == wanted.shape, label
        np.testing.assert_allclose(
            gradient, wanted, rtol=tolerance, atol=tolerance, err_msg=label
        )


@pytest.fixture
def fuse_everything_in_small_chunks(monkeypatch):
    """Regions and kernels for any size, 64-byte chunks, three threads; returns the
    list of the regions whose chunked pass ran (not their statements)."""
    import ppto.fusion.kernels as kernels
    import ppto.transform.fuse as fuse
    import ppto.transform.lower as lowering
    import ppto.transform.regions as regions

    for module in (kernels, fuse, lowering, regions):
        monkeypatch.setattr(module, "LARGE", 1)
    monkeypatch.setattr(kernels, "CHUNK_BYTES", 64)
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    passes = []
    call = kernels.RegionKernel.__call__

    def counted(self, *arguments):
        if self.run(*arguments) is not None:
            passes.append(self.name)
        return call(self, *arguments)

    monkeypatch.setattr(kernels.RegionKernel, "__call__", counted)
    return passes


def compared_programs(count: int, run) -> int:
    """How many of the first ``count`` programs ``run(f, args)`` (value and
    gradients) computes as the unfused code does (failing on any that differs)."""
    compared = 0
    for seed in range(count):
        f, args = function(seed), arguments(seed)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = unfused(f, args)
            if expected is None:
                continue
            value, gradients = run(f, args)
        assert_same(value, gradients, expected, args[0].dtype, f"program {seed}")
        compared += 1
    return compared


def test_fused_code_equals_unfused_code_on_random_programs(
    fuse_everything_in_small_chunks, monkeypatch
):
    def fused(f, args):
        passes = len(fuse_everything_in_small_chunks)
        result = ppto.value_and_grad(f, wrt=(0, 1, 2))(*args)
        ran.append(len(fuse_everything_in_small_chunks) > passes)
        return result

    ran: list = []
    kernel_calls = counted_kernel_calls(monkeypatch)
    assert compared_programs(PROGRAMS, fused) > PROGRAMS * 0.9
    assert sum(ran) > PROGRAMS * 0.4  # programs in which a chunked pass ran
    assert len(kernel_calls) > 800  # and kernels (1080 calls when written)


def test_programs_fused_for_cuda_equal_unfused_code(regions_on_the_host):
    def fused_for_cuda(f, args):
        transformed = ppto.value_and_grad(f, wrt=(0, 1, 2))
        program, _ = transformed.program(transformed.describe(list(args), args))
        _, namespace = lower(program, backend_for(CPU), "cuda")
        return namespace[program.entry](*args)

    assert compared_programs(ON_CUDA, fused_for_cuda) >= ON_CUDA * 0.75
    assert any("region" in name for name in regions_on_the_host)
