"""The transfer ledger: every copy of tensor data between devices, with its cause.

Implicit copies (an operator migrating its inputs) obey the transfer policy: ``allow``
records them, ``log`` also logs a warning, ``error`` refuses them. Explicit copies
(``.to()``, ``np.asarray``) are always allowed and recorded with ``implicit=False``.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from ppto.errors import PptoError, TransferError
from ppto.runtime.device import Device

_POLICIES = ("allow", "log", "error")
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_log = logging.getLogger("ppto.transfers")


@dataclass(frozen=True)
class Transfer:
    """One copy: which operator caused it, how many bytes, from where to where."""

    op: str
    nbytes: int
    source: Device
    target: Device
    where: str
    implicit: bool = True

    def __str__(self) -> str:
        kind = "implicit" if self.implicit else "explicit"
        return (
            f"{self.op}: {self.nbytes} bytes {self.source} -> {self.target} "
            f"({kind}) at {self.where}"
        )


class _Ledger:
    def __init__(self) -> None:
        self.entries: list[Transfer] = []
        self.policy = "allow"


_ledger = _Ledger()


def transfers() -> list[Transfer]:
    """All copies between devices so far, oldest first.

    >>> ppto.transfers()[-1].op      # doctest: +SKIP
    'dot'
    """
    return list(_ledger.entries)


def clear_transfers() -> None:
    """Forget the recorded copies."""
    _ledger.entries.clear()


def set_transfer_policy(policy: str) -> str:
    """Set what implicit copies do: 'allow', 'log' or 'error'. Returns the old one."""
    if policy not in _POLICIES:
        raise PptoError(f"transfer policy must be one of {_POLICIES}, got {policy!r}")
    previous, _ledger.policy = _ledger.policy, policy
    return previous


def get_transfer_policy() -> str:
    return _ledger.policy


def user_location() -> str:
    """``file:line`` of the innermost caller outside the ppto package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<ppto>"


def record(
    op: str, nbytes: int, source: Device, target: Device, implicit: bool
) -> None:
    """Enter a copy in the ledger, applying the policy to implicit ones."""
    where = user_location()
    if implicit and _ledger.policy == "error":
        raise TransferError(
            f"{op} at {where} would copy {nbytes} bytes from {source} to {target}, "
            f"and the transfer policy is 'error': move the tensor yourself with "
            f".to('{target}') or call ppto.set_transfer_policy('allow')"
        )
    entry = Transfer(op, nbytes, source, target, where, implicit)
    _ledger.entries.append(entry)
    if implicit and _ledger.policy == "log":
        _log.warning("implicit transfer: %s", entry)
