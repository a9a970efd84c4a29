"""Test inputs, oracle answers and bitwise comparison, shared by the test suite and the
``castlike parity`` command.

Everything here works on NumPy arrays on the host: backends' results are brought back with
:func:`to_host` before they are compared.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import _native
from ._cache import default_cache_dir
from .backends.numpy import ADAPTER as NUMPY
from .backends.numpy import NUMPY_DTYPES
from .spec import binary
from .spec.reference import cast_bits, decode
from .spec.rules import Mode, Profile, RoundMode, canonical_mode
from .spec.types import TYPES, OnnxType, Special, TypeSpec

__all__ = [
    "EXACT_METHODS",
    "MEMORY_LAYOUTS",
    "NO_BF16",
    "Mismatch",
    "all_modes",
    "assert_cast_equal",
    "clear_caches",
    "compare_bits",
    "curated_inputs",
    "default_cache_dir",
    "exhaustive_inputs",
    "fresh_caches",
    "kernel_variant",
    "kernel_variants",
    "memory_layouts",
    "numeric_types",
    "oracle_bits",
    "random_inputs",
    "to_host",
    "uses_integer_rules",
]

_T = OnnxType


def clear_caches() -> None:
    """Forget every decision and table castlike keeps in memory.

    The caches are: the repeat-call path of :func:`castlike.cast`, the routes of
    :func:`castlike.spec.route.route_for`, the resolved plans, the lookup tables, the native
    kernels and (where PyTorch is loaded) the tables already moved to a device.  Each holds a
    result derived from the spec's rules, an adapter's engine or the kernels; after a test
    changed one of those, a cached result would hide the change.
    """
    from . import _fastpath
    from ._native import routes as kernel_routes
    from .spec import plan, route, tables

    _fastpath.clear()
    kernel_routes.clear_caches()
    cached = (
        route._route,
        plan._cached_resolve,
        tables.pattern_table,
        tables.byte_table,
        tables.float32_class_table,
        tables.double_class_table,
    )
    for function in cached:
        # A test may have replaced one of them by a plain function: it has nothing to clear.
        getattr(function, "cache_clear", lambda: None)()
    compiled = sys.modules.get("castlike.backends._torch_compile")
    if compiled is not None:  # never import torch only to clear its tables
        compiled.clear_device_tables()


@contextmanager
def fresh_caches() -> Iterator[None]:
    """Run a block with every in-memory cache forgotten on entry and on exit.

    Use it around code that replaces a rule, an adapter's engine or the kernels (with
    ``monkeypatch``, say): the block sees its own change, and nothing it cached outlives it.
    Inside the block the repeat-call path of :func:`castlike.cast` is off, because it runs an
    adapter's kernel directly and would not see a replaced engine.

    Examples
    --------
    >>> import numpy as np, castlike
    >>> from castlike.testing import fresh_caches
    >>> with fresh_caches():
    ...     castlike.cast(np.float32([1.5, 300.0]), "INT8").tolist()
    [1, 127]
    """
    from . import _fastpath

    clear_caches()
    try:
        with _fastpath.paused():
            yield
    finally:
        clear_caches()


#: The kernel variant of the AVX-512 level with its AVX512-BF16 steps turned off.
NO_BF16 = "avx512-no-bf16"


def kernel_variants() -> list[str]:
    """The native kernel levels this CPU runs (:func:`castlike._native.available_levels`), and
    ``"avx512-no-bf16"`` where the AVX-512 kernels use AVX512-BF16's conversion on this CPU: the
    integer steps that AVX-512 CPUs without it run instead (:func:`kernel_variant` puts a
    variant in force).  Those steps differ for BFLOAT16 results only."""
    levels = _native.available_levels()
    if "avx512" in levels and _native.info()["cpu_features"].get("avx512bf16"):
        levels.append(NO_BF16)
    return levels


@contextmanager
def kernel_variant(name: str) -> Iterator[ModuleType]:
    """The kernel module of a :func:`kernel_variants` name, with that variant in force in the
    whole process until the block ends."""
    level = "avx512" if name == NO_BF16 else name
    module = importlib.import_module(f"castlike._native._{level}")
    if name != NO_BF16:
        yield module
        return
    previous = module._bfloat16_instructions()
    module._bfloat16_instructions(False)
    try:
        yield module
    finally:
        module._bfloat16_instructions(previous)


def _unaligned(base: np.ndarray) -> np.ndarray:
    raw = np.zeros(base.nbytes + 1, dtype=np.uint8)
    out = raw[1:].view(base.dtype).reshape(base.shape)
    out[...] = base
    return out


def _grid(base: np.ndarray) -> np.ndarray:
    return base[: 6 * 7 * 8].reshape(6, 7, 8)


#: Ways to hold values in memory that a kernel must read right, each a function of a 1-D
#: array of at least 336 elements to an array of (some of) its values: the same values as a
#: contiguous copy of the result, in another layout.
MEMORY_LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "strided": lambda a: _grid(a)[:, ::3, 1::2],
    "negative steps": lambda a: a[::-1],
    "fortran": lambda a: np.asfortranarray(_grid(a)),
    "transposed": lambda a: _grid(a).transpose(2, 0, 1),
    "unaligned": _unaligned,
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "broadcast": lambda a: np.broadcast_to(_grid(a)[:, :1], (6, 7, 8)),
    "zero-d": lambda a: a[5].reshape(()),
    "empty": lambda a: a[:0].reshape(0, 3),
}


def memory_layouts(base: np.ndarray) -> dict[str, np.ndarray]:
    """:data:`MEMORY_LAYOUTS` applied to ``base`` (1-D, at least 336 elements).

    Examples
    --------
    >>> import numpy as np
    >>> from castlike.testing import memory_layouts
    >>> layouts = memory_layouts(np.arange(400, dtype=np.float32))
    >>> layouts["transposed"].shape, layouts["big-endian"].dtype.byteorder
    ((8, 6, 7), '>')
    """
    return {name: layout(base) for name, layout in MEMORY_LAYOUTS.items()}


def numeric_types() -> list[TypeSpec]:
    """Every numeric ONNX type (all but STRING), by code."""
    return [t for t in TYPES.values() if t.is_numeric]


def all_modes() -> list[Mode]:
    """Every (saturate, round_mode, profile) combination, at the latest opset."""
    return [
        Mode(saturate=s, round_mode=r, profile=p)
        for p, s, r in itertools.product(Profile, (True, False), RoundMode)
    ]


def mode_id(mode: Mode) -> str:
    """A short test id: ``sat-up-spec``, ``nosat-nearest-reference`` ..."""
    text = f"{'sat' if mode.saturate else 'nosat'}-{mode.round_mode.value}-{mode.profile.value}"
    return text + ("-fnuz19" if mode.inf_to_fnuz_is_nan else "")


# -- inputs ------------------------------------------------------------------------------------


def exhaustive_inputs(t: TypeSpec) -> np.ndarray:
    """Every bit pattern of a type of 16 bits or fewer, as a NumPy array of that type."""
    if t.bits > 16:
        raise ValueError(f"{t.name} has too many patterns to enumerate")
    storage = np.dtype(f"uint{t.storage_bits}")
    return NUMPY.from_bits(np.arange(1 << t.bits, dtype=storage), t)


def _float_values_near(v: float) -> list[float]:
    """``v`` and its neighbours one and two units in the last place away, in DOUBLE and FLOAT."""
    out = [v]
    for dtype in (np.float64, np.float32):
        with np.errstate(all="ignore"):
            x = dtype(v)
            if not np.isfinite(x):
                continue
        down, up = x, x
        with np.errstate(all="ignore"):
            for _ in range(2):
                down = np.nextafter(down, dtype(-np.inf))
                up = np.nextafter(up, dtype(np.inf))
                out += [float(down), float(up)]
        out.append(float(x))
    return out


@lru_cache(maxsize=1)
def _boundary_values() -> tuple[float, ...]:
    """Values where a rule changes: ties, +-max and the overflow boundary, subnormals, 2**k."""
    points: set[float] = {0.0, 1.0, 0.5, 1.5, 2.5, 3.5, -2.5, 100.5, -2.7}
    for t in numeric_types():
        if t.is_float:
            fmt = t.fmt
            if fmt.total_bits <= 16:
                values = [decode(b, t) for b in range(1 << fmt.total_bits)]
                finite = sorted({float(v.magnitude) for v in values if v.kind == "finite"})
                pairs = list(itertools.pairwise(finite))
                if len(pairs) > 256:  # 16-bit formats: both ends and an even sample between
                    pairs = pairs[:16] + pairs[16:-16:257] + pairs[-16:]
                for lo, hi in pairs:
                    points.add((lo + hi) / 2)  # a tie (exact in DOUBLE)
                    points.add(lo)
            mx = fmt.max_value
            points.add(float(mx))
            ulp_top = float(mx) - float(fmt.magnitude_of(fmt.max_bits - 1)) if fmt.max_bits else 0
            if fmt.special is not Special.E8M0:
                points.add(float(mx) + ulp_top / 2)  # the overflow rounding boundary
                points.add(float(mx) + ulp_top)
            if float(fmt.min_subnormal) > 0:
                points.add(float(fmt.min_subnormal))
                points.add(float(fmt.min_subnormal) / 2)
                points.add(float(fmt.min_normal))
        elif t.is_integer:
            for edge in (t.int_min, t.int_max, t.int_max + 1, t.int_min - 1):
                points.add(float(edge))
    for k in (-149, -127, -126, -24, -14, 24, 31, 32, 53, 63, 64, 127, 128):
        points.add(math.ldexp(1.0, k))
        points.add(math.ldexp(1.5, k))
    points.add(1 + 2**-4 + 2**-40)
    points.add(1 + 2**-8 + 2**-40)
    points.add(1 + 2**-11 + 2**-40)
    return tuple(sorted(points))


def curated_inputs(t: TypeSpec) -> np.ndarray:
    """Hand-picked inputs of a wide type; see :func:`_curated_inputs` (cached, read-only)."""
    return _curated_inputs(t)


@cache
def _curated_inputs(t: TypeSpec) -> np.ndarray:
    """Hand-picked inputs of a wide type (FLOAT, DOUBLE, 32/64-bit integers).

    Floats: ties of every target and their neighbours, +-max of every type and the overflow
    rounding boundary, subnormals, 2**24 / 2**53 / 2**63 / 2**64 neighbours, NaN, +-Inf, -0.
    Integers: the same points where the type holds them, and the integer edges.
    Both get 1000 random bit patterns (fixed seed) on top.
    """
    dtype = NUMPY_DTYPES[_T(t.code)]
    base = _boundary_values()
    if t.is_float:
        values: list[float] = []
        for v in base:
            values += _float_values_near(v)
        values += [-v for v in values]
        with np.errstate(all="ignore"):
            arr = np.array(values, dtype=np.float64).astype(dtype)
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=dtype)
        arr = np.concatenate([arr, specials])
        bits = NUMPY.bits(arr, t)
        # Signalling NaN and NaN with payloads, as bit patterns.
        payloads = [0x7F800001, 0xFF800001, 0x7FC00001] if t.bits == 32 else [0x7FF0000000000001]
        bits = np.concatenate([bits, np.array(payloads, dtype=bits.dtype), _random_bits(t, 1000)])
        return _read_only(NUMPY.from_bits(np.unique(bits), t))
    ints: set[int] = set()
    lo, hi = t.int_min, t.int_max
    for v in base:
        if not math.isfinite(v):
            continue
        for n in (math.floor(v), math.ceil(v)):
            for d in (-2, -1, 0, 1, 2):
                for s in (1, -1):
                    if lo <= s * n + d <= hi:
                        ints.add(s * n + d)
    for k in range(t.bits):
        for d in (-1, 0, 1):
            for value in ((1 << k) + d, -(1 << k) + d, (1 << k) + (1 << max(k - 25, 0)) + d):
                if lo <= value <= hi:
                    ints.add(value)
    ints.update({lo, hi, 0})
    fixed = np.array(sorted(ints), dtype=object).astype(dtype)
    extra = NUMPY.from_bits(_random_bits(t, 1000), t)
    return _read_only(np.unique(np.concatenate([fixed, extra])))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # shared by every caller of the cache
    return array


def _random_bits(t: TypeSpec, n: int, seed: int = 20261129) -> np.ndarray:
    rng = np.random.default_rng(seed)
    storage = np.dtype(f"uint{t.storage_bits}")
    return rng.integers(0, np.iinfo(storage).max, size=n, dtype=storage, endpoint=True)


def random_inputs(t: TypeSpec, n: int, seed: int) -> np.ndarray:
    """``n`` uniformly random bit patterns of a type, reproducible from ``seed``."""
    return NUMPY.from_bits(_random_bits(t, n, seed), t)


def rounding_inputs(t: TypeSpec, n: int, seed: int) -> np.ndarray:
    """``n`` values of FLOAT, DOUBLE or a 64-bit integer type that stress rounding into
    narrower types, reproducible from ``seed``.

    Uniformly random bits rarely land where a narrower target rounds: most DOUBLE exponents lie
    far outside every small type's range, most random 64-bit integers have their top bit near
    the top, and a random value is almost never a tie.  Here the value's lowest set bit is at a
    uniformly random position, random bits lie above it, and, for half of the values, one more
    bit is set at a random position below it (a tie, or a value just off one, at every
    rounding position).  Floats: the unbiased exponent is uniform in [-160, 140] (every small
    type's subnormals, FLOAT's subnormals and overflow).  Integers: the leading bit's position
    is uniform.  The sign is random where the type has one.

    Parameters
    ----------
    t : TypeSpec
        FLOAT, DOUBLE, INT64 or UINT64.
    n : int
        How many values.
    seed : int
        The seed of the random generator: the same seed gives the same values.

    Returns
    -------
    numpy.ndarray
        ``n`` values of ``t``'s NumPy dtype.

    Raises
    ------
    ValueError
        For any other type.
    """
    fmt = t.float_format
    if not ((fmt is not None and t.storage_bits in (32, 64)) or (t.is_integer and t.bits == 64)):
        raise ValueError(f"rounding_inputs takes FLOAT, DOUBLE or a 64-bit integer, got {t.name}")
    rng = np.random.default_rng(seed)
    storage = np.dtype(f"uint{t.storage_bits}")
    one, zero = storage.type(1), storage.type(0)
    signed = fmt is not None or t.int_min < 0
    if fmt is not None:  # the significand's bits below its implicit one
        width = np.full(n, fmt.mantissa_bits, dtype=storage)
    else:  # the leading bit's position: below the sign bit where there is one
        width = rng.integers(0, t.bits - int(signed), size=n).astype(storage)
    lowest = (rng.random(n) * (width.astype(np.float64) + 1)).astype(storage)
    above = rng.integers(0, np.iinfo(storage).max, size=n, dtype=storage, endpoint=True)
    field = (one << width) - one  # the bits below the leading one (floats: the mantissa)
    value = (((above >> lowest) << lowest) | (one << lowest)) & field
    below = rng.integers(0, 1 << 30, size=n).astype(storage) % np.maximum(lowest, one)
    value |= np.where((rng.random(n) < 0.5) & (lowest > 0), one << below, zero)
    negative = rng.integers(0, 2, size=n).astype(bool) & signed
    if fmt is not None:
        exponent = rng.integers(-160, 141, size=n) + fmt.bias
        exponent = np.clip(exponent, 0, (1 << fmt.exponent_bits) - 2).astype(storage)
        bits = (exponent << storage.type(fmt.mantissa_bits)) | value
        bits |= np.where(negative, one << storage.type(t.storage_bits - 1), zero)
        return NUMPY.from_bits(bits, t)
    value |= one << width  # the leading one
    value = np.where(negative, ~value + one, value)  # two's complement
    return value.view(NUMPY_DTYPES[_T(t.code)])


# -- oracle ------------------------------------------------------------------------------------


#: The modules the oracle's numeric answers depend on (not the string rules, R9, nor the
#: tables built from the rules, which are what the cached answers test).
_ORACLE_MODULES = ("types.py", "rules.py", "reference.py", "binary.py")


@lru_cache(maxsize=1)
def _spec_fingerprint() -> str:
    """Hash of the oracle's source: cached answers are invalid once the rules change."""
    here = Path(__file__).parent / "spec"
    digest = hashlib.sha256()
    for name in _ORACLE_MODULES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


