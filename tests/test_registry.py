"""The open registry of backends: one list, a register() call, entry points, clear errors.

Registering changes castlike's process-wide state, so the tests that register run in a fresh
interpreter each (the test process keeps the built-in list that conftest read)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import castlike
from castlike.backends import BackendInfo, backend_info, backends, register
from castlike.backends._registry import BUILTIN_BACKENDS
from castlike.errors import BackendTypeError, CastTypeError, CastValueError

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def run_python(code: str, *paths: Path) -> str:
    """Run ``code`` in a fresh interpreter with the repository, tests/ and ``paths`` on the
    path; its stdout (a failure shows its stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, TESTS, *paths))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_builtin_backends_are_the_registry() -> None:
    names = [info.name for info in backends()]
    assert names[: len(BUILTIN_BACKENDS)] == [info.name for info in BUILTIN_BACKENDS]
    assert names[:5] == ["numpy", "torch", "jax", "dask", "array-api-strict"]
    assert backend_info("dask").module == "dask.array"
    with pytest.raises(BackendTypeError, match="no backend named 'nope'; known: numpy, torch"):
        backend_info("nope")


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ("tiny", "takes a castlike.backends.BackendInfo, not str"),
        (BackendInfo("numpy", "numpy", lambda xp: False, "m"), "'numpy' is already registered"),
        (BackendInfo("", "m", lambda xp: False, "m"), "name must be a non-empty str"),
        (BackendInfo("x", "m", lambda xp: False, ""), "adapter must be a non-empty str"),
        (BackendInfo("x", "m", "is_nope_namespace", "m"), "has no namespace test"),
        (BackendInfo("x", "m", 3, "m"), "is_namespace must be a function"),  # type: ignore[arg-type]
        (BackendInfo("x", "m", lambda xp: False, "m", extra=1), "extra must be"),  # type: ignore[arg-type]
    ],
)
def test_bad_registrations_are_clear_errors(info: object, message: str) -> None:
    before = backends()
    with pytest.raises(CastValueError, match=message):
        register(info)  # type: ignore[arg-type]
    assert backends() == before  # nothing half-registered


def test_an_object_no_library_knows_is_a_type_error_naming_its_type() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match=r"test_registry\..*Opaque") as caught:
        castlike.cast(Opaque(), "FLOAT")
    assert isinstance(caught.value, CastTypeError)


def test_a_namespace_without_the_standard_is_refused_by_name() -> None:
    """An array whose namespace array-api-compat accepts but that is no Array-API library
    (here: the tiny test backend, not registered in this process)."""
    import tiny_backend

    x = tiny_backend.tiny.asarray(np.array([1.0], np.float32))
    with pytest.raises(
        BackendTypeError, match=r"'tiny' \(a tiny_backend\.TinyNamespace\).*register"
    ):
        castlike.cast(x, "FLOAT8E4M3FN")


REGISTERED = """
import numpy as np
import castlike
from castlike.backends import adapter_named, backends, register
from castlike.errors import CastValueError
import tiny_backend

register(tiny_backend.BACKEND)
register(tiny_backend.BROKEN_BACKEND)

# Dispatched: the result is the tiny library's array, with the NumPy backend's bits.
data = np.array([0.1, 448.0, 500.0, np.inf, -2.5], np.float32)
y = castlike.cast(tiny_backend.tiny.asarray(data), "FLOAT8E4M3FN")
assert type(y) is tiny_backend.TinyArray
assert y.data.tobytes() == castlike.cast(data, "FLOAT8E4M3FN").tobytes()
like = castlike.cast_like(tiny_backend.tiny.asarray(data), tiny_backend.tiny.asarray(np.int8([0])))
assert like.data.tolist() == [0, 127, 127, 127, -2]

# Listed, and parity-checked: the tiny backend passes, the broken one is caught.
from castlike.parity import available_backends, run_parity
from castlike.spec.types import TYPES_BY_NAME as T
assert [b for b in available_backends() if b.startswith("tiny")] == ["tiny", "tiny-broken"]
sources, targets = [T["FLOAT8E4M3FN"], T["FLOAT"]], [T["INT4"], T["FLOAT8E5M2"]]
report = run_parity(["tiny", "tiny-broken"], sources=sources, targets=targets, workers=1)
print(report.counts()["tiny"], report.counts()["tiny-broken"])

# The command line lists it and checks it.
from castlike.cli import main
status = main(["parity", "--backend", "tiny", "--source", "FLOAT8E4M3FN", "--target", "INT4",
               "--jobs", "1"])
print("cli", status)

# An adapter path that gives no adapter is a clear error, when first used.
register(tiny_backend.BackendInfo("bad", "tiny_backend", lambda xp: False,
                                  "tiny_backend:NOT_AN_ADAPTER"))
try:
    adapter_named("bad")
except CastValueError as exc:
    print("bad:", exc)
"""


def test_a_registered_backend_is_dispatched_listed_and_parity_checked(
    oracle_cache: Path,
) -> None:
    code = f"import os; os.environ['CASTLIKE_CACHE'] = {str(oracle_cache.parent)!r}\n"
    out = run_python(
        code + REGISTERED.replace("workers=1", f"workers=1, cache_dir={str(oracle_cache)!r}")
    )
    lines = out.splitlines()
    assert lines[0] == (
        "{'pass': 4, 'mismatch': 0, 'not representable': 0, 'error': 0} "
        "{'pass': 0, 'mismatch': 4, 'not representable': 0, 'error': 0}"
    )
    assert "tiny" in out and "cli 0" in lines
    assert lines[-1] == (
        "bad: the bad backend's adapter tiny_backend:NOT_AN_ADAPTER is not a castlike Adapter "
        "(nor a function returning one): it is int"
    )


ENTRY_POINT = """
import sys
import numpy as np
import castlike, castlike.backends as registry

castlike.cast(np.float32([1.5]), "FLOAT8E4M3FN")
# A built-in backend matched: the entry points were not read (import time does not grow).
assert not registry._ENTRY_POINTS_READ and "tiny_backend" not in sys.modules
import tiny_backend
y = castlike.cast(tiny_backend.tiny.asarray(np.float32([0.1, 500.0])), "FLOAT8E4M3FN")
assert type(y) is tiny_backend.TinyArray and registry._ENTRY_POINTS_READ
print(y.data.view(np.uint8).tolist(), [b.name for b in registry.backends()][-1])
"""


def test_an_entry_point_registers_a_backend_lazily(tmp_path: Path) -> None:
    dist = tmp_path / "tiny_backend-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[castlike.backends]\ntiny = tiny_backend:BACKEND\n")
    assert run_python(ENTRY_POINT, tmp_path).split() == ["[29,", "126]", "tiny"]


BROKEN_ENTRY_POINT = """
import numpy as np
import castlike
from castlike.errors import CastValueError
import tiny_backend

castlike.cast(np.float32([1.5]), "INT8")  # a built-in backend: the entry points are not read
try:
    castlike.cast(tiny_backend.tiny.asarray(np.float32([1.5])), "INT8")
except CastValueError as exc:
    print(exc)
"""


def test_an_entry_point_that_does_not_load_is_named(tmp_path: Path) -> None:
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[castlike.backends]\nbroken = no_such_module:X\n")
    assert run_python(BROKEN_ENTRY_POINT, tmp_path).strip() == (
        "the entry point broken = no_such_module:X (group castlike.backends) does not load: "
        "ModuleNotFoundError: No module named 'no_such_module'"
    )
