"""Cross-backend parity: every backend against the exact oracle, bit for bit.

For every (source, target) pair and every mode (saturate on/off, each ``round_mode``, each
profile of R12, and the Cast-19..23 rule for Inf into the FNUZ float8 types), the same inputs
go to every selected backend and to the oracle (:mod:`castlike.spec.reference`), and the
result bits are compared (NaN as "is NaN" for IEEE targets reached from sources wider than
8 bits, R3; every bit everywhere else):

* sources of 16 bits or fewer: every bit pattern with ``exhaustive``, else every pattern of
  the 8-bit-or-smaller types and ``n_random`` random patterns of the 16-bit ones;
* 32- and 64-bit sources: the curated inputs of :func:`castlike.testing.curated_inputs` plus
  ``n_random`` random bit patterns, reproducible from ``seed``.

The sub-byte targets are checked packed too (``packed=True``, the inputs as one row), the
bytes unpacked by the spec's NumPy reference of the layout (:mod:`castlike.spec.packing`), on
every backend that computes them: torch's FLOAT4E2M1 and FLOAT6 types, and JAX's FLOAT6 types,
which those libraries hold only packed, are checked that way alone.

The oracle's answers are cached on disk (:func:`castlike.testing.precompute`, computed in
parallel), so that a second run only costs the backends' time.  A pair a backend cannot hold
(R10) is *not representable*, never a failure.

The command line front end is ``castlike parity`` (:mod:`castlike.cli.parity`); renderings of
a :class:`ParityReport` as HTML and PNG live in :mod:`castlike._parity_render`.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import array_api_compat
import numpy as np

import castlike

from .backends import Adapter, adapter_named, backends
from .backends.numpy import ADAPTER as NUMPY_ADAPTER
from .spec.opsets import Op, version_for
from .spec.packing import layout_of, unpack_rows
from .spec.rules import Mode, Profile, RoundMode, canonical_mode
from .spec.types import TYPES, OnnxType, TypeSpec
from .testing import (
    OracleJob,
    all_modes,
    compare_bits,
    default_cache_dir,
    inputs_for,
    mode_id,
    numeric_types,
    oracle_bits,
    precompute,
    to_host,
)

__all__ = [
    "Cell",
    "CellStatus",
    "Check",
    "ModeMismatch",
    "ParityReport",
    "available_backends",
    "checks_for",
    "input_keys",
    "run_parity",
]

_T = OnnxType
_FNUZ = frozenset({_T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2FNUZ})
#: The newest opset whose Cast turns +-Inf into NaN for the FNUZ types with saturate on (R2).
_FNUZ_NAN_OPSET = 23


class CellStatus(enum.Enum):
    """The verdict for one (source, target, backend)."""

    PASS = "pass"
    MISMATCH = "mismatch"
    NOT_REPRESENTABLE = "not representable"
    ERROR = "error"


@dataclass(frozen=True)
class Check:
    """One way of casting a pair: a mode, and the opset that selects it (None: the latest)."""

    mode: Mode
    opset: int | None = None

    @property
    def id(self) -> str:
        return mode_id(self.mode)

    def options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`castlike.cast` for this check."""
        return {
            "saturate": self.mode.saturate,
            "round_mode": self.mode.round_mode.value,
            "profile": self.mode.profile.value,
            "opset": self.opset,
        }


def checks_for(source: TypeSpec, target: TypeSpec) -> list[Check]:
    """Every mode of :func:`castlike.testing.all_modes`, plus, for the FNUZ targets, Cast-23
    with saturate on (Inf -> NaN in the spec profile) where Cast-23 allows the pair."""
    checks = [Check(m) for m in all_modes()]
    old = version_for(Op.CAST, _FNUZ_NAN_OPSET)
    assert old is not None
    if _T(target.code) in _FNUZ and _T(source.code) in old.types:
        for profile in Profile:
            mode = Mode(True, RoundMode.UP, profile, inf_to_fnuz_is_nan=True)
            checks.append(Check(mode, _FNUZ_NAN_OPSET))
    return checks