#: How :func:`oracle_bits` computes: "auto" takes the exact integer rules
#: (:mod:`castlike.spec.binary`) for the sources they cover (FLOAT and every type of 16 bits
#: or fewer) and the Fraction oracle for the others; "fraction" always takes the Fraction
#: oracle (:func:`castlike.spec.reference.cast_bits`), which the tests hold the integer rules
#: to on every pattern.
EXACT_METHODS = ("auto", "fraction")


def uses_integer_rules(source: TypeSpec, exact: str = "auto") -> bool:
    """Whether :func:`oracle_bits` answers ``source`` with the integer rules."""
    if exact not in EXACT_METHODS:
        raise ValueError(f"exact must be one of {EXACT_METHODS}, got {exact!r}")
    return exact == "auto" and binary.supports_source(source)


def oracle_bits(
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    inputs: np.ndarray,
    *,
    cache_dir: Path | None = None,
    cache_key: str | None = None,
    exact: str = "auto",
) -> np.ndarray:
    """The oracle's result bits (uint64) for every element of the NumPy array ``inputs``.

    ``exact`` says how (:data:`EXACT_METHODS`): the two ways give the same bits.  With
    ``cache_dir`` and ``cache_key`` the answers are stored on disk, keyed by the oracle's
    fingerprint, the pair and the canonical mode, so that later runs and other backends reuse
    them.
    """
    mode = canonical_mode(mode, source, target)
    integers = uses_integer_rules(source, exact)
    path = None
    if cache_dir is not None and cache_key is not None:
        path = _cache_path(cache_dir, source, target, mode, cache_key, exact)
        if path.exists():
            cached: np.ndarray = np.load(path)
            if cached.shape == (inputs.size,):
                return cached
    flat = NUMPY.bits(np.ascontiguousarray(inputs).reshape(-1), source)
    if integers:
        out = binary.cast_patterns(flat, source, target, mode)
    else:
        out = np.fromiter(
            (cast_bits(int(b), source, target, mode) for b in flat),
            dtype=np.uint64,
            count=flat.size,
        )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, out)
        os.replace(tmp, path)
    return out


