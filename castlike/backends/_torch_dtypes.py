"""torch's dtypes of the ONNX types, and what to do for the types it cannot hold (R10).

Looked up by name: older torch versions lack some (``float8_e8m0fnu`` arrived in torch 2.7).
Shared by the adapter (:mod:`castlike.backends.torch`) and the ``torch.compile`` support
(:mod:`castlike.backends._torch_compile`).
"""

from __future__ import annotations

import torch

from ..spec.types import OnnxType

__all__ = [
    "BY_CODE",
    "BY_DTYPE",
    "DTYPE_NAMES",
    "GATHER",
    "NOT_IN_TORCH",
    "SIGNED",
    "TORCH_DTYPES",
    "UINT",
]

_T = OnnxType

#: torch dtype name of each ONNX type torch can hold.
DTYPE_NAMES: dict[OnnxType, str] = {
    _T.FLOAT: "float32",
    _T.UINT8: "uint8",
    _T.INT8: "int8",
    _T.UINT16: "uint16",
    _T.INT16: "int16",
    _T.INT32: "int32",
    _T.INT64: "int64",
    _T.BOOL: "bool",
    _T.FLOAT16: "float16",
    _T.DOUBLE: "float64",
    _T.UINT32: "uint32",
    _T.UINT64: "uint64",
    _T.BFLOAT16: "bfloat16",
    _T.FLOAT8E4M3FN: "float8_e4m3fn",
    _T.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    _T.FLOAT8E5M2: "float8_e5m2",
    _T.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    _T.UINT4: "uint4",
    _T.INT4: "int4",
    _T.FLOAT8E8M0: "float8_e8m0fnu",
    _T.UINT2: "uint2",
    _T.INT2: "int2",
}

#: The torch dtype of every ONNX type this torch can hold.
TORCH_DTYPES: dict[OnnxType, torch.dtype] = {
    t: getattr(torch, name) for t, name in DTYPE_NAMES.items() if hasattr(torch, name)
}
BY_DTYPE: dict[torch.dtype, OnnxType] = {dtype: t for t, dtype in TORCH_DTYPES.items()}
#: The same by plain int code (no enum conversion on the hot path of every cast).
BY_CODE: dict[int, torch.dtype] = {int(t): dtype for t, dtype in TORCH_DTYPES.items()}

#: torch's dtypes that hold a sub-byte type packed along the last axis, in ONNX's bit order
#: (the first element in the low nibble), and the type they hold.
PACKED_DTYPES: dict[torch.dtype, OnnxType] = (
    {torch.float4_e2m1fn_x2: _T.FLOAT4E2M1} if hasattr(torch, "float4_e2m1fn_x2") else {}
)

#: The same the other way: the packed dtype of each type that has one.
PACKED_DTYPE_OF: dict[OnnxType, torch.dtype] = {t: dtype for dtype, t in PACKED_DTYPES.items()}

#: What to do instead, for the types no torch version holds (R10).
NOT_IN_TORCH: dict[OnnxType, str] = {
    _T.FLOAT4E2M1: (
        "PyTorch has no one-element-per-byte FLOAT4E2M1 dtype (torch.float4_e2m1fn_x2 packs "
        "two values per byte); cast with packed=True for a float4_e2m1fn_x2 tensor, or cast a "
        "NumPy array, e.g. castlike.cast(x.cpu().numpy(), 'FLOAT4E2M1') gives an "
        "ml_dtypes.float4_e2m1fn array"
    ),
    _T.FLOAT6E2M3: (
        "PyTorch has no FLOAT6E2M3 dtype; cast with packed=True for its packed bytes (uint8), "
        "or cast a NumPy array, e.g. "
        "castlike.cast(x.cpu().numpy(), 'FLOAT6E2M3') gives an ml_dtypes.float6_e2m3fn array"
    ),
    _T.FLOAT6E3M2: (
        "PyTorch has no FLOAT6E3M2 dtype; cast with packed=True for its packed bytes (uint8), "
        "or cast a NumPy array, e.g. "
        "castlike.cast(x.cpu().numpy(), 'FLOAT6E3M2') gives an ml_dtypes.float6_e3m2fn array"
    ),
    _T.STRING: (
        "PyTorch tensors hold no strings; casting to STRING returns a NumPy string array, and "
        "strings are read from NumPy arrays (rule R9)"
    ),
}

#: Unsigned storage dtype of each width (for views only: torch computes little on them).
UINT: dict[int, torch.dtype] = {
    8: torch.uint8,
    16: torch.uint16,
    32: torch.uint32,
    64: torch.uint64,
}
#: Same-width dtype that ``index_select`` accepts for tables (uint16+ are not implemented),
#: and that torch does arithmetic, shifts and comparisons on (uint8 is fully implemented).
GATHER: dict[int, torch.dtype] = {
    8: torch.uint8,
    16: torch.int16,
    32: torch.int32,
    64: torch.int64,
}
#: Signed dtype of each width.
SIGNED: dict[int, torch.dtype] = {
    8: torch.int8,
    16: torch.int16,
    32: torch.int32,
    64: torch.int64,
}
