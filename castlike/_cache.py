"""Where castlike caches what it computes once (oracle answers, downloaded onnx wheels)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir"]


def default_cache_dir() -> Path:
    """Where oracle answers are cached: ``$CASTLIKE_CACHE`` or ``~/.cache/castlike``."""
    root = os.environ.get("CASTLIKE_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "castlike"
