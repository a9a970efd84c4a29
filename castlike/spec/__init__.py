"""The one specification of castlike: types, operator versions, rules and the exact oracle.

Standard library only, so that every backend (and the documentation) can read it without
importing an array library.
"""

from .opsets import LATEST_OPSET, OPS, Op, OpVersion, version_for
from .rules import Mode, Profile, RoundMode
from .types import TYPES, TYPES_BY_NAME, Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = [
    "LATEST_OPSET",
    "OPS",
    "TYPES",
    "TYPES_BY_NAME",
    "Kind",
    "Mode",
    "OnnxType",
    "Op",
    "OpVersion",
    "Profile",
    "RoundMode",
    "Special",
    "TypeSpec",
    "spec_of",
    "version_for",
]
