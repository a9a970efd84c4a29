"""Shared fixtures: the backends under test and the on-disk oracle cache.

``CASTLIKE_TEST_BACKENDS=numpy,torch`` (set by nox) selects backends, by the names of
castlike's registry (:func:`castlike.backends.backends`); a requested backend that does not
import is an error, not a skip.  Without it, every backend whose library imports runs.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from castlike.backends import adapter_named, backends
from castlike.spec.rules import Mode
from castlike.spec.types import TypeSpec
from castlike.testing import OracleJob, precompute

#: Every backend of castlike's registry (built-in, registered, entry points), by name, with
#: the library module that must import for it.
_LIBRARY = {info.name: info.module for info in backends()}
ALL_BACKENDS = tuple(_LIBRARY)


def selected_backends() -> list[str]:
    requested = os.environ.get("CASTLIKE_TEST_BACKENDS")
    if requested:
        names = [n.strip() for n in requested.split(",") if n.strip()]
        unknown = set(names) - set(ALL_BACKENDS)
        if unknown:
            raise pytest.UsageError(f"unknown backends in CASTLIKE_TEST_BACKENDS: {unknown}")
        for name in names:
            importlib.import_module(_LIBRARY[name])  # an ImportError here fails the run
        return names
    found = []
    for name in ALL_BACKENDS:
        try:
            importlib.import_module(_LIBRARY[name])
            adapter_named(name)
        except Exception:
            continue
        found.append(name)
    return found


BACKENDS = selected_backends()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``numpy_session`` check what no backend changes (the spec, its tables, the
    NumPy kernels): a run that selects backends without NumPy (nox's other backend sessions)
    skips them, since the NumPy session runs them once."""
    if "numpy" in BACKENDS or not os.environ.get("CASTLIKE_TEST_BACKENDS"):
        return
    skip = pytest.mark.skip(
        reason="independent of the backend: runs where CASTLIKE_TEST_BACKENDS includes numpy "
        "(nox's NumPy session)"
    )
    for item in items:
        if item.get_closest_marker("numpy_session") is not None:
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    return f"castlike backends under test: {', '.join(BACKENDS)}"


@pytest.fixture(scope="session")
def oracle_cache(pytestconfig: pytest.Config) -> Path:
    """Directory of cached oracle answers, shared by every nox session of this checkout."""
    env = os.environ.get("CASTLIKE_CACHE")
    path = Path(env) if env else Path(pytestconfig.rootpath) / ".castlike-cache" / "oracle"
    path.mkdir(parents=True, exist_ok=True)
    return path


#: ``precomputed(sources, targets, modes, inputs, start_method=None)``: see the fixture.
Precompute = Callable[..., Path]


@pytest.fixture(scope="session")
def precomputed(oracle_cache: Path) -> Precompute:
    """A function that computes a module's oracle answers once, on all cores, before its
    tests: every (source, target, mode) on the ``inputs`` set ("all" or "curated").  Returns
    the cache directory.  ``start_method="spawn"`` where the library's threads must not fork
    (JAX)."""

    def compute(
        sources: Iterable[TypeSpec],
        targets: Iterable[TypeSpec],
        modes: Iterable[Mode],
        inputs: str,
        start_method: str | None = None,
    ) -> Path:
        targets, modes = list(targets), list(modes)
        jobs = [OracleJob(s, t, m, inputs) for s in sources for t in targets for m in modes]
        if start_method is None:
            precompute(jobs, oracle_cache)
        else:
            precompute(jobs, oracle_cache, start_method=start_method)
        return oracle_cache

    return compute
