"""What ``torch.compile`` needs of the torch backend: custom operators and one repair of torch.

The shared engine runs under ``torch.compile`` (Dynamo traces it, Inductor compiles the graph).
torch 2.13 cannot have on that path:

* numpy, ``functools.lru_cache``, ``cached_property`` or Fraction arithmetic: lookup tables
  reach compiled graphs through the custom operator ``castlike::lookup_table``
  (:func:`device_table`), opaque to the compiler, so that their host-side construction is
  never traced;
* ``float8_e8m0fnu`` or the one-byte shell dtypes (``int4``, ``uint4``, ``int2``,
  ``uint2``) in an Inductor graph: their bytes cross compiled graphs through
  ``castlike::bytes_of`` / ``castlike::bytes_as`` (:data:`OPAQUE_TO_INDUCTOR`);
* castlike's native kernels: a CPU cast runs them through ``castlike::native_cast``, one
  opaque operator (faster than the graph of torch ops for most casts: ``docs/torch.rst``).
  :func:`run_native` is that call on a tensor's memory, which the eager path shares; a packed
  cast likewise runs :func:`run_packed` through ``castlike::packed_cast``.

And one repair of torch itself: :func:`_name_the_shell_dtypes` (see there).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from .. import _native
from .._native.routes import kernel_for
from ..spec.packing import Layout, layout_of
from ..spec.rules import Mode, Profile, RoundMode
from ..spec.tables import FLOAT32_CLASS_BITS, float32_class_table, pattern_table
from ..spec.types import TYPES, Kind, OnnxType, TypeSpec
from ._torch_dtypes import GATHER, TORCH_DTYPES, UINT

__all__ = [
    "OPAQUE_TO_INDUCTOR",
    "OperatorArgs",
    "bytes_as",
    "bytes_of",
    "clear_device_tables",
    "device_table",
    "native_cast",
    "native_cast_of_args",
    "native_enabled",
    "native_kernel",
    "operator_args",
    "packed_cast",
    "result_strides",
    "run_native",
    "run_packed",
    "run_packing_kernel",
]

_T = OnnxType

# -- lookup tables as device constants ---------------------------------------------------------

#: (table kind, source code, target code, mode, device) -> table tensor on that device.
_TABLES: dict[tuple[str, int, int, Mode, torch.device], torch.Tensor] = {}


def _host_table(kind: str, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """The NumPy table of one kind, widened so that every byte of the index has an entry.

    Sources held in a byte (BOOL and the sub-byte types) get a 256-entry table indexed by the
    whole byte, so that the gather needs no mask: the entry of byte ``b`` is that of its low
    ``bits`` bits (BOOL: any nonzero byte reads as True).
    """
    if kind == "class":
        return float32_class_table(target, mode)
    table = pattern_table(source, target, mode)
    if source.storage_bits == 8 and table.shape[0] < 256:
        index = np.arange(256)
        if source.kind is Kind.BOOL:
            index = (index != 0).astype(np.intp)
        else:
            index = index & ((1 << source.bits) - 1)
        table = table[index]
    return table


def device_table(
    kind: str, source: TypeSpec, target: TypeSpec, mode: Mode, like: torch.Tensor
) -> torch.Tensor:
    """A lookup table (kind "pattern" or "class") as a tensor on ``like``'s device.

    Eagerly: the cached tensor.  Under ``torch.compile``: the custom operator
    ``castlike::lookup_table``, opaque to the compiler, so that the host-side construction
    (numpy, lru_cache, the Fraction oracle) is never traced.  (``assume_constant_result`` would
    embed it as a constant, but torch 2.13 fails on a graph that calls it twice, and passes a
    :class:`Mode` built during tracing with its *default* field values, silently: hence plain
    values as arguments.)
    """
    args = (kind, *operator_args(source, target, mode))
    if torch.compiler.is_compiling():
        return torch.ops.castlike.lookup_table(like, *args)
    return _cached_table(*args, like.device)


def clear_device_tables() -> None:
    """Forget the tables moved to devices and the operator's kernels (after the spec's rules
    or the kernels changed)."""
    _TABLES.clear()
    _operator_run.cache_clear()


def _cached_table(
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
    device: torch.device,
) -> torch.Tensor:
    """A lookup table as a tensor on ``device``, built on the host once and cached.

    Entries are stored in a dtype ``index_select`` accepts (uint8 or a signed type of the
    target's storage width); the adapter's ``from_bits`` reinterprets them.
    """
    mode = _mode_of(saturate, round_mode, profile, inf_to_fnuz_is_nan)
    key = (kind, source_code, target_code, mode, device)
    found = _TABLES.get(key)
    if found is None:
        source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
        host = np.ascontiguousarray(_host_table(kind, source, target, mode))
        gather = GATHER[host.dtype.itemsize * 8]
        found = torch.from_numpy(host.copy()).view(gather).to(device)
        _TABLES[key] = found
    return found


@torch.library.custom_op("castlike::lookup_table", mutates_args=())
def _lookup_table(
    like: torch.Tensor,
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    """The cached table on ``like``'s device, as a copy (the compiled graph owns its outputs
    and may reuse their memory; a copy of at most 256 KiB keeps the cache intact)."""
    key = (kind, source_code, target_code, saturate, round_mode, profile, inf_to_fnuz_is_nan)
    return _cached_table(*key, like.device).clone()


@_lookup_table.register_fake
def _lookup_table_fake(
    like: torch.Tensor,
    kind: str,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
    if kind == "class":
        size = 1 << (32 - FLOAT32_CLASS_BITS + 1)
    else:
        size = 1 << max(source.storage_bits, source.bits)
    return like.new_empty((size,), dtype=GATHER[target.storage_bits])


# -- dtypes Inductor cannot compile --------------------------------------------------------------

#: Types whose torch dtype Inductor (torch 2.13, CPU) cannot compile: it has no C++ type for
#: ``float8_e8m0fnu`` and the shell dtypes, and cannot lower a ``view`` to or from the latter.
#: Under ``torch.compile`` their bytes cross the graph through the two opaque operators below
#: (a copy of one byte per element), and nothing else touches them.
OPAQUE_TO_INDUCTOR = frozenset({_T.FLOAT8E8M0, _T.INT4, _T.UINT4, _T.INT2, _T.UINT2})


def bytes_of(x: torch.Tensor, t: TypeSpec) -> torch.Tensor | None:
    """Under ``torch.compile``, the bytes of ``x`` (type ``t`` in :data:`OPAQUE_TO_INDUCTOR`) as
    a uint8 copy by an opaque operator; None where a plain view does."""
    if t.code in OPAQUE_TO_INDUCTOR and torch.compiler.is_compiling():
        return torch.ops.castlike.bytes_of(x)
    return None


def bytes_as(u: torch.Tensor, t: TypeSpec) -> torch.Tensor | None:
    """Under ``torch.compile``, a uint8 tensor's bytes as type ``t`` (in
    :data:`OPAQUE_TO_INDUCTOR`), a copy by an opaque operator; None where a plain view does."""
    if t.code in OPAQUE_TO_INDUCTOR and torch.compiler.is_compiling():
        return torch.ops.castlike.bytes_as(u.view(torch.uint8), t.code)
    return None


@torch.library.custom_op("castlike::bytes_of", mutates_args=())
def _bytes_of(x: torch.Tensor) -> torch.Tensor:
    """The bytes of a one-byte tensor, as a uint8 copy."""
    return x.view(torch.uint8).clone()


@_bytes_of.register_fake
def _bytes_of_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, dtype=torch.uint8)


@torch.library.custom_op("castlike::bytes_as", mutates_args=())
def _bytes_as(u: torch.Tensor, code: int) -> torch.Tensor:
    """A uint8 tensor's bytes as the torch dtype of the ONNX type ``code``, as a copy."""
    return u.clone().view(TORCH_DTYPES[_T(code)])


