"""Build of castlike's native kernels (the rest of the metadata is in pyproject.toml).

One C++17 source, compiled once per CPU level into its own extension module:
``_baseline`` (the architecture's baseline: SSE2 on x86-64, NEON on aarch64) and, on x86-64,
``_avx2`` (x86-64-v3: AVX2, F16C, FMA) and ``_avx512`` (x86-64-v4).  castlike._native imports
the best one the CPU supports at run time.  Every level runs on the one thread pool of
``_threads`` (its own small module, so that a process has one pool however many levels it
loads).  A failed compile fails the install: castlike never installs silently without its
kernels.

``CASTLIKE_STRICT_BUILD=1`` (set by the nox sessions) turns compiler warnings into errors.
``CASTLIKE_SANITIZE=1`` (``nox -s sanitize``) builds every module with AddressSanitizer and
UndefinedBehaviorSanitizer, any finding fatal; such a build only imports into an interpreter
started with the sanitizer runtime preloaded (``LD_PRELOAD``).
``CASTLIKE_BUILD_CACHE=DIR`` (set by the nox sessions) keeps each built module in DIR under a
hash of everything its compile reads, and reuses it when nothing of that changed: the sessions
install castlike a dozen times, and each compile of the three levels takes about a minute on
two cores.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SRC = "castlike/_native/src"
HEADERS = (
    "kernels",
    "byte_float",
    "simd_pack",
    "small_float",
    "float_to_int",
    "byte_table",
    "through_float",
    "narrow_float",
    "fpenv",
    "threads",
    "packing",
)
DEPENDS = [f"{SRC}/{name}.hpp" for name in HEADERS]
FLAGS = [
    "-std=c++17",
    "-O3",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Wshadow",
    "-Wconversion",
    # Exactness: no contraction of a*b+c into an FMA.  Speed without changing a value: no
    # errno from libm calls, and no floating-point traps (every exception is masked while a
    # kernel runs), so that selects between rounded values vectorise.
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fvisibility=hidden",
]
LINK_FLAGS = ["-pthread"]
MACROS: list[tuple[str, str | None]] = []
if os.environ.get("CASTLIKE_STRICT_BUILD") == "1":
    FLAGS.append("-Werror")
if os.environ.get("CASTLIKE_SANITIZE") == "1":
    # -fno-sanitize-recover: undefined behaviour stops the process, as a memory error does.
    SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    FLAGS += [*SANITIZE, "-fno-omit-frame-pointer", "-g"]
    LINK_FLAGS += SANITIZE
    MACROS.append(("CASTLIKE_SANITIZED", "1"))

X86 = platform.machine().lower() in ("x86_64", "amd64")
LEVELS = {"baseline": []}
if X86:
    LEVELS.update({"avx2": ["-march=x86-64-v3"], "avx512": ["-march=x86-64-v4"]})


def kernels(level: str, arch_flags: list[str]) -> Extension:
    return Extension(
        f"castlike._native._{level}",
        sources=[f"{SRC}/module.cpp"],
        depends=DEPENDS,
        define_macros=[("CASTLIKE_VARIANT", level), *MACROS],
        extra_compile_args=FLAGS + arch_flags,
        extra_link_args=LINK_FLAGS,
        language="c++",
    )


THREADS = Extension(
    "castlike._native._threads",
    sources=[f"{SRC}/threads.cpp"],
    depends=[f"{SRC}/threads.hpp"],
    define_macros=MACROS,
    extra_compile_args=FLAGS,
    extra_link_args=LINK_FLAGS,
    language="c++",
)


#: Built modules kept per extension in the build cache (the newest; older ones are deleted).
CACHE_KEEP = 6


def compiler_identity(command: list[str]) -> str:
    """The compiler's own account of its version (``g++ --version``): a compiler upgrade under
    the same command name must not reuse the old compiler's modules."""
    try:
        found = subprocess.run([command[0], "--version"], capture_output=True, text=True)
    except OSError as error:  # the build itself will report the missing compiler
        return f"unavailable: {error}"
    return found.stdout + found.stderr


def build_key(ext: Extension, compile_command: list[str], link_command: list[str]) -> str:
    """A hash of everything a module's compile and link read: its sources and headers, its
    arguments and macros, the compiler and linker commands (with the environment's CFLAGS etc.,
    which setuptools puts there) and the compiler's version, this setup.py, and the Python it
    builds for (its version and headers)."""
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        for part in parts:
            digest.update(repr(part).encode())
            digest.update(b"\0")

    add(ext.name, ext.extra_compile_args, ext.extra_link_args, ext.define_macros, ext.language)
    add(compile_command, link_command, compiler_identity(compile_command))
    add(sys.version, sysconfig.get_config_var("EXT_SUFFIX"), sysconfig.get_paths()["include"])
    for path in [__file__, *ext.sources, *ext.depends]:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:24]


class ParallelBuildExt(build_ext):
    """``build_ext`` compiling the modules side by side, one per core (``-j`` still wins): the
    levels are one large source compiled three times, each taking most of a build's time.

    With ``CASTLIKE_BUILD_CACHE`` set, a module whose :func:`build_key` is in the cache is
    copied from it instead of compiled, and every module compiled is stored there."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = (
                len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            )

    def build_extension(self, ext: Extension) -> None:
        cache = os.environ.get("CASTLIKE_BUILD_CACHE")
        if not cache:
            super().build_extension(ext)
            return
        target = Path(self.get_ext_fullpath(ext.name))
        key = build_key(ext, list(self.compiler.compiler_so), list(self.compiler.linker_so))
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        stored = Path(cache) / f"{ext.name}-{key}{suffix}"
        if stored.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stored, target)
            os.utime(stored)  # the newest used are the ones kept
            print(f"castlike: {ext.name} reused from the build cache ({stored})")
            return
        super().build_extension(ext)
        stored.parent.mkdir(parents=True, exist_ok=True)
        # Written under a temporary name and renamed: a session reading the cache at the same
        # time never sees half a module.
        partial = stored.with_name(f"{stored.name}.{os.getpid()}.partial")
        shutil.copyfile(target, partial)
        os.replace(partial, stored)
        kept = stored.parent.glob(f"{ext.name}-*{suffix}")
        older = sorted(kept, key=lambda p: p.stat().st_mtime)  # not another's .partial file
        for path in older[:-CACHE_KEEP]:
            path.unlink(missing_ok=True)


if __name__ == "__main__":  # as pip's build backend runs it (tests import it to check the key)
    setup(
        ext_modules=[THREADS, *(kernels(level, flags) for level, flags in LEVELS.items())],
        cmdclass={"build_ext": ParallelBuildExt},
    )
