"""The entry points of the backend registry: read once, by one thread while the others wait,
and a plugin that does not load neither hides the others nor is forgotten.

Each test runs in a fresh interpreter (the registry is process-wide state, and the entry
points are read once per process), with a distribution's ``entry_points.txt`` faked in a
temporary folder on the path, as ``tests/test_registry.py`` does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent.parent
ROOT = TESTS.parent


def run_python(code: str, path: Path) -> list[str]:
    """Run ``code`` in a fresh interpreter with the repository, tests/ and ``path`` on the
    path; the lines of its stdout (a failure shows its stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, TESTS, path))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=120,  # bounds a deadlock; the work itself takes a second or two
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def fake_distribution(folder: Path, *points: str) -> None:
    """A distribution whose entry points of the group castlike.backends are ``points``, in
    that order (``name = module:attribute``)."""
    dist = folder / "plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[castlike.backends]\n" + "\n".join(points) + "\n")


#: A plugin module that takes a while to import, so that the other threads ask for the entry
#: points while the first one is still loading them (a window, not a measurement).
SLOW_PLUGIN = """
import time

time.sleep(0.5)
from tiny_backend import BACKEND
"""

RACE = """
import threading
import numpy as np
import castlike
import tiny_backend

castlike.cast(np.float32([1.5]), "INT8")  # a built-in backend: the entry points are not read
THREADS = 8
start = threading.Barrier(THREADS)
results = [""] * THREADS


def first_cast(i):
    x = tiny_backend.tiny.asarray(np.float32([0.1, 500.0]))
    start.wait()
    try:
        y = castlike.cast(x, "FLOAT8E4M3FN")
        results[i] = f"{type(y).__name__} {y.data.view(np.uint8).tolist()}"
    except Exception as exc:
        results[i] = f"{type(exc).__name__}: {exc}"


threads = [threading.Thread(target=first_cast, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(results))
"""


@pytest.mark.parametrize("broken_first", [False, True], ids=["plugin", "broken plugin first"])
def test_concurrent_first_casts_all_reach_the_plugin(tmp_path: Path, broken_first: bool) -> None:
    """Eight threads cast a plugin's array at once, before the entry points were read: every
    one gets the plugin's result, none falls through to the generic backend, also when a
    plugin that does not load comes first."""
    (tmp_path / "slow_plugin.py").write_text(SLOW_PLUGIN)
    points = ["tiny = slow_plugin:BACKEND"]
    if broken_first:
        points.insert(0, "broken = no_such_module:X")
    fake_distribution(tmp_path, *points)
    assert run_python(RACE, tmp_path) == ["TinyArray [29, 126]"] * 8


BROKEN_THEN_GOOD = """
import numpy as np
import castlike
from castlike.backends import backend_info, backends
import tiny_backend


def attempt(f):
    try:
        return f"ok {f()}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


tiny = tiny_backend.tiny.asarray(np.float32([0.1, 500.0]))
unclaimed = tiny_backend.tiny_broken.asarray(np.float32([1.5]))  # no backend claims it
for _ in range(2):  # the same answers the second time: nothing is forgotten
    print(attempt(lambda: castlike.cast(tiny, "FLOAT8E4M3FN").data.view(np.uint8).tolist()))
    print(attempt(lambda: castlike.cast(unclaimed, "INT8")))
    print(attempt(lambda: backend_info("nope")))
    print(attempt(lambda: backend_info("tiny").name))
    print(attempt(lambda: [b.name for b in backends()]))
"""

LOAD_ERROR = (
    "the entry point broken = no_such_module:X (group castlike.backends) does not load: "
    "ModuleNotFoundError: No module named 'no_such_module'"
)


@pytest.mark.parametrize("broken_first", [True, False], ids=["broken first", "broken last"])
def test_a_plugin_that_does_not_load_keeps_the_others_and_its_error(
    tmp_path: Path, broken_first: bool
) -> None:
    points = ["broken = no_such_module:X", "tiny = tiny_backend:BACKEND"]
    fake_distribution(tmp_path, *(points if broken_first else points[::-1]))
    lines = run_python(BROKEN_THEN_GOOD, tmp_path)
    known = "numpy, torch, jax, dask, array-api-strict, tiny"
    expected = [
        "ok [29, 126]",  # the good plugin registered, whatever the order
        f"CastValueError: {LOAD_ERROR}",  # the broken one may have been this array's
        f"BackendTypeError: castlike has no backend named 'nope'; known: {known}; {LOAD_ERROR}",
        "ok tiny",
        f"CastValueError: {LOAD_ERROR}",
    ]
    assert lines == expected * 2


def test_an_entry_point_that_gives_no_backend_info_is_named(tmp_path: Path) -> None:
    fake_distribution(tmp_path, "odd = tiny_backend:NOT_AN_ADAPTER", "tiny = tiny_backend:BACKEND")
    lines = run_python(BROKEN_THEN_GOOD, tmp_path)
    message = (
        "the entry point odd = tiny_backend:NOT_AN_ADAPTER (group castlike.backends) gives a "
        "int, not a castlike.backends.BackendInfo"
    )
    assert lines[0] == "ok [29, 126]"
    assert lines[1] == lines[6] == f"CastValueError: {message}"


#: A plugin whose import casts an array while castlike reads the entry points (in the same
#: thread, holding the registry's lock): it must see the backends registered so far, not wait
#: for itself or read the entry points again.
REENTRANT_PLUGIN = """
import numpy as np
import castlike
import tiny_backend

try:
    castlike.cast(tiny_backend.tiny.asarray(np.float32([1.0])), "INT8")
except castlike.CastError as exc:  # not registered yet: the generic backend refuses it
    SEEN = type(exc).__name__
BACKEND = tiny_backend.BACKEND
"""

REENTRANT = """
import numpy as np
import castlike
import tiny_backend

y = castlike.cast(tiny_backend.tiny.asarray(np.float32([0.1, 500.0])), "FLOAT8E4M3FN")
import reentrant_plugin

print(y.data.view(np.uint8).tolist(), reentrant_plugin.SEEN)
"""


def test_a_plugin_that_casts_while_it_loads_neither_hangs_nor_recurses(tmp_path: Path) -> None:
    (tmp_path / "reentrant_plugin.py").write_text(REENTRANT_PLUGIN)
    fake_distribution(tmp_path, "tiny = reentrant_plugin:BACKEND")
    assert run_python(REENTRANT, tmp_path) == ["[29, 126] BackendTypeError"]
