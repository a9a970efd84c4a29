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
"""

from __future__ import annotations

import os
import platform

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


class ParallelBuildExt(build_ext):
    """``build_ext`` compiling the modules side by side, one per core (``-j`` still wins): the
    levels are one large source compiled three times, each taking most of a build's time."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = (
                len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            )


setup(
    ext_modules=[THREADS, *(kernels(level, flags) for level, flags in LEVELS.items())],
    cmdclass={"build_ext": ParallelBuildExt},
)