def input_keys(source: TypeSpec, *, exhaustive: bool, seed: int, n_random: int) -> list[str]:
    """The oracle-cache keys (see :func:`castlike.testing.inputs_for`) of a source's inputs."""
    random_key = f"random-{n_random}-{seed}"
    if source.bits <= 8 or (source.bits <= 16 and exhaustive):
        return ["all"]
    if source.bits <= 16:
        return [random_key]
    return ["curated", random_key] if n_random else ["curated"]


@dataclass
class ModeMismatch:
    """The differing elements of one check of one pair on one backend."""

    check: str
    count: int
    #: (input bits, expected bits, actual bits) of the first differing elements, in hex.
    examples: list[tuple[str, str, str]]
    text: str


@dataclass
class Cell:
    """One (source, target, backend): the verdict over every check."""

    status: CellStatus
    checks: int = 0
    elements: int = 0
    #: How the results were read: "one per byte", and "packed" for the sub-byte targets on a
    #: backend that packs them (each check runs once per layout).
    layouts: tuple[str, ...] = ()
    mismatches: list[ModeMismatch] = field(default_factory=list)
    reason: str = ""

    @property
    def mismatch_count(self) -> int:
        """Differing elements, summed over the checks."""
        return sum(m.count for m in self.mismatches)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "checks": self.checks,
            "elements_per_check": self.elements,
            "layouts": list(self.layouts),
            "mismatching_elements": self.mismatch_count,
            "reason": self.reason,
            "mismatches": [
                {
                    "mode": m.check,
                    "count": m.count,
                    "examples": [
                        {"input": i, "expected": e, "actual": a} for i, e, a in m.examples
                    ],
                }
                for m in self.mismatches
            ],
        }


@dataclass
class ParityReport:
    """The verdict of every (source, target, backend) of a parity run."""

    backends: list[str]
    sources: list[TypeSpec]
    targets: list[TypeSpec]
    cells: dict[tuple[str, str, str], Cell]
    exhaustive: bool
    seed: int
    n_random: int
    #: Seconds spent filling the oracle cache, and in total.
    oracle_seconds: float = 0.0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: Where the inputs were placed (None: each library's default).
    device: str | None = None

    def cell(self, source: TypeSpec, target: TypeSpec, backend: str) -> Cell:
        return self.cells[(source.name, target.name, backend)]

    @property
    def failed(self) -> list[tuple[str, str, str]]:
        """Keys of the cells with a mismatch or an error."""
        return [
            k for k, c in self.cells.items() if c.status in (CellStatus.MISMATCH, CellStatus.ERROR)
        ]

    @property
    def ok(self) -> bool:
        return not self.failed

    def counts(self) -> dict[str, dict[str, int]]:
        """Per backend: pairs of each status."""
        out = {b: {s.value: 0 for s in CellStatus} for b in self.backends}
        for (_, _, backend), c in self.cells.items():
            out[backend][c.status.value] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "backends": self.backends,
            "exhaustive": self.exhaustive,
            "seed": self.seed,
            "random_inputs": self.n_random,
            "device": self.device,
            "seconds": round(self.seconds, 2),
            "oracle_seconds": round(self.oracle_seconds, 2),
            "notes": self.notes,
            "summary": self.counts(),
            "ok": self.ok,
            "pairs": [
                {
                    "source": s.name,
                    "target": t.name,
                    "backends": {b: self.cell(s, t, b).to_json() for b in self.backends},
                }
                for s in self.sources
                for t in self.targets
            ],
        }


def available_backends() -> list[str]:
    """The backends of castlike's registry (:func:`castlike.backends.backends`) whose library
    imports here, NumPy first.  Importing them is this function's purpose."""
    import importlib

    found = []
    for info in backends():
        try:
            importlib.import_module(info.module)
            adapter_named(info.name)
        except Exception:  # any failure to import means "not installed"
            continue
        found.append(info.name)
    return found


