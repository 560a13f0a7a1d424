"""The nvcc fixture of the CUDA tests itself (``compile_host``,
``tests/cuda_emulation.py``): sources compiled together keep their own names, types
and macros; a source nvcc refuses still fails, alone, with its own errors; a source
whose includes do not come first is not put in a batch."""

import ctypes

import pytest

# one extern "C" name, type name and macro in each, each meaning something else
SOURCE = """
typedef {type} T;
#define SCALE {scale}
extern "C" double host_quarter() {{ return T(SCALE) / 4; }}
extern "C" __global__ void device_quarter(T* out) {{ *out = T(SCALE) / 4; }}
"""
INTEGER = SOURCE.format(type="int", scale=5)  # 5 / 4 in integers: 1
FLOATING = SOURCE.format(type="double", scale=6)  # 1.5


def test_sources_compiled_together_keep_their_names_types_and_macros(compile_host):
    runs = compile_host.runs
    compile_host.compile_together([INTEGER, FLOATING])
    assert compile_host.runs == runs + 1  # one nvcc run for both
    quarters = []
    for source in (INTEGER, FLOATING):
        function = compile_host(source).host_quarter
        function.restype = ctypes.c_double
        quarters.append(function())
    assert quarters == [1.0, 1.5]
    assert compile_host.runs == runs + 1  # each found compiled
    assert not hasattr(compile_host(INTEGER), "host_half")  # (none in the source)


def test_a_source_refused_in_a_batch_fails_alone_with_its_own_errors(compile_host):
    valid = 'extern "C" int host_seven() { return 7; }\n'
    # a host function called on the device: a warning, made an error
    host_only = (
        "double twice(double v) { return 2 * v; }\n"
        'extern "C" __global__ void doubled(double* x) { *x = twice(*x); }\n'
    )
    runs = compile_host.runs
    compile_host.compile_together([valid, host_only])
    assert compile_host.runs == runs + 1
    with pytest.raises(AssertionError, match="twice"):
        compile_host(host_only)
    assert compile_host(valid).host_seven() == 7
    assert compile_host.runs == runs + 3  # each alone


def test_sources_including_after_other_lines_are_left_to_compile_alone(compile_host):
    # (put first in a batch, <cstdio> would be read before the source's macro)
    late = '#define VALUE {}\n#include <cstdio>\nextern "C" int host_value();\n'
    runs = compile_host.runs
    compile_host.compile_together([late.format(1), late.format(2)])
    assert compile_host.runs == runs
    assert late.format(1) not in compile_host.libraries
