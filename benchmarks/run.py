"""Run every benchmark script in this folder, one after another (``nox -s bench``).

Each ``bench_*.py`` is a standalone script printing its own table; this runner only calls
them in a fresh interpreter each, so that one library's threads and caches do not slow the
next one.  Arguments: names to run (``numpy``, ``threads``, ``strings``, ``torch``, ``jax``
...; default all).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    names = argv or [p.stem.removeprefix("bench_") for p in sorted(HERE.glob("bench_*.py"))]
    status = 0
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.exists():
            print(f"no benchmark named {name!r}", file=sys.stderr)
            return 2
        print(f"\n=== {script.name} ===", flush=True)
        status |= subprocess.run([sys.executable, str(script)], check=False).returncode
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