def _hex(bits: int, t: TypeSpec) -> str:
    return f"0x{int(bits):0{max(1, (t.bits + 3) // 4)}X}"


def _run_cell(
    adapter: Adapter,
    x: Any,
    inputs: np.ndarray,
    source: TypeSpec,
    target: TypeSpec,
    checks: Sequence[Check],
    expected: dict[Mode, np.ndarray],
    limit: int,
    tick: Callable[[], None],
) -> Cell:
    ways = _ways(adapter, target)
    layouts = tuple("packed" if packed else "one per byte" for packed in ways)
    cell = Cell(CellStatus.PASS, checks=len(checks), elements=int(inputs.size), layouts=layouts)
    for check, packed in ((c, p) for c in checks for p in ways):
        label = f"{check.id}, packed" if packed else check.id
        try:
            result = castlike.cast(x, target.name, packed=packed, **check.options())
            moved = _moved(x, result)
            if moved:
                raise RuntimeError(moved)
            if packed:
                host = _unpacked_host(result, target, inputs.size)
            else:
                host = adapter.to_numpy(result)
            want = expected[canonical_mode(check.mode, source, target)]
            mismatch = compare_bits(host, want, source, target, inputs)
        except Exception as exc:  # a crash is a verdict, not the end of the run
            cell.status = CellStatus.ERROR
            cell.reason = f"{label}: {type(exc).__name__}: {exc}"
            tick()
            continue
        if mismatch is not None:
            if cell.status is CellStatus.PASS:
                cell.status = CellStatus.MISMATCH
            examples = [
                (_hex(i, source), _hex(e, target), _hex(a, target))
                for i, e, a in zip(
                    mismatch.input_bits[:limit],
                    mismatch.expected[:limit],
                    mismatch.actual[:limit],
                    strict=True,
                )
            ]
            text = (
                f"{adapter.name}, mode {label}"
                + (f" (opset {check.opset})" if check.opset else "")
                + ": "
                + mismatch.describe(source, target, limit)
            )
            cell.mismatches.append(ModeMismatch(label, mismatch.count, examples, text))
        tick()
    return cell


def _moved(x: Any, result: Any) -> str:
    """Where a result left its input's device: what the report says about it, else '' (also
    for arrays without a device that array-api-compat knows: a registered backend's own)."""
    try:
        before, after = array_api_compat.device(x), array_api_compat.device(result)
    except Exception:  # no device to compare: nothing to report
        return ""
    return "" if after == before else f"the result is on {after}, its input on {before}"


def _ways(adapter: Adapter, target: TypeSpec) -> tuple[bool, ...]:
    """How a backend's results of ``target`` are checked: one per byte (False) where it holds
    the type so, and packed (True) where the type packs and the backend computes it."""
    ways = []
    if adapter.library_dtype(target) is not None:
        ways.append(False)
    if layout_of(target) is not None and _packs(adapter, target):
        ways.append(True)
    return tuple(ways)


def _packs(adapter: Adapter, target: TypeSpec) -> bool:
    return adapter.library_dtype(TYPES[_T.UINT8]) is not None and adapter.holds_packed(target)


def _unpacked_host(result: Any, target: TypeSpec, n: int) -> np.ndarray:
    """A packed result (one row of ``n`` elements) brought to the host and unpacked by the
    spec's NumPy reference (not by the kernels under test), as an array of ``target``."""
    if hasattr(result, "view") and "float4" in str(getattr(result, "dtype", "")):
        import torch  # only a torch tensor has a packed dtype

        result = result.view(torch.uint8)
    data = np.asarray(to_host(result))
    layout = layout_of(target)
    assert layout is not None and data.dtype == np.uint8
    codes = unpack_rows(np, data, layout, n)
    return NUMPY_ADAPTER.from_bits(codes, target)


