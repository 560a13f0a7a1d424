"""Which dtypes ppto accepts, and the checks that say so clearly.

Tensors hold booleans, integers or real floating point numbers. Everything else
(objects, strings, complex numbers, dates) is refused with a ``DTypeError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppto.errors import DTypeError

_SUPPORTED_KINDS = "biuf"


def check_dtype(dtype: Any, what: str) -> np.dtype:
    """Return ``dtype`` as a NumPy dtype, or raise ``DTypeError`` naming ``what``."""
    try:
        resolved = np.dtype(dtype)
    except TypeError as error:
        raise DTypeError(f"{what}: {dtype!r} is not a dtype") from error
    if resolved.kind not in _SUPPORTED_KINDS:
        hint = {
            "O": "convert the data to numbers first, e.g. np.asarray(data, float)",
            "U": "strings cannot be tensors; parse them to numbers first",
            "S": "bytes cannot be tensors; parse them to numbers first",
            "c": "split complex data into real and imaginary float tensors",
        }.get(resolved.kind, "use a boolean, integer or float dtype")
        raise DTypeError(
            f"{what} has dtype {resolved}, which ppto does not support: {hint}"
        )
    return resolved


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def is_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iub"