@_bytes_as.register_fake
def _bytes_as_fake(u: torch.Tensor, code: int) -> torch.Tensor:
    return torch.empty_like(u, dtype=TORCH_DTYPES[_T(code)])


def _name_the_shell_dtypes() -> None:
    """Work around torch 2.13: the table of dtype abbreviations that the FX graph printer
    uses lacks the shell dtypes, and AOTAutograd prints every graph it caches, so compiling
    any function whose graph holds an ``int4`` tensor fails with ``KeyError: torch.int4``.
    Adding the missing entries (each dtype's own ``abbr``) changes nothing else."""
    try:
        from torch.utils._dtype_abbrs import dtype_abbrs
    except ImportError:  # another torch version: nothing to repair
        return
    for name in ("int1", "int2", "int3", "int4", "int5", "int6", "int7"):
        for dtype in (getattr(torch, name, None), getattr(torch, "u" + name, None)):
            if isinstance(dtype, torch.dtype) and dtype not in dtype_abbrs:
                dtype_abbrs[dtype] = getattr(dtype, "abbr", str(dtype).removeprefix("torch."))


_name_the_shell_dtypes()


# -- the native kernels on CPU tensors ----------------------------------------------------------


def _switch_is_off(name: str) -> Callable[[], bool]:
    """A function telling whether the environment variable ``name`` is now ``"0"``.

    The switch is read on every cast, so that setting it at run time takes effect (the tests
    do).  ``os.environ.get`` of an unset variable costs about 0.6 µs (its ``__getitem__``
    raises and catches a KeyError), a tenth of a repeat call; CPython's ``os.environ`` keeps
    its contents in an encoded dict (``_data``, which every write to ``os.environ`` updates),
    and a lookup there costs 0.04 µs.  Where that dict is not there (another Python), the
    plain read, as also once ``os.environ`` itself is replaced."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    encodekey = getattr(environ, "encodekey", None)
    encodevalue = getattr(environ, "encodevalue", None)
    if isinstance(data, dict) and callable(encodekey) and callable(encodevalue):
        key, off = encodekey(name), encodevalue("0")

        def is_off() -> bool:
            if os.environ is environ:
                return data.get(key) == off
            return os.environ.get(name) == "0"

        return is_off
    return lambda: os.environ.get(name) == "0"


#: ``CASTLIKE_TORCH_NATIVE=0``, read now.
_torch_native_off = _switch_is_off("CASTLIKE_TORCH_NATIVE")


def native_enabled() -> bool:
    """Whether CPU tensors go through the native kernels (``CASTLIKE_TORCH_NATIVE=0``: no)."""
    return _native.module() is not None and not _torch_native_off()


def native_kernel(source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    """The NumPy backend's native kernel for this cast, or None (disabled, or not covered)."""
    module = _native.module()
    if module is None or not native_enabled():
        return None
    return kernel_for(module, source, target, mode)


