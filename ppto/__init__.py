"""ppto: a tensor framework of composable operators with source-to-source autodiff.

>>> import ppto
>>> x = ppto.tensor([[1.0, 2.0], [3.0, 4.0]])
>>> ppto.reduce_sum(ppto.dot(x, x), axis=1)
Tensor([17., 37.], device='cpu', dtype=float64)
"""

from ppto import debug
from ppto import ops as _ops
from ppto.api import grad, hessian, jvp, show_grad, show_source, value_and_grad, vjp
from ppto.checkpoint import checkpoint
from ppto.composite import CompositeOperator, operator
from ppto.errors import (
    BackendError,
    DeviceError,
    DTypeError,
    GradError,
    LinAlgError,
    PptoError,
    ShapeError,
    TransferError,
    TransformError,
)
from ppto.fusion import FusionError, FusionRule, fusion_rule, fusion_rules
from ppto.gradcheck import GradCheckReport, check_grad
from ppto.jacobians import jacfwd, jacobian, jacrev
from ppto.ops import averaged as _averaged  # noqa: F401 (average's returned=True)
from ppto.ops.primitive import OPERATORS as _OPERATORS
from ppto.ops.primitive import OperatorDef, Primitive
from ppto.ops.rules import Rule
from ppto.ops.show import show_op
from ppto.registration import (
    get_grad_rule,
    get_jvp_rule,
    grad_rule,
    jvp_rule,
    register_backend,
)
from ppto.runtime.backends import devices, unregister_backend
from ppto.runtime.constructors import (
    arange,
    eye,
    full,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ppto.runtime.device import Device
from ppto.runtime.ledger import (
    Transfer,
    clear_transfers,
    get_transfer_policy,
    set_transfer_policy,
    transfers,
)
from ppto.runtime.precision import (
    allclose,
    get_precision,
    get_tolerance,
    set_precision,
    set_tolerance,
)
from ppto.runtime.streams import stream, sync
from ppto.runtime.tensor import Tensor, tensor
from ppto.symbolic import Operator, Symbol, evaluate, symbol

_CONSTRUCTORS = {"zeros_like", "ones_like"}
globals().update(
    {name: op for name, op in _OPERATORS.items() if name not in _CONSTRUCTORS}
)
globals().update({alias: _OPERATORS[name] for alias, name in _ops.ALIASES.items()})

__version__ = "0.1.0"


def _settle_collector() -> None:
    """One full garbage collection, now that the import is done.

    Importing NumPy and ppto leaves some 39,000 objects, most of them never seen
    by a full collection, and the collector's counters near one: once any code
    has kept some 20,000 more objects it comes, and scans them all (14 million
    instructions, 13-17 ms of CPU on a busy 2-core machine) in the middle of
    whichever gradient's first call made them. In ``benchmarks/run.py`` that was
    the RNN's (31 ms instead of 19). Collected here, the next full collection
    waits until the long-lived objects have grown by a quarter (CPython's rule).
    The work moves rather than shrinks: a script that would have ended before
    reaching that collection now pays it in its import. A program that turned
    the collector off keeps it off."""
    import gc

    if gc.isenabled():
        gc.collect()


_settle_collector()
