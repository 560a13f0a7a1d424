"""Every error ppto raises, in one place.

Each message names the operator, construct, device or argument involved and says how to
fix it. All errors derive from ``PptoError`` so that ``except ppto.PptoError`` catches
them; ``TransformError`` is also a ``SyntaxError`` so tools show file, line and caret.
"""


class PptoError(Exception):
    """Base class of every ppto error."""


class DeviceError(PptoError):
    """An unknown, unavailable or incompatible device."""


class TransferError(DeviceError):
    """An implicit copy between devices refused by the transfer policy."""


class BackendError(PptoError):
    """A backend that cannot run an operator, or was registered incorrectly."""


class DTypeError(PptoError, TypeError):
    """A dtype ppto does not support, or one an operator cannot take."""


class ShapeError(PptoError, ValueError):
    """Shapes that do not match an operator's signature."""


class LinAlgError(PptoError, ValueError):
    """A matrix a linear-algebra operator cannot take: singular, or not positive
    definite (NumPy's ``np.linalg.LinAlgError``, with the operator named)."""


class GradError(PptoError):
    """A gradient that cannot be taken (integer input, non-scalar output, no rule)."""


class TransformError(PptoError, SyntaxError):
    """Source code the transformer cannot differentiate.

    Carries the user's file, line and column like a ``SyntaxError``; the message says
    what to write instead.
    """
