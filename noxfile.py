"""nox sessions: ``nox`` with no arguments runs everything CI needs.

PyTorch is installed with ``-c constraints.txt`` (torch==2.13.0, the CPU wheel this kind of
machine has on disk); a plain ``torch`` requirement would pull a multi-GB CUDA build.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import nox

nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "sanitize",
    "exhaustive32",
    "parity",
    "docs",
    "fuzz",
    "oldest",
]

PYTHON = "3.11"
#: pip's arguments for every install: the repository's constraints, and no byte-compiling of
#: what it installs (Python compiles the modules a session imports as it imports them; pip
#: compiling all of torch and JAX took 20 of a session's 30 s of installing).
PIP_ARGS = ("--no-compile", "-c", "constraints.txt")


def _builtin_backends() -> tuple:
    """castlike's one list of backends (castlike/backends/_registry.py), loaded by its path:
    nox's own interpreter has no castlike (nor NumPy) to import it from."""
    path = Path(__file__).parent / "castlike" / "backends" / "_registry.py"
    spec = importlib.util.spec_from_file_location("_castlike_registry", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.BUILTIN_BACKENDS


BACKENDS = _builtin_backends()
#: Extras each backend's test session installs beside the test tools.
BACKEND_EXTRAS = {info.name: info.extra or "" for info in BACKENDS}


#: Every backend's extra (parity and conformance run on all of them).
ALL_EXTRAS = [extra for extra in BACKEND_EXTRAS.values() if extra]

#: pytest on every core (pytest-xdist): most tests are single-threaded Python, and CI has two
#: cores.  Test ids must not depend on the process (no memory addresses), as workers compare
#: what they collect.
PARALLEL = ("-n", "auto")

#: The native kernels build with compiler warnings as errors in every session (setup.py), and
#: each module is compiled once for all the sessions of this checkout: setup.py keeps it in the
#: build cache under a hash of its sources, flags, compiler and Python, and the next session's
#: install copies it (about a minute saved per session on two cores).
BUILD_ENV = {
    "CASTLIKE_STRICT_BUILD": "1",
    "CASTLIKE_BUILD_CACHE": str(Path(__file__).parent.resolve() / ".castlike-cache" / "build"),
}


def install(session: nox.Session, extras: str) -> None:
    """Install castlike (editable, which compiles its kernels) with ``extras`` under the
    repository's constraints."""
    target = f".[{extras}]" if extras else "."
    session.install(*PIP_ARGS, "-e", target, env=BUILD_ENV)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*PIP_ARGS, "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy on the package."""
    install(session, "test")
    session.install(*PIP_ARGS, "mypy")
    session.run("mypy")


@nox.session(python=PYTHON)
@nox.parametrize("backend", list(BACKEND_EXTRAS))
def tests(session: nox.Session, backend: str) -> None:
    """The test suite on one backend (``nox -s "tests(backend='torch')"``)."""
    extra = BACKEND_EXTRAS[backend]
    install(session, ",".join(filter(None, ["test", "onnx", extra])))
    env = {"CASTLIKE_TEST_BACKENDS": backend}
    if backend == "jax":
        # Every JAX case with x64 on (DOUBLE/INT64/UINT64 held).  The
        # x64-off refusal and 32-bit exactness are checked in a fresh interpreter by
        # tests/test_jax.py::test_x64_off_refuses_64_bit_types.
        env.update(X64)
    session.run("pytest", *PARALLEL, *session.posargs, env=env)
    if backend == "numpy" and not session.posargs:
        # The native kernels' portable build, forced, and the pure-NumPy engine, each against
        # the oracle on every pattern of the small sources and the curated wide inputs.
        checks = ["tests/test_exhaustive.py", "tests/test_curated.py", "tests/test_native.py"]
        baseline = {**env, "CASTLIKE_CPU": "baseline"}
        session.run("pytest", *PARALLEL, "-q", *checks, env=baseline)
        session.run("pytest", *PARALLEL, "-q", *checks[:2], env={**env, "CASTLIKE_NATIVE": "0"})


def lowest_pins(extras: tuple[str, ...]) -> list[str]:
    """``name==lowest`` for castlike's dependencies and those of ``extras``: the lower bound
    each requirement of pyproject.toml allows (its one source of truth)."""
    import re

    import tomllib

    project = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = []
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([0-9][^,; ]*)", requirement)
        if match is None:
            raise ValueError(f"pyproject.toml: {requirement!r} has no plain lower bound")
        pins.append(f"{match[1]}=={match[2]}")
    return pins


@nox.session(python=PYTHON)
def oldest(session: nox.Session) -> None:
    """The lowest releases pyproject.toml allows of castlike's dependencies (NumPy, ml_dtypes,
    array-api-compat, rich) and of the onnx extra (onnx, onnxruntime): the NumPy tests and the
    ONNX conformance command there.  Every other session installs the newest releases."""
    pins = lowest_pins(("onnx",))
    session.install(*PIP_ARGS, *pins, "-e", ".[test,onnx,cli]", env=BUILD_ENV)
    session.run("python", "-c", VERSIONS)
    env = {"CASTLIKE_TEST_BACKENDS": "numpy"}
    session.run("pytest", *PARALLEL, "-q", *session.posargs, env=env)
    if not session.posargs:
        versions = [arg for v in ("1.14.1", "1.16.2", "1.18.0") for arg in ("--onnx-version", v)]
        session.run(
            "castlike",
            "conformance",
            "--backend",
            "numpy",
            *versions,
            "--quiet",
            "--json",
            "reports/conformance-oldest.json",
        )


#: Prints the versions a session tests against (the reports say which produced the data).
VERSIONS = (
    "from importlib.metadata import version as v; "
    "print(', '.join(f'{p} {v(p)}' for p in "
    "('numpy', 'ml_dtypes', 'array-api-compat', 'rich', 'onnx', 'onnxruntime')))"
)


#: The native tests the sanitized build runs: the kernels against the pure engine at every CPU
#: level, the extension's boundary and its thread pool, and every pattern of the 8/16-bit
#: sources against the oracle (the answers cached by the tests sessions).
SANITIZED_TESTS = [
    "tests/test_native.py",
    "tests/robustness/test_native_boundary.py",
    "tests/robustness/test_native_threads.py",
    "tests/test_exhaustive.py",
]
#: Run after those with the torch backend: the kernels' C call on a tensor's memory.
SANITIZED_TORCH_TESTS = ["tests/test_torch_native.py"]


@nox.session(python=PYTHON)
def sanitize(session: nox.Session) -> None:
    """The native kernels built with AddressSanitizer and UndefinedBehaviorSanitizer, any
    finding fatal, under the native tests and the exhaustive checks of the 8/16-bit sources
    (3 to 4 minutes of tests on 2 cores with the oracle answers cached by the tests sessions),
    then under the torch tests of the native path (a tensor's memory read by the kernels'
    ``repeat_tensor``: about a minute more).

    castlike is built from a copy of the checkout and installed into this session only (not
    editable): a sanitized module cannot load into an interpreter without the sanitizer's
    runtime, and the other sessions import the modules built in the checkout.
    """
    source = Path(session.create_tmp()) / "source"
    shutil.rmtree(source, ignore_errors=True)
    skip = shutil.ignore_patterns(".git", ".nox", "build", "*.so", ".castlike-cache", "reports")
    shutil.copytree(Path(__file__).parent, source, ignore=skip)
    session.install(*PIP_ARGS, f"{source}[test,torch]", env={**BUILD_ENV, "CASTLIKE_SANITIZE": "1"})
    # The interpreter is not built with the sanitizers: their runtime must be loaded first.
    found = session.run("python", "-c", _FIND_BASELINE, silent=True)
    module = str(found).strip().splitlines()[-1]
    linked = str(session.run("ldd", module, silent=True, external=True))
    runtime = re.search(r"=>\s*(\S*libasan\.so[.\d]*)", linked)
    cxx = re.search(r"=>\s*(\S*libstdc\+\+\.so[.\d]*)", linked)
    if runtime is None or cxx is None:
        session.error(f"{module} is not linked to libasan and libstdc++:\n{linked}")
    env = {
        # The C++ runtime too: torch throws (and catches) C++ exceptions, and the sanitizer's
        # interceptor of __cxa_throw fails its check unless libstdc++ was loaded when it started.
        "LD_PRELOAD": f"{runtime.group(1)} {cxx.group(1)}",
        # CPython's own allocations at exit are not leaks of castlike's; every allocation goes
        # through malloc, where AddressSanitizer sees it (pymalloc's arenas it would not).
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "PYTHONMALLOC": "malloc",
        "CASTLIKE_TEST_BACKENDS": "numpy",
        # The native tests and their child interpreters check that they run this build.
        "CASTLIKE_TEST_SANITIZED": "1",
    }
    # -P: not the checkout's castlike (the current directory), this virtualenv's.
    session.run("python", "-P", "-c", _CHECK_SANITIZED, env=env)
    chosen = session.posargs or SANITIZED_TESTS  # nox -s sanitize -- tests/test_native.py -x
    # On every core, as the other sessions: pytest-xdist's workers inherit the preloaded runtime.
    session.run("pytest", *PARALLEL, "-q", "-p", "no:cacheprovider", *chosen, env=env)
    if not session.posargs:
        torch_env = {**env, "CASTLIKE_TEST_BACKENDS": "torch"}
        session.run(
            "pytest",
            *PARALLEL,
            "-q",
            "-p",
            "no:cacheprovider",
            *SANITIZED_TORCH_TESTS,
            env=torch_env,
        )


#: Prints the path of the installed baseline module (found, not imported: that needs the runtime).
_FIND_BASELINE = (
    "import glob, sysconfig; "
    "print(*glob.glob(sysconfig.get_paths()['platlib'] + '/castlike/_native/_baseline.*'))"
)
#: Fails unless the kernels in use are the sanitized build of this session's virtualenv.
_CHECK_SANITIZED = (
    "import castlike._native as n, sys; m = n.module(); "
    "assert m is not None and m.sanitized and m.__file__.startswith(sys.prefix), n.info(); "
    "print('sanitized kernels:', m.__file__)"
)


@nox.session(python=PYTHON)
def exhaustive32(session: nox.Session) -> None:
    """All 2**32 FLOAT inputs and 10**7 random 64-bit ones: native kernels against the pure
    engine (``nox -s exhaustive32 -- --stride 16`` for a quick sample)."""
    install(session, "")
    session.run("python", "tests/exhaustive32.py", *session.posargs)


#: Oracle answers shared by every session of this checkout (the tests' default cache too).
ORACLE_CACHE = ".castlike-cache/oracle"
#: JAX holds DOUBLE/INT64/UINT64 only with x64 on: the JAX sessions turn it on so that those
#: types are checked on JAX too (test_jax.py checks JAX's default, x64 off, in a subprocess).
X64 = {"JAX_ENABLE_X64": "1"}


@nox.session(python=PYTHON)
def parity(session: nox.Session) -> None:
    """Every installed backend against the oracle, exhaustively, and the parity tests.

    Writes reports/parity.png (the colour matrix) and reports/parity.json (every cell) for CI
    to keep (reports/ is git-ignored).
    """
    install(session, ",".join(["test", "onnx", "cli", *ALL_EXTRAS]))
    session.run(
        "castlike",
        "parity",
        "--exhaustive",
        "--cache-dir",
        ORACLE_CACHE,
        "--png",
        "reports/parity.png",
        "--json",
        "reports/parity.json",
        env=X64,
    )
    session.run("pytest", *PARALLEL, "-m", "parity", *session.posargs, env=X64)
    # The conformance run needs the same installation: in CI it runs here (one install and
    # build of the kernels fewer); ``nox -s conformance`` runs it alone.
    _conformance(session)


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """The ONNX node tests for Cast/CastLike on every backend: the current onnx's cases
    (reference profile) and the data of the 1.14.1, 1.16.2 and 1.18.0 wheels (legacy).
    Also run by the parity session (which CI runs)."""
    install(session, ",".join(["test", "onnx", "cli", *ALL_EXTRAS]))
    _conformance(session)


def _conformance(session: nox.Session) -> None:
    backends = [arg for info in BACKENDS for arg in ("--backend", info.name)]
    versions = [arg for v in ("1.14.1", "1.16.2", "1.18.0") for arg in ("--onnx-version", v)]
    session.run(
        "castlike",
        "conformance",
        *backends,
        *versions,
        "--json",
        "reports/conformance.json",
        env=X64,
    )


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Sphinx HTML build with warnings as errors, and the docs' doctests.

    The pages generated from castlike (type matrix, value tables, CLI reference, plots) are
    written to docs/_generated when the build starts.
    """
    install(session, "test,dask,array-api-strict,docs")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")
    session.run("sphinx-build", "-W", "-b", "doctest", "docs", "docs/_build/doctest")


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Coverage-guided fuzzing of the string parser against the exact oracle (atheris), for a
    bounded time: ``nox -s fuzz -- 300`` fuzzes for 300 seconds; CI runs the default, 60.

    The corpus grows in the session's tmp directory (kept between runs); fuzz/seeds starts it.
    A finding fails the session: the log shows the input (and its Base64), and it is saved as
    crash-* in that directory, so that the next run tries it first."""
    seconds = int(session.posargs[0]) if session.posargs else 60
    install(session, "fuzz")
    corpus = session.create_tmp()
    session.run(
        "python",
        "fuzz/fuzz_strings.py",
        f"-max_total_time={seconds}",
        "-timeout=10",
        "-rss_limit_mb=4096",
        f"-artifact_prefix={corpus}/",
        corpus,
        "fuzz/seeds",
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed benchmarks (not part of CI): castlike vs ml_dtypes, onnxruntime, torch, jax."""
    install(session, "torch,jax,onnx,cli")
    session.run("python", "benchmarks/run.py", *session.posargs)