#: The backends that a spawned worker process can run: the built-in ones (a backend registered
#: at run time exists only in the process that registered it).
_BUILTIN = frozenset(info.name for info in backends())


class _Setting(NamedTuple):
    """What a worker process needs, besides its source types, to run its part of a parity run
    as this process would (all of it picklable)."""

    names: list[str]
    exhaustive: bool
    seed: int
    n_random: int
    cache: Path
    limit: int
    #: JAX's ``jax_enable_x64`` here (None: JAX not among the backends); a worker sets the same.
    jax_x64: bool | None
    #: Where the inputs are placed (``Adapter.like_on``); None: each library's default.
    device: str | None = None


def _jax_x64(names: Sequence[str]) -> bool | None:
    if "jax" not in names:
        return None
    from .backends.jax import x64_enabled

    return bool(x64_enabled())


def _source_groups(
    sources: Sequence[TypeSpec],
    targets: Sequence[TypeSpec],
    keys: dict[str, list[str]],
    checks: dict[tuple[str, str], list[Check]],
    processes: int,
) -> list[list[TypeSpec]]:
    """The source types split into at most ``processes`` groups of about equal work (the
    longest first, each to the least loaded group): inputs times checks, which the exhaustive
    16-bit sources dominate."""
    if processes <= 1 or len(sources) <= 1:
        return [list(sources)]

    work = {
        s.name: sum(inputs_for(s, k).size for k in keys[s.name])
        * sum(len(checks[(s.name, t.name)]) for t in targets)
        for s in sources
    }
    groups: list[list[TypeSpec]] = [[] for _ in range(min(processes, len(sources)))]
    loads = [0] * len(groups)
    for source in sorted(sources, key=lambda s: work[s.name], reverse=True):
        least = loads.index(min(loads))
        groups[least].append(source)
        loads[least] += work[source.name]
    return [g for g in groups if g]


def _like(adapter: Adapter, device: str | None) -> Any:
    """The ``like`` array that places a backend's inputs on ``device`` (None: the default)."""
    return None if device is None else adapter.like_on(device)


def _cells_of(
    setting: _Setting,
    sources: Sequence[TypeSpec],
    targets: Sequence[TypeSpec],
    tick: Callable[[], None],
) -> dict[tuple[str, str, str], Cell]:
    """Every (source, target, backend) cell of these sources, computed in this process."""
    adapters = {name: adapter_named(name) for name in setting.names}
    likes = {name: _like(a, setting.device) for name, a in adapters.items()}
    cache, limit = setting.cache, setting.limit
    cells: dict[tuple[str, str, str], Cell] = {}
    for source in sources:
        keys = input_keys(
            source, exhaustive=setting.exhaustive, seed=setting.seed, n_random=setting.n_random
        )
        blocks = {k: inputs_for(source, k) for k in keys}
        inputs = np.concatenate(list(blocks.values()))
        on_backend = {
            name: a.from_numpy(inputs, like=likes[name])
            for name, a in adapters.items()
            if a.library_dtype(source) is not None
        }
        for target in targets:
            pair_checks = checks_for(source, target)
            expected: dict[Mode, np.ndarray] = {}
            for check in pair_checks:
                canonical = canonical_mode(check.mode, source, target)
                if canonical not in expected:
                    expected[canonical] = np.concatenate(
                        [
                            oracle_bits(
                                source, target, check.mode, block, cache_dir=cache, cache_key=k
                            )
                            for k, block in blocks.items()
                        ]
                    )
            for name, adapter in adapters.items():
                missing = [t.name for t in (source, target) if adapter.library_dtype(t) is None]
                if adapter.library_dtype(source) is not None and _ways(adapter, target):
                    missing = []  # held packed only (torch's FLOAT4E2M1): checked so
                if missing:
                    cells[(source.name, target.name, name)] = Cell(
                        CellStatus.NOT_REPRESENTABLE,
                        reason=f"{name} cannot hold {' or '.join(dict.fromkeys(missing))}",
                    )
                    continue
                cells[(source.name, target.name, name)] = _run_cell(
                    adapter,
                    on_backend[name],
                    inputs,
                    source,
                    target,
                    pair_checks,
                    expected,
                    limit,
                    tick,
                )
    return cells


