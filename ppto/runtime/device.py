"""Devices: where a tensor's memory lives.

A ``Device`` is a backend kind plus an index (``cpu``, ``cuda:1``, ``sim:0``). It is
immutable, hashable and compares equal to its string form; ``"cuda"`` means
``"cuda:0"``.
"""

from __future__ import annotations

import operator

from ppto.errors import DeviceError


class Device:
    """A place tensors live: ``Device("cuda:1").kind == "cuda"``, ``.index == 1``.

    >>> Device("cuda") == "cuda:0"
    True
    """

    __slots__ = ("kind", "index", "_hash")

    def __init__(self, spec: str | Device, index: int | None = None) -> None:
        if isinstance(spec, Device):
            kind, parsed_index = spec.kind, spec.index
        elif isinstance(spec, str):
            kind, parsed_index = _parse(spec)
        else:
            raise DeviceError(
                f"a device is a string such as 'cpu' or 'cuda:0', got {spec!r} "
                f"of type {type(spec).__name__}"
            )
        if index is not None:
            parsed_index = _checked_index(kind, index)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "index", parsed_index)
        # as its string's: it compares equal to it, so a dict keyed by devices
        # finds "cuda:0" (and sets of both agree); kept, as every operator call
        # looks its device up
        object.__setattr__(self, "_hash", hash(str(self)))

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable")

    def __str__(self) -> str:
        if self.kind == "cpu":
            return "cpu"
        return f"{self.kind}:{self.index}"

    def __repr__(self) -> str:
        return f"Device('{self}')"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except DeviceError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        return self.kind == other.kind and self.index == other.index

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # rebuilt from its string: the default rebuilding sets the attributes one
        # by one, which an immutable Device refuses (copy.deepcopy and pickle of
        # a tensor raised "Device is immutable")
        return Device, (str(self),)


def _checked_index(kind: str, index) -> int:
    """``Device(kind, index)``'s index: a whole number from 0, and 0 for the CPU."""
    try:
        if isinstance(index, bool):
            raise TypeError(index)
        index = operator.index(index)  # (an int, or NumPy's)
    except TypeError as error:
        raise DeviceError(
            f"a device index is a whole number such as 0, got {index!r} of type "
            f"{type(index).__name__}"
        ) from error
    if index < 0:
        raise DeviceError(f"device {kind}:{index}: an index counts from 0")
    if kind == "cpu" and index != 0:
        raise DeviceError(f"Device('cpu', {index}): there is one CPU device, 0")
    return index


def _parse(spec: str) -> tuple[str, int]:
    kind, sep, index_text = spec.strip().partition(":")
    if not kind or not kind.replace("_", "").isalnum():
        raise DeviceError(f"{spec!r} is not a device: write 'cpu', 'cuda', 'cuda:N'")
    if not sep:
        return kind, 0
    if not index_text.isdigit():
        raise DeviceError(
            f"{spec!r} is not a device: the part after ':' must be a GPU number, "
            f"as in '{kind}:0'"
        )
    index = int(index_text)
    if kind == "cpu" and index != 0:
        raise DeviceError(f"{spec!r}: there is one CPU device; write 'cpu'")
    return kind, index


CPU = Device("cpu")
