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
