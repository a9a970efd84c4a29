"""setup.py's build cache (``CASTLIKE_BUILD_CACHE``, used by the nox sessions): a built module
is reused only when nothing its compile reads has changed."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("setuptools", reason="setup.py needs setuptools, not installed here")

#: Independent of the backend: the NumPy session runs it once.
pytestmark = pytest.mark.numpy_session

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup_py() -> Iterator[ModuleType]:
    """setup.py as a module (its ``setup()`` call runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("castlike_setup_py", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("castlike_setup_py", None)


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A copy of the native sources, to change."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "castlike" / "_native" / "src", copy)
    return copy


def _key(
    setup_py: ModuleType, sources: Path, flags: list[str] | None = None, compiler: str = "g++"
) -> str:
    ext = setup_py.kernels("avx2", flags if flags is not None else ["-march=x86-64-v3"])
    ext.sources = [str(sources / "module.cpp")]
    ext.depends = [str(sources / Path(name).name) for name in ext.depends]
    return setup_py.build_key(ext, [compiler, "-O2"], [compiler, "-shared"])


def test_same_inputs_same_key(setup_py: ModuleType, sources: Path) -> None:
    assert _key(setup_py, sources) == _key(setup_py, sources)


def test_a_changed_header_changes_the_key(setup_py: ModuleType, sources: Path) -> None:
    before = _key(setup_py, sources)
    header = sources / "narrow_float.hpp"
    header.write_bytes(header.read_bytes() + b"\n")
    assert _key(setup_py, sources) != before


def test_a_changed_source_flag_or_compiler_changes_the_key(
    setup_py: ModuleType, sources: Path
) -> None:
    before = _key(setup_py, sources)
    module = sources / "module.cpp"
    module.write_bytes(module.read_bytes().replace(b"#include", b"#include ", 1))
    changed_source = _key(setup_py, sources)
    module.write_bytes(module.read_bytes().replace(b"#include ", b"#include", 1))
    assert _key(setup_py, sources) == before
    assert changed_source != before
    assert _key(setup_py, sources, flags=["-march=x86-64-v4"]) != before
    assert _key(setup_py, sources, compiler="clang++") != before


def test_every_header_is_part_of_the_key(setup_py: ModuleType) -> None:
    """Every header of the sources is listed in setup.py's HEADERS (a header left out would
    neither rebuild an editable install nor change the cache's key)."""
    listed = {f"{name}.hpp" for name in setup_py.HEADERS}
    present = {path.name for path in (ROOT / "castlike" / "_native" / "src").glob("*.hpp")}
    assert present <= listed, sorted(present - listed)


def test_a_missing_compiler_is_named_not_raised(setup_py: ModuleType) -> None:
    assert setup_py.compiler_identity(["no-such-compiler-here"]).startswith("unavailable")