def result_strides(x: torch.Tensor) -> tuple[int, ...]:
    """The strides of a native cast's result: those of ``x`` when its elements fill their
    memory without gaps or overlaps (contiguous, channels_last, channels_last_3d, any
    permutation of the dimensions: the layout is kept, as torch's ``.to`` keeps it), else
    row-major (a sliced or expanded ``x``).  The test of density is torch's own
    (``is_non_overlapping_and_dense``), under which an empty tensor is dense too.

    The real operator and its fake implementation both lay out their result by this function,
    so that Inductor's compiled graph and the eager call agree on the layout (and the kernel,
    which works on memory in order, on which element is which).
    """
    shape, strides = x.shape, x.stride()
    dense = True
    expected = 1
    # Dimensions of size 1 can have any stride: they neither leave gaps nor overlap.
    for d in sorted((d for d in range(x.dim()) if shape[d] != 1), key=lambda d: strides[d]):
        if strides[d] != expected:
            dense = False
            break
        expected *= shape[d]
    if dense:
        return tuple(strides)
    row_major: list[int] = []
    expected = 1
    for size in reversed(shape):
        row_major.append(expected)
        expected *= max(size, 1)
    return tuple(reversed(row_major))


def _memory(t: torch.Tensor) -> np.ndarray:
    """The elements of a tensor laid out without gaps or overlaps, in memory order, as a
    one-dimensional NumPy view (no copy)."""
    return t.as_strided((t.numel(),), (1,)).numpy()


def run_native(
    kernel: Any, x: torch.Tensor, source: TypeSpec, dtype: torch.dtype, target: TypeSpec
) -> torch.Tensor:
    """Run a native kernel on a CPU tensor's memory (a zero-copy NumPy view of its bytes) into
    a tensor torch allocates with :func:`result_strides`.  The kernel maps memory to memory,
    element by element, so an input with the result's layout is read in place; any other (a
    sliced or expanded one) is made contiguous first (one copy, of its same-width unsigned
    view: torch has no copy kernel for the shell dtypes)."""
    return run_on_bits(kernel, x, UINT[source.storage_bits], dtype, UINT[target.storage_bits])