#: In a worker process: where it reports each check done (set by :func:`_start_worker`).
_WORKER_TICKS: Any = None


def _start_worker(ticks: Any, jax_x64: bool | None) -> None:
    """A spawned worker's set-up: the parent's queue for progress, and JAX's x64 setting."""
    global _WORKER_TICKS
    _WORKER_TICKS = ticks
    if jax_x64 is not None:
        import jax

        jax.config.update("jax_enable_x64", jax_x64)


def _worker_cells(
    setting: _Setting, source_names: list[str], target_names: list[str]
) -> dict[tuple[str, str, str], Cell]:
    """A worker's part of the run: the cells of its source types (types travel by name)."""
    ticks = _WORKER_TICKS
    pending = 0

    def tick() -> None:
        # In batches: one message per check would cost more than many checks.
        nonlocal pending
        pending += 1
        if pending >= 16:
            ticks.put(pending)
            pending = 0

    sources = [TYPES[OnnxType[n]] for n in source_names]
    targets = [TYPES[OnnxType[n]] for n in target_names]
    try:
        return _cells_of(setting, sources, targets, tick)
    finally:
        if pending:
            ticks.put(pending)


def _cells_in_workers(
    setting: _Setting,
    groups: list[list[TypeSpec]],
    targets: Sequence[TypeSpec],
    tick: Callable[[int], None],
) -> dict[tuple[str, str, str], Cell]:
    """The cells of every group of sources, each group in a spawned worker process (never
    forked: the parent may hold JAX's or torch's threads), with their progress passed on."""
    import multiprocessing
    import queue
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    context = multiprocessing.get_context("spawn")
    ticks = context.Queue()

    def drain() -> None:
        while True:
            try:
                tick(ticks.get_nowait())
            except queue.Empty:
                return

    target_names = [t.name for t in targets]
    cells: dict[tuple[str, str, str], Cell] = {}
    with ProcessPoolExecutor(
        len(groups),
        mp_context=context,
        initializer=_start_worker,
        initargs=(ticks, setting.jax_x64),
    ) as pool:
        futures = [
            pool.submit(_worker_cells, setting, [s.name for s in g], target_names) for g in groups
        ]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            drain()
            for future in futures:
                if future.done() and future.exception() is not None:
                    for other in pending:
                        other.cancel()
                    raise RuntimeError(
                        "castlike parity: a worker process failed (run it in one process, "
                        "processes=1 or --jobs 1, to see where)"
                    ) from future.exception()
        for future in futures:
            cells.update(future.result())
    drain()
    return cells


