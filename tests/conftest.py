"""Shared fixtures: the simulated second device, the devices to run the operator table
on (``cpu``, ``sim``, and ``cuda`` where CuPy and a GPU exist), and a clean ledger."""

import pytest

import ppto
from ppto.runtime.sim import SimBackend
from tests.cuda_emulation import (  # noqa: F401 (fixtures for the CUDA kernel tests)
    compile_host,
    emulated_cupy,
    kernels_from_trees,
    regions_on_the_host,
)
from tests.cupy_kernels_compiled import compiled_cupy  # noqa: F401 (a fixture)

if "sim" not in {d.kind for d in ppto.devices()}:
    ppto.register_backend("sim", SimBackend)


def cuda_available() -> bool:
    try:
        return any(d.kind == "cuda" for d in ppto.devices())
    except ppto.PptoError:
        return False


DEVICES = [
    "cpu",
    "sim",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU"),
        ],
    ),
]


@pytest.fixture(autouse=True)
def fused_where_fusion_applies(monkeypatch):
    """Fused code wherever fusion applies, as the tests of fused code expect: by
    default a gradient's first call runs unfused code and later calls keep whichever
    code times faster (ppto.fusion.tuning), so a test could end up checking unfused
    code against itself. tests/test_fusion_tuning.py tests the default policy."""
    monkeypatch.setenv("PPTO_FUSION", "on")


@pytest.fixture(autouse=True)
def clean_ledger():
    ppto.clear_transfers()
    previous = ppto.set_transfer_policy("allow")
    yield
    ppto.set_transfer_policy(previous)


@pytest.fixture
def builds(monkeypatch) -> list:
    """The functions transformed while a test runs (api.build's first argument)."""
    from ppto import api

    made = []
    build = api.build

    def counted_build(*args, **kwargs):
        made.append(args[0])
        return build(*args, **kwargs)

    monkeypatch.setattr(api, "build", counted_build)
    return made