def _numpy_holds(dtype: torch.dtype) -> bool:
    """Whether ``.numpy()`` views a tensor of ``dtype`` as it is."""
    try:
        torch.empty(0, dtype=dtype).numpy()
    except TypeError:  # "Got unsupported ScalarType ..."
        return False
    return True


#: The torch dtypes whose tensors ``.numpy()`` views as they are (the others, bfloat16 and
#: the float8 and sub-byte dtypes, through their same-width unsigned bits).
_NUMPY_HOLDS = frozenset(filter(_numpy_holds, TORCH_DTYPES.values()))


def run_on_bits(
    kernel: Any, x: torch.Tensor, in_bits: torch.dtype, dtype: torch.dtype, out_bits: torch.dtype
) -> torch.Tensor:
    """:func:`run_native` with the same-width unsigned dtypes of the source (``in_bits``) and
    of the result (``out_bits``) given: what the repeat-call path runs."""
    threads = _native.get_num_threads()
    if x.is_contiguous():
        # The usual case, in as few torch calls as there can be (a repeat call's cost): a
        # contiguous result like x's (.to's layout for it), and NumPy views of both, of the
        # same-width unsigned bits only where NumPy cannot hold the dtype itself.  The kernel
        # reads bytes, whatever the NumPy dtype says.
        out = torch.empty_like(x, dtype=dtype)
        source = x.numpy() if x.dtype in _NUMPY_HOLDS else x.view(in_bits).numpy()
        result = out.numpy() if dtype in _NUMPY_HOLDS else out.view(out_bits).numpy()
        _native.advise_huge_pages(result)
        kernel(source, result, threads)
        return out
    bits = x.view(in_bits)
    strides = result_strides(x)
    if bits.stride() != strides:
        bits = bits.contiguous()  # row-major, as result_strides says for such an x
    out = torch.empty_strided(x.shape, strides, dtype=dtype)
    result = _memory(out.view(out_bits))
    _native.advise_huge_pages(result)
    kernel(_memory(bits), result, threads)
    return out


#: A cast as the plain values castlike's operators take: source and target codes, then the
#: mode's saturate, round_mode, profile and inf_to_fnuz_is_nan.
OperatorArgs = tuple[int, int, bool, str, str, bool]


def operator_args(source: TypeSpec, target: TypeSpec, mode: Mode) -> OperatorArgs:
    """A cast as :data:`OperatorArgs` (Dynamo passes a :class:`Mode` built while it traces
    with its default field values, see :func:`device_table`)."""
    return (
        source.code,
        target.code,
        mode.saturate,
        mode.round_mode.value,
        mode.profile.value,
        mode.inf_to_fnuz_is_nan,
    )


def _mode_of(saturate: bool, round_mode: str, profile: str, inf_to_fnuz_is_nan: bool) -> Mode:
    """The :class:`Mode` that :func:`operator_args` gave as plain values."""
    return Mode(saturate, RoundMode(round_mode), Profile(profile), inf_to_fnuz_is_nan)


def native_cast(x: torch.Tensor, source: TypeSpec, target: TypeSpec, mode: Mode) -> torch.Tensor:
    """Under ``torch.compile``: the native kernel as the opaque ``castlike::native_cast``."""
    return native_cast_of_args(x, operator_args(source, target, mode.effective_for(target)))


def native_cast_of_args(x: torch.Tensor, args: OperatorArgs) -> torch.Tensor:
    """:func:`native_cast` by the operator's own arguments (the mode's options effective for
    the target), with the bytes of a type Inductor cannot hold viewed as that type."""
    result = torch.ops.castlike.native_cast(x, *args)
    target_code = args[1]
    # The int itself (OnnxType is an IntEnum): torch 2.11's Dynamo cannot guard on an enum
    # member made from a constant (NotImplementedError in make_guard).
    if target_code in OPAQUE_TO_INDUCTOR:
        return torch.ops.castlike.bytes_as(result, target_code)
    return result


#: castlike's operators registered with the dispatcher directly (the others use
#: ``torch.library.custom_op``).
_LIBRARY = torch.library.Library("castlike", "FRAGMENT")
_LIBRARY.define(
    "native_cast(Tensor x, int source_code, int target_code, bool saturate, str round_mode, "
    "str profile, bool inf_to_fnuz_is_nan) -> Tensor"
)


