"""``castlike info``: which cast path the NumPy backend uses, on which CPU level and threads."""

from __future__ import annotations

import argparse
import json

from .. import __version__, _native


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "info",
        help="print the castlike version, the native kernel level, CPU features and threads",
        description="Print whether the NumPy backend casts with the native kernels (and which "
        "CPU level: baseline, avx2 or avx512) or with the pure-NumPy engine, why, the CPU "
        "features the choice looked at, and the threads used for large arrays.",
    )
    parser.add_argument("--json", action="store_true", help="print the same as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    info = {"version": __version__, **_native.info()}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    features = [name for name, present in info["cpu_features"].items() if present]
    print(f"castlike {info['version']}")
    level = info["level"]
    if level and info["extra_instructions"]:
        level += " with " + ", ".join(info["extra_instructions"])
    print(f"cast path:   {info['path']}" + (f" ({level})" if level else ""))
    print(f"why:         {info['reason']}")
    print(f"levels here: {', '.join(info['levels_available']) or 'none built'}")
    print(f"CPU:         {', '.join(features) or 'no feature the dispatcher looks at'}")
    print(f"threads:     {info['threads']} (CASTLIKE_NUM_THREADS, castlike.set_num_threads)")
    return 0
