"""Operator fusion: rules (a pattern and a fused implementation), the built-in ones,
and the user-facing ``fusion_rule`` / ``fusion_rules``. The rewrite of generated code
lives in ``ppto.transform.fuse``."""

from ppto.fusion import (
    batch_norm_backward,  # noqa: F401  (batch norm's gradient)
    batch_norm_outputs,  # noqa: F401  (batch norm's values in gradient code)
    cnn_patterns,  # noqa: F401  (and those of CNNs)
    label_cross_entropy,  # noqa: F401  (cross-entropy over integer labels)
    patterns,  # noqa: F401  (registers the built-in rules)
)
from ppto.fusion.registry import FusionError, FusionRule, fusion_rule, fusion_rules

__all__ = ["FusionError", "FusionRule", "fusion_rule", "fusion_rules"]
