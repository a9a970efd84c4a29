"""Build of castlike's native kernels (the rest of the metadata is in pyproject.toml).

One C++17 source, compiled once per CPU level into its own extension module:
``_baseline`` (the architecture's baseline: SSE2 on x86-64, NEON on aarch64) and, on x86-64,
``_avx2`` (x86-64-v3: AVX2, F16C, FMA) and ``_avx512`` (x86-64-v4).  castlike._native imports
the best one the CPU supports at run time.  A failed compile fails the install: castlike never
installs silently without its kernels.

``CASTLIKE_STRICT_BUILD=1`` (set by the nox sessions) turns compiler warnings into errors.
"""

from __future__ import annotations

import os
import platform

from setuptools import Extension, setup

SOURCES = ["castlike/_native/src/module.cpp"]
DEPENDS = ["castlike/_native/src/kernels.hpp", "castlike/_native/src/fpenv.hpp"]
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
if os.environ.get("CASTLIKE_STRICT_BUILD") == "1":
    FLAGS.append("-Werror")

X86 = platform.machine().lower() in ("x86_64", "amd64")
LEVELS = {"baseline": []}
if X86:
    LEVELS.update({"avx2": ["-march=x86-64-v3"], "avx512": ["-march=x86-64-v4"]})


def extension(level: str, arch_flags: list[str]) -> Extension:
    return Extension(
        f"castlike._native._{level}",
        sources=SOURCES,
        depends=DEPENDS,
        define_macros=[("CASTLIKE_VARIANT", level)],
        extra_compile_args=FLAGS + arch_flags,
        extra_link_args=["-pthread"],
        language="c++",
    )


setup(ext_modules=[extension(level, flags) for level, flags in LEVELS.items()])