def run_parity(
    backends: Sequence[str] | None = None,
    *,
    exhaustive: bool = False,
    seed: int = 0,
    n_random: int = 4096,
    sources: Sequence[TypeSpec] | None = None,
    targets: Sequence[TypeSpec] | None = None,
    cache_dir: Path | None = None,
    workers: int | None = None,
    processes: int = 1,
    limit: int = 5,
    device: str | None = None,
    oracle_progress: Callable[[int, int], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ParityReport:
    """Cast the same inputs on every backend and compare the bits with the oracle's.

    Parameters
    ----------
    backends : sequence of str, optional
        Backend names of castlike's registry ("numpy", "torch", "jax", "dask",
        "array-api-strict", or a registered one); default :func:`available_backends`.
    exhaustive : bool
        Every bit pattern of the 16-bit sources (else ``n_random`` random ones).
    seed, n_random : int
        The random inputs added to the wide sources (and the 16-bit ones when not exhaustive).
    sources, targets : sequence of TypeSpec, optional
        Restrict the pairs (default: every numeric type on both sides).
    cache_dir : path, optional
        Oracle cache (default ``default_cache_dir() / "oracle"``).
    workers : int, optional
        Processes computing missing oracle answers (default: every core).
    processes : int
        Processes casting on the backends.  1 (the default) casts in this process; more split
        the source types among spawned worker processes, each of which imports the backends
        anew (with JAX's ``jax_enable_x64`` as it is here; a worker sees the environment and
        castlike's defaults, not other settings made in this process).  Only the built-in
        backends run so; with a backend registered at run time everything runs here.
    limit : int
        Differing elements listed per mismatch.
    device : str, optional
        Where every backend's inputs are placed: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, or any
        name the backends' ``like_on`` takes (torch: a ``torch.device``; JAX: a platform and
        an index).  Default: each library's own default placement.  A result that is not on
        its input's device counts as an error.
    oracle_progress, progress : callable, optional
        ``f(done, total)`` while the oracle cache fills, and while the backends run.

    Returns
    -------
    ParityReport

    Raises
    ------
    ValueError
        Where a backend cannot place arrays on ``device``, before any work starts.

    Notes
    -----
    Missing oracle answers are computed by *spawned* worker processes (forking a process that
    holds JAX or torch threads can deadlock), so a script calling this needs the usual
    ``if __name__ == "__main__":`` guard.
    """
    started = time.perf_counter()
    names = list(backends) if backends is not None else available_backends()
    adapters = {name: adapter_named(name) for name in names}
    for adapter in adapters.values():
        _like(adapter, device)  # a device a backend cannot reach fails here, not in every cell
    all_types = numeric_types()
    sources = list(sources or all_types)
    targets = list(targets or all_types)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "oracle"
    keys = {
        s.name: input_keys(s, exhaustive=exhaustive, seed=seed, n_random=n_random) for s in sources
    }
    checks = {(s.name, t.name): checks_for(s, t) for s in sources for t in targets}
    jobs = [
        OracleJob(s, t, c.mode, key)
        for s in sources
        for t in targets
        for c in checks[(s.name, t.name)]
        for key in keys[s.name]
    ]
    # Spawned workers: the parent may hold JAX or torch, whose threads must not be forked.
    precompute(jobs, cache, workers, progress=oracle_progress, start_method="spawn")
    oracle_seconds = time.perf_counter() - started

    report = ParityReport(names, sources, targets, {}, exhaustive, seed, n_random, device=device)
    report.oracle_seconds = oracle_seconds
    total = sum(
        len(checks[(s.name, t.name)])
        for s in sources
        for t in targets
        for a in adapters.values()
        if a.library_dtype(s) is not None
        for _ in _ways(a, t)
    )
    done = 0

    def tick(n: int = 1) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    setting = _Setting(names, exhaustive, seed, n_random, cache, limit, _jax_x64(names), device)
    groups = _source_groups(sources, targets, keys, checks, processes or 1)
    if len(groups) > 1 and all(name in _BUILTIN for name in names):
        found = _cells_in_workers(setting, groups, targets, tick)
    else:
        found = _cells_of(setting, sources, targets, tick)
    # The report's cells in the order a sequential run finds them (its JSON lists them so).
    order = {pair: i for i, pair in enumerate((s.name, t.name) for s in sources for t in targets)}
    report.cells = dict(
        sorted(found.items(), key=lambda kv: (order[kv[0][:2]], names.index(kv[0][2])))
    )
    if setting.jax_x64 is False:
        report.notes.append(
            "JAX ran without jax_enable_x64: DOUBLE, INT64 and UINT64 are not "
            "representable there (set JAX_ENABLE_X64=1 to include them)"
        )
    report.seconds = time.perf_counter() - started
    return report
