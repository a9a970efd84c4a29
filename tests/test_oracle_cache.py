"""The oracle cache's filling (castlike.testing.precompute): one process at a time, so that
pytest-xdist's workers do not compute the same tables each on every core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from castlike import testing
from castlike.spec.rules import Mode
from castlike.spec.types import spec_of

#: Independent of the backend: the NumPy session runs it once.
pytestmark = pytest.mark.numpy_session

#: Exits 3 when another process holds the lock file given as its argument, 0 when it is free.
PROBE = """
import fcntl, sys
with open(sys.argv[1], "a") as lock:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
"""


def _probe(cache: Path) -> int:
    lock = cache / ".precompute.lock"
    return subprocess.run([sys.executable, "-c", PROBE, str(lock)], check=False).returncode


def test_one_process_fills_the_cache_at_a_time(tmp_path: Path) -> None:
    pytest.importorskip("fcntl", reason="the cache's lock needs fcntl (POSIX)")
    with testing._cache_lock(tmp_path):
        held = _probe(tmp_path)
    assert (held, _probe(tmp_path)) == (3, 0)


def test_precompute_fills_the_cache_under_the_lock(tmp_path: Path) -> None:
    source, target = spec_of("UINT8"), spec_of("FLOAT8E4M3FN")
    job = testing.OracleJob(source, target, Mode(), "all", exact="fraction")
    testing.precompute([job, job], tmp_path, workers=1)
    stored = list(tmp_path.glob("UINT8-FLOAT8E4M3FN-*-all-fraction-*.npy"))
    assert len(stored) == 1
    inputs = testing.exhaustive_inputs(source)
    assert np.array_equal(np.load(stored[0]), testing.oracle_bits(source, target, Mode(), inputs))
