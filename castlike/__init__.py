"""castlike: cast tensors exactly as the ONNX Cast / CastLike operators define, on any array
library (NumPy with ml_dtypes, PyTorch, JAX, Dask), with bit-identical results everywhere.

>>> import numpy as np, castlike
>>> float(castlike.cast(np.float32(500.0), "FLOAT8E4M3FN"))
448.0
"""

from ._frontend import can_cast, cast, cast_like, onnx_type, unpack
from ._native import get_num_threads, set_num_threads
from .errors import (
    BackendTypeError,
    CastError,
    CastTypeError,
    CastValueError,
    DisallowedCastError,
    InvalidInputError,
    InvalidStringError,
    OpsetError,
    UnknownTypeError,
    UnsupportedTypeError,
)
from .spec.types import OnnxType

__version__ = "0.1.0"

__all__ = [
    "BackendTypeError",
    "CastError",
    "CastTypeError",
    "CastValueError",
    "DisallowedCastError",
    "InvalidInputError",
    "InvalidStringError",
    "OnnxType",
    "OpsetError",
    "UnknownTypeError",
    "UnsupportedTypeError",
    "__version__",
    "can_cast",
    "cast",
    "cast_like",
    "get_num_threads",
    "onnx_type",
    "set_num_threads",
    "unpack",
]
