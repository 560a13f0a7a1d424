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
from ppto.ops import numpy_map as _numpy_map
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
globals().update(_numpy_map.numpy_ordered_spellings())

__version__ = "0.1.0"