@dataclass(frozen=True)
class OracleJob:
    """One oracle table to compute: a pair, a mode and which inputs (by a cache key)."""

    source: TypeSpec
    target: TypeSpec
    mode: Mode
    cache_key: str
    #: How to compute (see :data:`EXACT_METHODS`).
    exact: str = "auto"


def inputs_for(source: TypeSpec, cache_key: str) -> np.ndarray:
    """The inputs a cache key names: "all" (every pattern), "curated", or "random-N-SEED"
    (:func:`random_inputs` of N patterns from SEED)."""
    if cache_key == "all":
        return exhaustive_inputs(source)
    if cache_key == "curated":
        return curated_inputs(source)
    if cache_key.startswith("random-"):
        _, n, seed = cache_key.split("-")
        return random_inputs(source, int(n), int(seed))
    raise ValueError(f"unknown input set {cache_key!r}")


def _run_job(job: OracleJob, cache_dir: Path) -> None:
    oracle_bits(
        job.source,
        job.target,
        job.mode,
        inputs_for(job.source, job.cache_key),
        cache_dir=cache_dir,
        cache_key=job.cache_key,
        exact=job.exact,
    )


def precompute(
    jobs: Sequence[OracleJob],
    cache_dir: Path,
    workers: int | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    start_method: str | None = None,
) -> None:
    """Fill the oracle cache for ``jobs`` (deduplicated by canonical mode), in parallel.

    Jobs the integer rules answer take milliseconds each and run here; the Fraction oracle's
    run in worker processes.  ``progress(done, total)`` is called as tables are computed
    (``total`` counts only the missing ones).  ``start_method`` is the worker processes'
    multiprocessing start method (``"spawn"`` where the caller has imported a multithreaded
    library such as JAX, which must not be forked; None picks ``"spawn"`` once JAX is
    imported, the platform's default otherwise).
    """
    with _cache_lock(cache_dir):
        _precompute(jobs, cache_dir, workers, progress=progress, start_method=start_method)


