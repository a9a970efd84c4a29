"""The lookup tables, re-exported from where they are built: :mod:`castlike.spec.tables`.

Kept so that existing importers (the engine's kernels, backends, tests) need no change.
"""

from __future__ import annotations

from .spec.tables import (
    CLASS_MANTISSA_BITS,
    DOUBLE_CLASS_BITS,
    FLOAT32_CLASS_BITS,
    double_class_table,
    float32_class_index,
    float32_class_table,
    pattern_table,
)

__all__ = [
    "CLASS_MANTISSA_BITS",
    "DOUBLE_CLASS_BITS",
    "FLOAT32_CLASS_BITS",
    "double_class_table",
    "float32_class_index",
    "float32_class_table",
    "pattern_table",
]