def _native_cast(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    """A cast of a CPU tensor by the native kernel, as one opaque operator of a compiled graph.
    The result has the target's dtype, except for the types Inductor cannot hold, which come
    back as their bytes (uint8) for ``castlike::bytes_as``."""
    module = _native.module()
    assert module is not None, "traced only where native_enabled()"
    run = _operator_run(
        module, (source_code, target_code, saturate, round_mode, profile, inf_to_fnuz_is_nan)
    )
    return run(x)


class _OperatorCast(NamedTuple):
    source: TypeSpec
    target: TypeSpec
    mode: Mode
    in_bits: torch.dtype
    dtype: torch.dtype
    out_bits: torch.dtype


@functools.lru_cache(maxsize=1024)
def _operator_cast(args: OperatorArgs) -> _OperatorCast:
    """The operator's arguments as the cast and the dtypes they name: fixed facts of the types,
    remembered (3.5 of the operator call's 11 us at 1,000 elements).  The kernel is
    remembered by :func:`_operator_run`, which the caches' clearing forgets."""
    source, target = TYPES[_T(args[0])], TYPES[_T(args[1])]
    mode = _mode_of(*args[2:])
    in_bits, out_bits = UINT[source.storage_bits], UINT[target.storage_bits]
    return _OperatorCast(source, target, mode, in_bits, _native_cast_dtype(target), out_bits)


@functools.lru_cache(maxsize=1024)
def _operator_run(module: Any, args: OperatorArgs) -> Callable[[torch.Tensor], Any]:
    """The operator's run with the kernel of ``module`` (the kernel level in force): one
    lookup per call, where :func:`kernel_for`'s own took 1.9 of the operator's 9 us at 1,000
    elements.  A plain contiguous tensor in one C call (the kernel's ``repeat_tensor``, as the
    eager repeat path), any other through :func:`run_on_bits`: a compiled graph runs the
    operator's Python right after the kernel's pass over memory, with its own data out of the
    caches, where each layer costs several times its warm time.  Forgotten with the device
    tables (:func:`clear_device_tables`), which :func:`castlike.testing.clear_caches` clears
    after a rule or a kernel was replaced."""
    cast = _operator_cast(args)
    kernel = kernel_for(module, cast.source, cast.target, cast.mode)

    def declined(x: torch.Tensor) -> torch.Tensor:
        return run_on_bits(kernel, x, cast.in_bits, cast.dtype, cast.out_bits)

    return functools.partial(kernel.repeat_tensor, cast.dtype, declined)


# The CPU kernel straight to the dispatcher: through ``torch.library.custom_op``'s wrapper (its
# autograd and argument handling) a call cost about 8 us more (measured, one thread: 19 -> 12 us
# eagerly at 1,000 elements, compiled 123 -> 111 us at 10**6).  Callers pass detached tensors:
# a cast has no gradient.
_LIBRARY.impl("native_cast", _native_cast, "CPU")


def _native_cast_dtype(target: TypeSpec) -> torch.dtype:
    if target.code in OPAQUE_TO_INDUCTOR:
        return torch.uint8
    return shell_dtype(target)


def shell_dtype(t: TypeSpec) -> torch.dtype:
    """The dtype holding ``t`` while a cast computes it: its torch dtype, or ``uint8`` (its
    bit patterns) for the sub-byte types torch has none for (FLOAT4E2M1, FLOAT6*)."""
    found = TORCH_DTYPES.get(_T(t.code))
    return torch.uint8 if found is None and t.is_sub_byte else TORCH_DTYPES[_T(t.code)]


# -- packed casts ------------------------------------------------------------------------------


def run_packed(
    x: torch.Tensor,
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    source_row: int | None,
    pack: bool,
) -> torch.Tensor | None:
    """A packed cast of a CPU tensor by the native kernels' one pass (``Kernel.packed`` /
    ``Kernel.unpacked``) on the tensors' memory; None where no kernel covers the cast.

    ``x`` is of ``source``, or with ``source_row`` its packed bytes (uint8, rows of
    ``source_row`` elements); with ``pack`` the result is packed bytes (uint8), else of
    ``target`` (its :func:`shell_dtype`)."""
    kernel = native_kernel(source, target, mode)
    if kernel is None:
        return None
    threads = _native.get_num_threads()
    if source_row is not None:
        source_layout = layout_of(source)
        assert source_layout is not None
        out = torch.empty((*x.shape[:-1], source_row), dtype=shell_dtype(target))
        if out.numel():
            data = x.contiguous().numpy()
            unpacked = out.view(UINT[target.storage_bits]).numpy()
            _native.advise_huge_pages(unpacked)
            kernel.unpacked(data, unpacked, source_row, source_layout.bits, threads)
        if not pack:
            return out
        x, source = out, target
        kernel = native_kernel(target, target, mode)  # the bits as they are
    layout = layout_of(target)
    assert layout is not None
    return run_packing_kernel(kernel, x, UINT[source.storage_bits], layout)


def run_packing_kernel(
    kernel: Any, x: torch.Tensor, in_bits: torch.dtype, layout: Layout
) -> torch.Tensor:
    """Run a native kernel on a CPU tensor's memory (viewed as ``in_bits``, the source's
    same-width unsigned dtype) into new packed rows (uint8)."""
    bits = x.view(in_bits)
    if not bits.is_contiguous():
        bits = bits.contiguous()
    n = x.shape[-1]
    out = torch.empty((*x.shape[:-1], layout.packed_length(n)), dtype=torch.uint8)
    if bits.numel():
        packed = out.numpy()
        _native.advise_huge_pages(packed)
        kernel.packed(bits.numpy(), packed, n, layout.bits, _native.get_num_threads())
    return out


def packed_cast(
    x: torch.Tensor,
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    source_row: int | None,
    pack: bool,
) -> torch.Tensor:
    """Under ``torch.compile``: :func:`run_packed` as the opaque ``castlike::packed_cast``
    (call it where :func:`native_kernel` covers the cast)."""
    m = mode.effective_for(target)
    bits = x.view(UINT[source.storage_bits]) if source_row is None and source.is_sub_byte else x
    result = torch.ops.castlike.packed_cast(
        bits,
        source.code,
        target.code,
        m.saturate,
        m.round_mode.value,
        m.profile.value,
        m.inf_to_fnuz_is_nan,
        -1 if source_row is None else source_row,
        pack,
    )
    if not pack and target.code in OPAQUE_TO_INDUCTOR:
        return torch.ops.castlike.bytes_as(result, target.code)
    return result


@torch.library.custom_op("castlike::packed_cast", mutates_args=())
def _packed_cast(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
    source_row: int,
    pack: bool,
) -> torch.Tensor:
    """A packed cast of a CPU tensor by the native kernels, as one opaque operator of a
    compiled graph (``source_row`` -1: ``x`` is not packed).  Unpacked results of the types
    Inductor cannot hold come back as their bytes (uint8) for ``castlike::bytes_as``."""
    source, target = TYPES[_T(source_code)], TYPES[_T(target_code)]
    mode = _mode_of(saturate, round_mode, profile, inf_to_fnuz_is_nan)
    if source.is_sub_byte and source_row < 0:
        x = x.view(shell_dtype(source)) if source.code not in OPAQUE_TO_INDUCTOR else x
    out = run_packed(x, source, target, mode, None if source_row < 0 else source_row, pack)
    assert out is not None, "traced only where native_kernel() covers the cast"
    return out.view(torch.uint8) if not pack and target.is_sub_byte else out


@_packed_cast.register_fake
def _packed_cast_fake(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
    source_row: int,
    pack: bool,
) -> torch.Tensor:
    target = TYPES[_T(target_code)]
    n = x.shape[-1] if source_row < 0 else source_row
    if pack:
        layout = layout_of(target)
        assert layout is not None
        return x.new_empty((*x.shape[:-1], layout.packed_length(n)), dtype=torch.uint8)
    dtype = torch.uint8 if target.is_sub_byte else shell_dtype(target)
    return x.new_empty((*x.shape[:-1], n), dtype=dtype)


@torch.library.register_fake("castlike::native_cast")
def _native_cast_fake(
    x: torch.Tensor,
    source_code: int,
    target_code: int,
    saturate: bool,
    round_mode: str,
    profile: str,
    inf_to_fnuz_is_nan: bool,
) -> torch.Tensor:
    # The layout of the real operator's result (run_native): Inductor asserts that they agree.
    dtype = _native_cast_dtype(TYPES[_T(target_code)])
    return x.new_empty_strided(x.shape, result_strides(x), dtype=dtype)