@contextmanager
def _cache_lock(cache_dir: Path) -> Iterator[None]:
    """Held while one process fills ``cache_dir``: pytest-xdist's workers each run a module's
    precompute, and without it each computed the same missing tables on its own pool of every
    core (the every-pattern Fraction tables: 264 s with both at it, 222 s with one, on two
    cores).  The next holder finds them cached.  The operating system releases the lock if its
    holder dies; where there is no ``fcntl`` (Windows), nothing is locked and the work may be
    done twice, as before."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(cache_dir) / ".precompute.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _precompute(
    jobs: Sequence[OracleJob],
    cache_dir: Path,
    workers: int | None,
    *,
    progress: Callable[[int, int], None] | None,
    start_method: str | None,
) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    unique = {
        OracleJob(
            j.source, j.target, canonical_mode(j.mode, j.source, j.target), j.cache_key, j.exact
        )
        for j in jobs
    }
    todo = [
        j
        for j in unique
        if not _cache_path(cache_dir, j.source, j.target, j.mode, j.cache_key, j.exact).exists()
    ]
    if not todo:
        return
    # Longest first: 16-bit sources dominate.
    todo.sort(key=lambda j: -j.source.bits)
    here = [j for j in todo if uses_integer_rules(j.source, j.exact)]
    rest = [j for j in todo if not uses_integer_rules(j.source, j.exact)]
    done = 0
    for job in here:
        _run_job(job, cache_dir)
        done += 1
        if progress is not None:
            progress(done, len(todo))
    if not rest:
        return
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(rest) == 1:
        for job in rest:
            _run_job(job, cache_dir)
            done += 1
            if progress is not None:
                progress(done, len(todo))
        return
    if start_method is None and "jax" in sys.modules:
        start_method = "spawn"  # forking JAX's threads warns (an error under pytest) and may hang
    context = multiprocessing.get_context(start_method) if start_method else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_run_job, job, cache_dir) for job in rest]
        for future in as_completed(futures):
            future.result()
            done += 1
            if progress is not None:
                progress(done, len(todo))


def _cache_path(
    cache_dir: Path, source: TypeSpec, target: TypeSpec, mode: Mode, key: str, exact: str = "auto"
) -> Path:
    how = "-fraction" if exact == "fraction" else ""
    name = f"{source.name}-{target.name}-{mode_id(mode)}-{key}{how}-{_spec_fingerprint()}.npy"
    return Path(cache_dir) / name


# -- comparison --------------------------------------------------------------------------------


def to_host(x: Any) -> np.ndarray:
    """A backend's result as a NumPy array of the same ONNX type (for bit comparison)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    import array_api_compat

    from .backends import adapter_for

    return adapter_for(array_api_compat.array_namespace(x)).to_numpy(x)


