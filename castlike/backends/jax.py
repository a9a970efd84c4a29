"""JAX backend: the primitives of jax.numpy arrays and tracers, under ``jax.jit``, ``jax.vmap``
and sharding.

The shared rules of :mod:`castlike._engine` run on ``jax.numpy`` (an Array-API namespace
itself), always traced (:class:`JaxEngine` only jit-compiles them).  XLA's own float
arithmetic is not exact enough for them on every platform, and the adapter says so
(``flushes_subnormals``): the engine then does those steps in integer arithmetic on the bit
patterns (:mod:`castlike._exact`).  Measured on XLA:CPU (jax 0.10):

* conversions and comparisons treat subnormal FLOAT/DOUBLE values as zero (flush to zero):
  a subnormal FLOAT became 0.0 in DOUBLE and False in BOOL, ``-1e-310 < 0`` was False, and
  DOUBLE -> FLOAT flushed results that should be FLOAT subnormals;
* DOUBLE -> BFLOAT16 and DOUBLE -> FLOAT16 round twice (through FLOAT);
* on accelerators XLA may drop a narrowing round trip (excess precision), which breaks any
  "convert and convert back to see what was lost" step;
* FLOAT6E2M3 and FLOAT6E3M2 exist in ``jax.numpy`` but no array of them can be made (XLA
  rejects the element type), so JAX cannot hold them: a clear :class:`BackendTypeError`.

What XLA does exactly is declared in :data:`LIBRARY_PAIRS` and used as is (integer <->
integer conversion keeps the low bits, integer -> FLOAT/DOUBLE rounds once to nearest even,
FLOAT -> FLOAT16, the exact widenings); the tests check every declared pair against the
oracle.  Every other source of 16 bits or fewer is one gather from the pattern table (a
constant of the compiled program).

Measured on XLA:GPU (jax 0.11.2, an H200), where XLA:CPU does as the rules say:

* float conversions write every NaN as the canonical NaN (0x7FFF in FLOAT16/BFLOAT16): the
  sign and payload are lost.  A declared pair's value is XLA's, its NaN never is: the engine
  writes the rule's NaN itself wherever the source is NaN (:meth:`JaxEngine.library`);
* INT2/UINT2 -> INT4/UINT4/FLOAT4E2M1 conversions lose the top bit of the 2-bit value
  (0x2 -> 0x0, 0x3 -> 0x1), and ``jit`` folds a widening to 8 bits followed by a narrowing
  into that conversion.  Sub-byte integers are widened to 8 bits before anything else reads
  them, the 2-bit ones behind an optimization barrier (:func:`widened_sub_byte`).

64-bit types (DOUBLE, INT64, UINT64) exist only with ``jax_enable_x64``; without it they are
refused (R10) instead of silently becoming 32-bit.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from .._adapter import Adapter
from .._engine import Engine
from ..errors import BackendTypeError
from ..spec.route import Family, Route
from ..spec.rules import IEEE_NAN_TYPES, Mode, canonical_mode, nan_bits_for
from ..spec.types import TYPES, FloatFormat, Kind, OnnxType, Special, TypeSpec

if TYPE_CHECKING:
    from ..spec.plan import Plan

__all__ = [
    "ADAPTER",
    "JAX_DTYPES",
    "JaxAdapter",
    "JaxEngine",
    "canonical_bool",
    "widened_sub_byte",
    "x64_enabled",
]

_T = OnnxType

#: The jax.numpy dtype of every numeric ONNX type.  jax.numpy's dtypes *are* NumPy/ml_dtypes
#: dtypes, so NumPy arrays move in and out with their type unchanged.
JAX_DTYPES: dict[OnnxType, np.dtype[Any]] = {
    _T.FLOAT: np.dtype(jnp.float32),
    _T.UINT8: np.dtype(jnp.uint8),
    _T.INT8: np.dtype(jnp.int8),
    _T.UINT16: np.dtype(jnp.uint16),
    _T.INT16: np.dtype(jnp.int16),
    _T.INT32: np.dtype(jnp.int32),
    _T.INT64: np.dtype(jnp.int64),
    _T.BOOL: np.dtype(jnp.bool_),
    _T.FLOAT16: np.dtype(jnp.float16),
    _T.DOUBLE: np.dtype(jnp.float64),
    _T.UINT32: np.dtype(jnp.uint32),
    _T.UINT64: np.dtype(jnp.uint64),
    _T.BFLOAT16: np.dtype(jnp.bfloat16),
    _T.FLOAT8E4M3FN: np.dtype(jnp.float8_e4m3fn),
    _T.FLOAT8E4M3FNUZ: np.dtype(jnp.float8_e4m3fnuz),
    _T.FLOAT8E5M2: np.dtype(jnp.float8_e5m2),
    _T.FLOAT8E5M2FNUZ: np.dtype(jnp.float8_e5m2fnuz),
    _T.UINT4: np.dtype(jnp.uint4),
    _T.INT4: np.dtype(jnp.int4),
    _T.FLOAT4E2M1: np.dtype(jnp.float4_e2m1fn),
    _T.FLOAT8E8M0: np.dtype(jnp.float8_e8m0fnu),
    _T.UINT2: np.dtype(jnp.uint2),
    _T.INT2: np.dtype(jnp.int2),
    # jax.numpy re-exports these from ml_dtypes (its type stubs omit them).
    _T.FLOAT6E2M3: np.dtype(ml_dtypes.float6_e2m3fn),
    _T.FLOAT6E3M2: np.dtype(ml_dtypes.float6_e3m2fn),
}
_BY_DTYPE = {dtype: t for t, dtype in JAX_DTYPES.items()}
#: Types that need ``jax_enable_x64``.
X64_TYPES = frozenset({_T.DOUBLE, _T.INT64, _T.UINT64})
#: Types jax.numpy names but XLA cannot hold an array of (measured on jax 0.10, XLA:CPU).
UNHOLDABLE_TYPES = frozenset({_T.FLOAT6E2M3, _T.FLOAT6E3M2})
_UINTS = {b: np.dtype(f"uint{b}") for b in (8, 16, 32, 64)}
#: The unsigned dtype of the same width as each sub-byte type, for bit casts.
_NARROW_UINTS = {2: np.dtype(jnp.uint2), 4: np.dtype(jnp.uint4)}
#: The 8-bit integer dtype each sub-byte integer type widens to, its values kept.
_WIDER = {
    _T.INT2: np.dtype(jnp.int8),
    _T.UINT2: _UINTS[8],
    _T.INT4: np.dtype(jnp.int8),
    _T.UINT4: _UINTS[8],
}


def _library_pairs() -> frozenset[tuple[int, int]]:
    """Pairs whose XLA conversion *is* the rule, bit for bit (``Adapter.library_pairs``).

    Sources of 16 bits or fewer: either the target holds every source value exactly (so the
    only rule is "the same value"), or both are integers (R8: keep the low bits, which is XLA's
    integer conversion).  Not the NaN of a float source, which XLA:GPU writes as its canonical
    NaN: R3's NaN is written by the engine (:meth:`JaxEngine.library`), never taken from XLA.
    A gather is up to ~8x slower than these conversions on XLA:CPU.  Left out on purpose
    (measured): sub-byte targets and FLOAT4E2M1 (XLA:CPU converts them no faster), float ->
    BOOL (XLA:CPU compares a BFLOAT16 subnormal equal to 0) and BFLOAT16 -> DOUBLE (XLA:CPU
    goes through a FLOAT subnormal and flushes it).  Wide sources: integers -> FLOAT/DOUBLE (one
    rounding to nearest even) and FLOAT -> FLOAT16 (checked on all 2**32 inputs on XLA:CPU:
    subnormal inputs flush to a zero of the right sign, which is their result).  FLOAT <->
    DOUBLE are not: XLA:CPU flushes.
    """
    ints = (_T.INT8, _T.UINT8, _T.INT16, _T.UINT16, _T.INT32, _T.UINT32, _T.INT64, _T.UINT64)
    sub_byte = (_T.INT4, _T.UINT4, _T.INT2, _T.UINT2)
    small_ints = (_T.BOOL, *sub_byte, _T.INT8, _T.UINT8, _T.INT16, _T.UINT16)
    float8 = (_T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2, _T.FLOAT8E5M2FNUZ)
    pairs = {(s, t) for s in small_ints for t in (*ints, _T.BOOL)}
    tiny_ints = (_T.BOOL, *sub_byte, _T.INT8, _T.UINT8)
    pairs |= {(s, t) for s in tiny_ints for t in (_T.FLOAT16, _T.BFLOAT16)}
    pairs |= {(s, t) for s in small_ints for t in (_T.FLOAT, _T.DOUBLE)}
    pairs |= {(_T.FLOAT16, _T.FLOAT), (_T.FLOAT16, _T.DOUBLE), (_T.BFLOAT16, _T.FLOAT)}
    pairs |= {(_T.FLOAT8E8M0, _T.FLOAT), (_T.FLOAT8E8M0, _T.DOUBLE)}
    pairs |= {(s, t) for s in float8 for t in (_T.FLOAT16, _T.BFLOAT16, _T.FLOAT, _T.DOUBLE)}
    wide_ints = (_T.INT32, _T.UINT32, _T.INT64, _T.UINT64)
    pairs |= {(s, t) for s in wide_ints for t in (_T.FLOAT, _T.DOUBLE)}
    pairs |= {(_T.FLOAT, _T.FLOAT16)}
    return frozenset((int(s), int(t)) for s, t in pairs)


#: See :func:`_library_pairs`.
LIBRARY_PAIRS = _library_pairs()


def x64_enabled() -> bool:
    """Whether JAX keeps 64-bit types now (``jax_enable_x64``, contexts included)."""
    return bool(jax.dtypes.canonicalize_dtype(np.float64) == np.dtype(np.float64))


def canonical_bool(x: Any) -> Any:
    """A bool array whose bytes are 0 or 1: R8 reads any nonzero byte as True.

    XLA keeps a bool's storage byte as it came (from a NumPy array, over DLPack ...), and its
    operations read a byte that is not 0 or 1 in different ways (measured, jax 0.10, XLA:CPU:
    the conversion to uint8 gives the byte itself, a select its lowest bit, ``x != False``
    the byte under ``jit``).  The byte as uint8 compared with 0 is a bool XLA reads one way.
    """
    return lax.ne(x.astype(_UINTS[8]), np.uint8(0))


def widened_sub_byte(x: Any, t: TypeSpec) -> Any:
    """An INT2/UINT2/INT4/UINT4 array ``x`` as int8/uint8 of the same values (one that is
    already 8-bit is returned as it is).

    Every read of a sub-byte integer array goes through here first.  XLA:GPU (jax 0.11.2,
    measured on an H200) loses the top bit of INT2/UINT2 values converted to INT4/UINT4/
    FLOAT4E2M1 (0x2 -> 0x0, 0x3 -> 0x1), eagerly and under ``jit``, while its widening to 8
    bits is right.  Under ``jit`` it also folds "widen, then narrow to 4 bits" (even through
    a gather) back into that direct conversion, so the 2-bit widening is kept a step of its
    own by an optimization barrier (one more pass over the bytes, for 2-bit sources only).
    The 4-bit types were right there; they are widened the same way, without the barrier.

    Parameters
    ----------
    x : jax.Array
        An array (or tracer) of ``t``'s dtype, or of :data:`_WIDER`'s dtype for ``t``.
    t : TypeSpec
        A sub-byte integer type.

    Returns
    -------
    jax.Array
        int8 (signed ``t``) or uint8 (unsigned ``t``), the same values.
    """
    wide = _WIDER[_T(t.code)]
    if x.dtype == wide:
        return x
    widened = x.astype(wide)
    return lax.optimization_barrier(widened) if t.bits == 2 else widened


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


class JaxAdapter(Adapter):
    """jax.Array and tracers, with the ml_dtypes types jax.numpy shares with NumPy."""

    packs = True

    name = "jax"
    xp = jnp
    library_pairs = LIBRARY_PAIRS
    flushes_subnormals = True

    # -- types -----------------------------------------------------------------------------
    def library_dtype(self, t: TypeSpec) -> np.dtype[Any] | None:
        code = _T(t.code)
        if code is _T.STRING or code in UNHOLDABLE_TYPES:
            return None
        if code in X64_TYPES and not x64_enabled():
            return None
        return JAX_DTYPES[code]

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            return None
        return _BY_DTYPE.get(dt)

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        code = _T(t.code)
        if code in X64_TYPES:
            narrow = {_T.DOUBLE: "FLOAT", _T.INT64: "INT32", _T.UINT64: "UINT32"}[code]
            return (
                f"JAX holds 64-bit types only with jax_enable_x64 on (now off, so {t.name} "
                "results would silently be 32-bit): set the environment variable "
                "JAX_ENABLE_X64=1, or call jax.config.update('jax_enable_x64', True) before "
                f"creating arrays; or cast to {narrow} instead"
            )
        if code in UNHOLDABLE_TYPES:
            name = JAX_DTYPES[code].name
            return (
                f"jax.numpy names {name}, but XLA cannot make an array of it; "
                "cast a NumPy array instead (ml_dtypes holds it): "
                f"castlike.cast(numpy.asarray(x), {t.name!r})"
            )
        return super().cannot_hold_hint(t)

    def _require(self, t: TypeSpec) -> np.dtype[Any]:
        dtype = self.library_dtype(t)
        if dtype is None:
            raise BackendTypeError(f"jax cannot hold {t.name}; {self.cannot_hold_hint(t)}")
        return dtype

    # -- primitives --------------------------------------------------------------------------
    def uint(self, bits: int) -> np.dtype[Any]:
        return _UINTS[bits]

    def holds_packed(self, t: TypeSpec) -> bool:
        # The FLOAT6 types XLA cannot hold are computed in uint8 shells (see from_bits).
        return self.library_dtype(t) is not None or _T(t.code) in UNHOLDABLE_TYPES

    def bits(self, x: Any, t: TypeSpec) -> Any:
        if _T(t.code) in UNHOLDABLE_TYPES:  # a shell: uint8 holding the bit patterns
            return x & ((1 << t.bits) - 1)
        if t.kind is Kind.BOOL:
            return canonical_bool(x).astype(_UINTS[8])
        if t.is_integer and t.is_sub_byte:
            # Widened first (see widened_sub_byte), then the low t.bits bits of the byte.
            wide = widened_sub_byte(x, t)
            u = wide if wide.dtype == _UINTS[8] else lax.bitcast_convert_type(wide, _UINTS[8])
            return u & np.uint8((1 << t.bits) - 1)
        if t.is_sub_byte:
            # A bit cast to the unsigned type of the same width, then a (zero-extending)
            # widening: the low t.bits bits of the float encoding.
            narrow = _NARROW_UINTS[t.bits]
            u = x if x.dtype == narrow else lax.bitcast_convert_type(x, narrow)
            return u.astype(_UINTS[8])
        storage = _UINTS[t.storage_bits]
        return x if x.dtype == storage else lax.bitcast_convert_type(x, storage)

    def from_bits(self, u: Any, t: TypeSpec) -> Any:
        """``u`` as ``t``; the types XLA cannot hold (FLOAT6*) stay uint8 "shells" of their
        bit patterns, which only a packed cast hands out (packed=True)."""
        if _T(t.code) in UNHOLDABLE_TYPES:
            return u.astype(_UINTS[8])
        dtype = JAX_DTYPES[_T(t.code)]
        if t.kind is Kind.BOOL:
            return u != 0
        if t.is_sub_byte:
            # uint8 -> uint4/uint2 keeps the low bits (measured); then reinterpret.
            narrow = u.astype(_NARROW_UINTS[t.bits])
            return narrow if dtype == narrow.dtype else lax.bitcast_convert_type(narrow, dtype)
        storage = _UINTS[t.storage_bits]
        if u.dtype != storage:
            u = u.astype(storage)
        return u if dtype == storage else lax.bitcast_convert_type(u, dtype)

    def astype(self, x: Any, t: TypeSpec) -> Any:
        return x.astype(JAX_DTYPES[_T(t.code)])

    def clz(self, u: Any) -> Any:
        return lax.clz(u)

    def device_table(self, table: np.ndarray, like: Any) -> Any:
        # The engine always runs traced (see JaxEngine.cast): the host table becomes a constant
        # of the compiled program, which XLA places with the computation, on any device.
        return jnp.asarray(table)

    def take(self, table: Any, index: Any) -> Any:
        # Indices are unsigned and below the table's size by construction (a source's bit
        # patterns, or the 2**14 FLOAT classes), so no bounds handling is needed.
        return table.at[index].get(mode="promise_in_bounds")

    # -- moving data ---------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray, like: Any = None) -> Any:
        array = np.asarray(array)
        if not array.dtype.isnative:  # XLA holds machine byte order only
            array = array.astype(array.dtype.newbyteorder("="))
        found = _BY_DTYPE.get(array.dtype)
        if found is None:
            raise BackendTypeError(f"jax: {array.dtype} is not a numeric ONNX type")
        self._require(TYPES[found])
        if like is not None and isinstance(like, jax.Array) and not _is_tracer(like):
            return jax.device_put(array, _placement_like(like, array.shape))
        return jnp.asarray(array)

    def like_on(self, device: str) -> jax.Array:
        """An empty array on ``device``: a platform ("cpu", "gpu", "cuda", "tpu") and an
        optional index among its devices ("cuda:1"; default the first)."""
        platform, _, index = device.partition(":")
        try:
            found = jax.devices(platform)
            placed = found[int(index or 0)]
        except (RuntimeError, ValueError, IndexError) as exc:
            raise ValueError(f"jax cannot place an array on {device!r}: {exc}") from None
        return jax.device_put(jnp.zeros((0,), jnp.uint8), placed)

    def to_numpy(self, x: Any) -> np.ndarray:
        if _is_tracer(x):
            raise BackendTypeError(
                "jax: this array is traced (inside jax.jit, jax.vmap, grad ...), so its values "
                "do not exist yet and cannot be brought to the host (as a STRING result "
                "needs); cast outside the transformation, or to a numeric type"
            )
        return np.asarray(x)

    def engine(self) -> Engine:
        return _ENGINE


def _placement_like(like: jax.Array, shape: tuple[int, ...]) -> Any:
    """Where a new array of ``shape`` goes to live "on ``like``'s device"."""
    sharding = like.sharding
    if tuple(like.shape) == tuple(shape):
        return sharding
    devices = sorted(like.devices(), key=lambda d: d.id)
    if len(devices) == 1:
        return devices[0]
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())  # replicated


# -- the engine -------------------------------------------------------------------------------


class JaxEngine(Engine):
    """The shared rules, always traced.

    Concrete arrays go through one ``jax.jit``-compiled function per (source, target,
    canonical mode): one fused kernel, lookup tables as constants, the input's device and
    sharding kept.  Tracers (inside the caller's ``jit``/``vmap``) are traced inline.  Every
    step is the shared one: XLA's unreliable float steps are declared on the adapter
    (``flushes_subnormals``), and the engine does them in integers.
    """

    def run(self, x: Any, route: Route) -> Any:
        if route.source.is_integer and route.source.is_sub_byte:
            # Before any step reads the source: XLA:GPU mishandles INT2/UINT2 arrays in other
            # conversions (see widened_sub_byte); every step takes the 8-bit values as they are.
            x = widened_sub_byte(x, route.source)
        return super().run(x, route)

    def pattern_table(self, x: Any, route: Route) -> Any:
        if route.source.kind is Kind.BOOL:  # XLA's own conversions read the byte
            x = canonical_bool(x)
        return super().pattern_table(x, route)

    def library(self, x: Any, route: Route) -> Any:
        if route.source.kind is Kind.BOOL:  # the same, for a declared pair (canonical_bool)
            x = canonical_bool(x)
        out = super().library(x, route)
        if _writes_small_float_nan(route):
            out = self.small_float_nan(x, out, route)
        return out

    def small_float_nan(self, x: Any, out: Any, route: Route) -> Any:
        """R3 for a NaN of a float of 8 bits or fewer into FLOAT16, BFLOAT16, FLOAT or DOUBLE:
        the target's quiet NaN with the input's sign bit, written over ``out`` (XLA's
        conversion) wherever ``x``'s bits are a NaN.

        XLA:GPU writes the canonical NaN (0x7FFF in FLOAT16/BFLOAT16, sign dropped) where
        XLA:CPU keeps the sign; which one runs is unknown while tracing, so this always runs
        (one fused select).  The NaN test is on the bits, not ``x != x``, so that it does not
        depend on how XLA compares these types either."""
        a, source, target = self.a, route.source, route.target
        b = a.bits(x, source)
        fmt = source.fmt
        magnitude = b & np.uint8(fmt.sign_mask - 1) if fmt.signed else b
        is_nan = magnitude >= np.uint8(_lowest_nan_magnitude(fmt))
        positive = nan_bits_for(target, route.mode, negative=False)
        u = a.where(is_nan, positive, a.int_bits(out, target))
        if fmt.signed:
            negative = nan_bits_for(target, route.mode, negative=True)
            u = a.where(is_nan & (b >= np.uint8(fmt.sign_mask)), negative, u)
        return a.from_bits(u, target)

    def cast(self, x: Any, plan: Plan) -> Any:
        # Options that cannot change this pair's result take their canonical values, so that
        # equivalent casts share one compiled program.
        plan = replace(plan, mode=canonical_mode(plan.mode, plan.source, plan.target))
        if _is_tracer(x):
            return super().cast(x, plan)
        key = (plan.source, plan.target, plan.mode)
        compiled = _COMPILED.get(key)
        if compiled is None:
            compiled = _COMPILED[key] = jax.jit(partial(super().cast, plan=plan))
        return compiled(x)


def _writes_small_float_nan(route: Route) -> bool:
    """Whether :meth:`JaxEngine.small_float_nan` repairs the route: XLA's conversion from a
    float of 8 bits or fewer with NaNs into an IEEE type.  FNUZ's NaN has its own repair (the
    route's ``fnuz_nan``); between IEEE types the route asks for R3's policy itself
    (``nan_policy``: :meth:`~castlike._engine.Engine.ieee_nan_policy`, on ``x != x`` and the
    bits, never on XLA's NaN)."""
    source, target = route.source, route.target
    return (
        route.family is Family.LIBRARY
        and source.is_float
        and source.code not in IEEE_NAN_TYPES
        and target.code in IEEE_NAN_TYPES
        and source.fmt.has_nan
        and source.fmt.special is not Special.FNUZ
    )


def _lowest_nan_magnitude(fmt: FloatFormat) -> int:
    """The smallest magnitude (bits below the sign) that is a NaN in a format of 8 bits or
    fewer; every larger one is a NaN too (the NaNs are the top of the encodings)."""
    top = (fmt.sign_mask or (1 << fmt.total_bits)) - 1  # the largest magnitude
    lowest = top
    while lowest > 0 and fmt.is_nan_bits(lowest - 1):
        lowest -= 1
    assert fmt.is_nan_bits(top), fmt  # FLOAT8E4M3FN, FLOAT8E5M2, FLOAT8E8M0
    return lowest


#: The jitted cast of each (source, target, canonical mode); JAX caches each per shape, dtype
#: and sharding.  Bounded by the number of such triples.
_COMPILED: dict[tuple[TypeSpec, TypeSpec, Mode], Any] = {}


#: The one JAX adapter (adapters hold no per-call state).
ADAPTER = JaxAdapter()
_ENGINE = JaxEngine(ADAPTER)

# Every numeric type has a jax.numpy dtype (some of them unholdable, see UNHOLDABLE_TYPES).
assert all(t in JAX_DTYPES for t in TYPES if t != _T.STRING)
