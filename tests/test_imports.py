"""castlike never imports torch, jax, dask or array-api-strict itself (einops-style lazy
backends), nor its generic Array-API backend before an array of another library arrives."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
import numpy as np
import castlike
import castlike.cli
castlike.cast(np.array([1.5, 2.5]), "FLOAT8E4M3FN")
castlike.cast_like(np.array([1.5]), np.zeros(1, np.int8))
castlike.onnx_type("FLOAT")
optional = ("torch", "jax", "jaxlib", "dask", "onnx", "onnxruntime", "array_api_strict",
            "castlike.backends.array_api")
loaded = sorted(m for m in optional if m in sys.modules)
print(",".join(loaded))
"""


def test_import_loads_no_optional_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"castlike imported {out}"


ML_DTYPES_CODE = """
import sys
import numpy as np
import castlike
x = np.array([0.5, 1.5, -2.0], np.float32)
for target in ("INT8", "UINT8", "INT32", "INT64", "FLOAT16", "DOUBLE", "BOOL", "STRING"):
    castlike.cast(x, target)
castlike.cast(x.astype(np.float64), "FLOAT")
castlike.cast(x.astype(np.float16), "FLOAT")
castlike.cast(np.array(["1.5", "x"]), "FLOAT", errors="coerce")
castlike.cast_like(x, np.zeros(1, np.int16))
castlike.onnx_type(np.zeros(1, np.uint16))
before = "ml_dtypes" in sys.modules
castlike.cast(x, "BFLOAT16")
print(before, "ml_dtypes" in sys.modules)
"""


def test_ml_dtypes_is_imported_only_for_its_types() -> None:
    """ml_dtypes 0.7 takes hundreds of milliseconds to import: a cast that involves none of its
    types leaves it out, and the first one that does imports it."""
    out = subprocess.run(
        [sys.executable, "-c", ML_DTYPES_CODE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False True"