@dataclass(frozen=True)
class Mismatch:
    """The first differing elements of a comparison."""

    count: int
    indices: np.ndarray
    input_bits: np.ndarray
    expected: np.ndarray
    actual: np.ndarray

    def describe(self, source: TypeSpec, target: TypeSpec, limit: int = 5) -> str:
        width_in = max(1, (source.bits + 3) // 4)
        width_out = max(1, (target.bits + 3) // 4)
        rows = [
            f"  input 0x{int(i):0{width_in}X} -> expected 0x{int(e):0{width_out}X}, "
            f"actual 0x{int(a):0{width_out}X}"
            for i, e, a in zip(
                self.input_bits[:limit], self.expected[:limit], self.actual[:limit], strict=True
            )
        ]
        more = f"\n  ... and {self.count - limit} more" if self.count > limit else ""
        return (
            f"{self.count} mismatching element(s) casting {source.name} -> {target.name}:\n"
            + "\n".join(rows)
            + more
        )


def compare_bits(
    result: Any,
    expected_bits: np.ndarray,
    source: TypeSpec,
    target: TypeSpec,
    inputs: np.ndarray,
    *,
    exact_nan: bool | None = None,
) -> Mismatch | None:
    """Compare a result with the oracle's bits; None when they agree.

    By default (``exact_nan=None``, rule R3) IEEE targets (FLOAT16, FLOAT, DOUBLE, BFLOAT16)
    compare NaN as "is NaN" when the source is wider than 8 bits; from a source of 8 bits or
    fewer, and for every other target, every bit is compared, NaN encodings included (R3: a NaN
    from float8, float4, float6 or FLOAT8E8M0 is the quiet NaN with the input's sign bit on
    every backend).  ``exact_nan=False`` compares NaN as "is NaN" for every IEEE target (for
    data castlike did not make, such as the ONNX test data of old onnx versions), and
    ``exact_nan=True`` compares every bit everywhere.
    """
    host = to_host(result)
    actual = NUMPY.bits(host.reshape(-1), target).astype(np.uint64)
    expected = np.asarray(expected_bits, dtype=np.uint64).reshape(-1)
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: {actual.shape} vs {expected.shape}")
    differ = actual != expected
    open_nan = nan_is_open(source, target) if exact_nan is None else not exact_nan
    if open_nan and target.is_float and target.fmt.special is Special.IEEE and target.bits >= 16:
        nan_actual, nan_expected = _is_ieee_nan(actual, target), _is_ieee_nan(expected, target)
        differ = np.where(nan_actual | nan_expected, nan_actual != nan_expected, differ)
    if not differ.any():
        return None
    idx = np.flatnonzero(differ)
    in_bits = NUMPY.bits(np.asarray(inputs).reshape(-1), source)[idx]
    return Mismatch(int(idx.size), idx, in_bits, expected[idx], actual[idx])


def nan_is_open(source: TypeSpec, target: TypeSpec) -> bool:
    """Whether R3 leaves a NaN result's payload and sign open for this pair: an IEEE target
    (FLOAT16, BFLOAT16, FLOAT, DOUBLE) reached from a source wider than 8 bits."""
    ieee_target = target.is_float and target.fmt.special is Special.IEEE and target.bits >= 16
    return ieee_target and source.bits > 8


def _is_ieee_nan(bits: np.ndarray, t: TypeSpec) -> np.ndarray:
    fmt = t.fmt
    exponent = np.uint64(((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits)
    mantissa = np.uint64((1 << fmt.mantissa_bits) - 1)
    return ((bits & exponent) == exponent) & ((bits & mantissa) != 0)


def assert_cast_equal(
    result: Any,
    expected_bits: np.ndarray,
    source: TypeSpec,
    target: TypeSpec,
    inputs: np.ndarray,
    *,
    expected_dtype: Any = None,
    expected_shape: Sequence[int] | None = None,
) -> None:
    """Assert dtype and shape (when given), then every bit (NaN per R3), with a readable diff."""
    if expected_dtype is not None and result.dtype != expected_dtype:
        raise AssertionError(f"dtype {result.dtype} != expected {expected_dtype}")
    if expected_shape is not None and tuple(result.shape) != tuple(expected_shape):
        raise AssertionError(f"shape {tuple(result.shape)} != expected {tuple(expected_shape)}")
    mismatch = compare_bits(result, expected_bits, source, target, inputs)
    if mismatch is not None:
        raise AssertionError(mismatch.describe(source, target))
