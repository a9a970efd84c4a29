"""The public entry points: resolve the namespace, the types and the plan, then run the rules."""

from __future__ import annotations

import difflib
import sys
from dataclasses import replace
from typing import Any

import array_api_compat as aac
import numpy as np

from ._fastpath import (
    cached_cast,
    cached_default_cast,
    like_target,
    remember,
    set_default_options,
)
from .backends import (
    Adapter,
    adapter_for,
    moves_strings,
    onnx_type_of_dtype,
    packed_type_of_dtype,
)
from .errors import (
    BackendTypeError,
    CastTypeError,
    CastValueError,
    InvalidInputError,
    UnknownTypeError,
    UnsupportedTypeError,
    shown_value,
)
from .spec.opsets import Op, version_for
from .spec.packing import LAYOUTS, layout_of
from .spec.plan import Plan, check_opset, plain_int, plain_str, resolve
from .spec.types import COMPLEX_CODES, TYPES, TYPES_BY_NAME, OnnxType, TypeSpec

__all__ = ["can_cast", "cast", "cast_like", "onnx_type", "resolve_type", "unpack"]

_UNSUPPORTED_NAMES = {"COMPLEX64", "COMPLEX128", "UNDEFINED"}
_COMPLEX_MESSAGE = "casting from/to complex is not supported"
#: The types that pack, for messages.
_PACKED_NAMES = ", ".join(t.name for t in LAYOUTS)


#: Per type: whether its objects are arrays, and their Array-API namespace.  array-api-compat
#: answers both from the type alone; plain dicts here because its lookups read ``sys.modules``,
#: on which torch.compile would then guard entry by entry (thousands of guards per call).
_ARRAY_TYPES: dict[type, bool] = {}
_NAMESPACES: dict[type, Any] = {}


def _is_array(obj: Any) -> bool:
    if isinstance(obj, type):  # np.float32 and friends are dtype-likes, not arrays
        return False
    found = _ARRAY_TYPES.get(type(obj))
    if found is None:
        found = bool(aac.is_array_api_obj(obj) or isinstance(obj, np.generic))
        _ARRAY_TYPES[type(obj)] = found
    return found


def _source_type(adapter: Adapter, array: Any) -> TypeSpec:
    """The ONNX type of ``array``: asked of its own adapter first (under torch.compile, the
    general lookup's scan of the loaded libraries makes Dynamo guard on all of sys.modules)."""
    if _holds_strings(array):
        return TYPES[OnnxType.STRING]
    found = adapter.onnx_type_of(array.dtype)
    if found is not None:
        return TYPES[found]
    try:
        return resolve_type(array)
    except CastTypeError:
        raise _no_source_type(array.dtype) from None


def _no_source_type(dtype: Any) -> CastTypeError:
    """The error for an input whose dtype is no ONNX type: it names the input's dtype as the
    problem (the target is not), and what to cast instead."""
    kind = getattr(dtype, "kind", "")
    if _is_complex_dtype(dtype):
        return UnsupportedTypeError(
            f"x holds {dtype} values, and casting from complex is not supported (ONNX's complex "
            "types have no Cast rules); cast x.real or x.imag"
        )
    if kind in ("M", "m"):
        what = "datetime64" if kind == "M" else "timedelta64"
        return UnsupportedTypeError(
            f"x holds {what} values ({dtype}), and no ONNX type holds dates or durations, so "
            "castlike cannot cast from them; to cast their integer ticks (NaT is INT64's "
            "minimum), pass x.astype(numpy.int64)"
        )
    return UnknownTypeError(
        f"x holds {shown_value(dtype)} values, which no ONNX type holds, so castlike cannot "
        f"cast from them; {_ACCEPTED}"
    )


def _namespace(array: Any) -> Any:
    """``aac.array_namespace(array)``, cached by type (see :data:`_NAMESPACES`).

    NumPy arrays get NumPy itself: NumPy 2 is an Array-API namespace, and importing
    array-api-compat's NumPy wrapper (which imports numpy.f2py and numpy.testing) costs about
    100 ms, most of a first cast.
    """
    xp = _NAMESPACES.get(type(array))
    if xp is None:
        numpy_array = isinstance(array, (np.ndarray, np.generic))
        xp = np if numpy_array else aac.array_namespace(array)
        _NAMESPACES[type(array)] = xp
    return xp


def resolve_type(obj: Any) -> TypeSpec:
    """The ONNX type named by ``obj`` (R1): a name, a code, a dtype of any library, an array.

    Raises
    ------
    UnknownTypeError
        ``obj`` names no ONNX type castlike knows.
    UnsupportedTypeError
        ``obj`` is COMPLEX64, COMPLEX128 or UNDEFINED.
    """
    if isinstance(obj, TypeSpec):
        return obj
    if isinstance(obj, OnnxType):
        return TYPES[obj]
    if obj is None:  # np.dtype(None) is float64: None must not silently mean DOUBLE
        raise UnknownTypeError(
            "None names no type; pass an ONNX name (e.g. 'FLOAT'), a TensorProto code "
            "(a Python int), a dtype or an array"
        )
    if isinstance(obj, bool):
        raise UnknownTypeError(f"{obj!r} is not a type; pass an ONNX name, a code or a dtype")
    # Codes are Python ints only: a NumPy integer scalar is an array, whose dtype names the
    # type (np.int32(3) is INT32, not code 3 = INT8).
    if isinstance(obj, int):
        code = plain_int(obj)  # whatever a subclass does
        if code in COMPLEX_CODES:
            raise UnsupportedTypeError(f"{_COMPLEX_MESSAGE} ({COMPLEX_CODES[code]}, code {code})")
        if code == 0:
            raise UnsupportedTypeError("type code 0 is UNDEFINED; it cannot be cast to or from")
        try:
            return TYPES[OnnxType(code)]
        except ValueError:
            raise UnknownTypeError(f"{code} is not an ONNX TensorProto type code") from None
    if isinstance(obj, str):
        obj = plain_str(obj)  # whatever a subclass does
        name = obj.strip().upper()
        if name in TYPES_BY_NAME:
            return TYPES_BY_NAME[name]
        if name in _UNSUPPORTED_NAMES:
            if name.startswith("COMPLEX"):
                raise UnsupportedTypeError(f"{_COMPLEX_MESSAGE} ({name})")
            raise UnsupportedTypeError("UNDEFINED cannot be cast to or from")
        close = difflib.get_close_matches(name, list(TYPES_BY_NAME), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownTypeError(f"unknown ONNX type name {obj!r}{hint}")
    if isinstance(obj, (bytes, bytearray)):  # np.dtype(b"f4") is float32: names are str only
        raise UnknownTypeError(
            f"{shown_value(obj)} is bytes, not a type name; pass the ONNX name as a str "
            "(e.g. 'FLOAT')"
        )
    if _is_array(obj):
        return resolve_type(obj.dtype) if not _holds_strings(obj) else TYPES[OnnxType.STRING]
    if isinstance(obj, type) and not _is_scalar_type(obj):
        # np.dtype() takes any class as the object dtype: dict would otherwise mean STRING.
        raise UnknownTypeError(
            f"the class {obj.__module__}.{obj.__qualname__} is not a dtype; pass an ONNX name, "
            "a TensorProto code, or a dtype of numpy/ml_dtypes, torch or jax"
        )
    try:
        found = onnx_type_of_dtype(obj)
    except Exception:  # a library's dtype parser refused it (or its own hash/eq raised)
        found = None
    if found is not None:
        return TYPES[found]
    if _is_complex_dtype(obj):
        raise UnsupportedTypeError(f"{_COMPLEX_MESSAGE} (dtype {shown_value(obj)})")
    raise UnknownTypeError(
        f"{shown_value(obj)} is not an ONNX type: pass an ONNX name (e.g. 'FLOAT8E4M3FN'), "
        "a TensorProto code, or a dtype of numpy/ml_dtypes, torch or jax"
    )


#: Python classes that name a dtype (np.dtype(float) is float64); NumPy's scalar types, and
#: the scalar types of other libraries (which carry a ``dtype``), name theirs too.
_PYTHON_SCALAR_TYPES = (bool, int, float, complex, str, bytes, object)


def _is_scalar_type(cls: type) -> bool:
    return (
        cls in _PYTHON_SCALAR_TYPES
        or issubclass(cls, np.generic)
        or isinstance(getattr(cls, "dtype", None), np.dtype)
    )


def _holds_strings(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "USOT"


def _is_complex_dtype(obj: Any) -> bool:
    try:
        dt = np.dtype(obj)
        # ml_dtypes' bcomplex32 has kind "V" (its complex32 kind "c" since 0.7).
        return dt.kind == "c" or "complex" in dt.name
    except Exception:  # np.dtype() raises many kinds of errors for things that are no dtype
        try:
            return "complex" in str(obj)
        except Exception:
            return False


def onnx_type(dtype_or_array: Any) -> OnnxType:
    """The :class:`OnnxType` of a dtype (any library), an array, a name or a code.

    Examples
    --------
    >>> import numpy as np, ml_dtypes, castlike
    >>> castlike.onnx_type(np.float32)
    <OnnxType.FLOAT: 1>
    >>> castlike.onnx_type(np.zeros(3, ml_dtypes.float8_e4m3fn))
    <OnnxType.FLOAT8E4M3FN: 17>
    """
    return OnnxType(resolve_type(dtype_or_array).code)


def can_cast(src: Any, dst: Any, *, op: str = "Cast", opset: int | None = None) -> bool:
    """Whether ``op`` at ``opset`` allows casting ``src`` to ``dst`` (types as for :func:`cast`).

    Parameters
    ----------
    src, dst
        Types: ONNX names, codes, dtypes or arrays.
    op : {"Cast", "CastLike"}
        The operator whose type constraints apply.
    opset : int, optional
        The opset; None means the latest definitions (for CastLike: those of the latest Cast).

    Returns
    -------
    bool
        False where the version lacks either type or the operator does not exist at ``opset``.

    Raises
    ------
    OpsetError
        ``opset`` is not an opset :func:`cast` accepts (a Python int from 1 to the latest
        opset, or None): the same check as :func:`cast`, so that the two never disagree.
    CastTypeError
        ``src`` or ``dst`` names no type, or ``op`` is neither operator.
    """
    operator = _parse_op(op)
    check_opset(opset)
    if operator is Op.CAST_LIKE and opset is None:
        operator = Op.CAST
    version = version_for(operator, opset)
    if version is None:
        return False
    s, d = resolve_type(src), resolve_type(dst)
    return OnnxType(s.code) in version.types and OnnxType(d.code) in version.types


def _parse_op(op: str | Op) -> Op:
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        name = plain_str(op).lower()  # str's own methods, whatever a subclass does
        for candidate in Op:
            if name == candidate.value.lower():
                return candidate
    raise CastTypeError(f"unknown operator {shown_value(op)}; expected 'Cast' or 'CastLike'")


_ACCEPTED = (
    "castlike casts arrays (NumPy, PyTorch, JAX, Dask, and any Array-API library "
    "array-api-compat knows), NumPy scalars, and Python numbers, "
    "strings or bytes, or rectangular (nested) lists and tuples of them"
)


def _as_array(x: Any) -> tuple[Any, bool]:
    """``x`` as an array of its library; Python scalars and lists become NumPy (R10).

    Returns the array and whether the caller passed a NumPy scalar (to hand one back).

    Raises
    ------
    InvalidInputError
        ``x`` is not an array and NumPy cannot make a numeric or string array of it (None, a
        dict, a class, a ragged list, a Python int beyond INT64/UINT64 ...).
    """
    if isinstance(x, np.generic):
        return np.asarray(x), True
    if _is_array(x):
        return x, False
    if isinstance(x, type):
        raise InvalidInputError(
            f"x is the class {x.__module__}.{x.__qualname__}, not an array (to cast *to* that "
            f"type, pass it as the target); {_ACCEPTED}"
        )
    try:
        array = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInputError(
            f"x ({_describe(x)}) cannot be made an array: {str(exc).rstrip('.')}; {_ACCEPTED}"
        ) from None
    if array.dtype.kind == "O":
        # NumPy makes an object array of anything; castlike reads object arrays as strings
        # (R9), which Python objects castlike was never given as strings are not.
        _check_python_objects(array)
    elif array.dtype.kind == "f" and isinstance(x, (list, tuple)):
        _check_ints_held_exactly(x, array)
    return array, False


def _describe(x: Any) -> str:
    """``x`` for an error message: its type and a short repr."""
    return f"a {type(x).__module__}.{type(x).__qualname__}: {shown_value(x)}"


#: The integers NumPy holds (INT64's minimum to UINT64's maximum).
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1


def _check_python_objects(array: np.ndarray) -> None:
    """Refuse a Python input that became an object array unless it holds only strings.

    The first element that is neither a number nor a string is named; failing that, the
    first integer beyond INT64/UINT64; failing that, the mix of numbers and strings."""
    items = array.reshape(-1).tolist()

    def where(index: int) -> str:
        return "" if array.ndim == 0 else f" at index {_unravel(index, array.shape)}"

    numbers = (int, float, complex)
    for index, item in enumerate(items):
        if not isinstance(item, (str, bytes, *numbers)):
            what = f"is {_describe(item)}" if array.ndim == 0 else f"holds {_describe(item)}"
            raise InvalidInputError(f"x {what}{where(index)}; {_ACCEPTED}")
    for index, item in enumerate(items):
        if isinstance(item, int) and not _INT_MIN <= item <= _UINT_MAX:
            raise InvalidInputError(
                f"the Python int {item}{where(index)} is beyond INT64 and UINT64 "
                f"({_INT_MIN} to {_UINT_MAX}), so it has no ONNX source type; to read it "
                f"exactly, pass it as a string (castlike.cast({str(item)!r}, ...) reads the "
                "decimal exactly, R9), or pass a float"
            )
    raise InvalidInputError(
        f"x mixes numbers and strings, which no one ONNX type holds; pass an array of "
        f"strings, or one of numbers; {_ACCEPTED}"
    )


def _check_ints_held_exactly(x: Any, array: np.ndarray) -> None:
    """Refuse a list whose Python ints NumPy could hold only as DOUBLE, inexactly.

    NumPy makes DOUBLE of ints that need INT64 and UINT64 together ([-1, 2**64 - 1]) and of
    ints mixed with floats; the ints must then be exact in DOUBLE, or the cast would silently
    start from another value."""
    items = np.asarray(x, dtype=object).reshape(-1).tolist()
    for index, item in enumerate(items):
        if isinstance(item, int) and not _exact_in_double(item):
            raise InvalidInputError(
                f"x holds the Python int {item} at index {_unravel(index, array.shape)}, which "
                "NumPy would hold as DOUBLE (the list mixes ints that need INT64 and UINT64, or "
                f"ints and floats), and DOUBLE does not hold it exactly; pass a NumPy array of "
                "the type you mean (e.g. numpy.array(x, dtype=numpy.uint64))"
            )


def _exact_in_double(n: int) -> bool:
    try:
        return float(n) == n
    except OverflowError:
        return False


def _unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat_index, shape))


def _check_errors(errors: Any) -> str:
    """``errors`` as the plain str "raise" or "coerce"; anything else (an array, an object
    whose ``==`` raises) is a CastValueError, compared by ``str``'s own methods only."""
    if isinstance(errors, str):
        text = plain_str(errors)
        if text in ("raise", "coerce"):
            return text
    raise CastValueError(f"errors must be 'raise' or 'coerce', got {shown_value(errors)}")


def _run(
    op: Op,
    x: Any,
    target: TypeSpec,
    options: dict[str, Any],
    errors: str,
    like: Any = None,
    remember_as: tuple[Any, tuple[Any, ...]] | None = None,
    packed: bool = False,
) -> Any:
    errors = _check_errors(errors)
    if _is_masked(x):
        if packed:
            raise CastValueError(
                "packed=True: a masked array's mask has no packed form; pass x.filled(...) or "
                "x.data"
            )
        return _run_masked(op, x, target, options, errors, like)
    array, scalar = _as_array(x)
    array = _in_machine_order(array)
    xp = _namespace(array)
    adapter = adapter_for(xp)
    found = adapter.packed_source(array)
    source_row = None
    if found is not None:  # a packed dtype (torch's float4_e2m1fn_x2): its rows unpack
        array, source, source_row = found
    else:
        source = _source_type(adapter, array)
    plan = resolve(op, source, target, **options)
    if packed:
        _check_packable(adapter, plan, array, scalar)
    _check_backend_holds(adapter, plan, packed_source=found is not None, packed_target=packed)
    strings_involved = source.code == OnnxType.STRING or target.code == OnnxType.STRING
    if strings_involved and source_row is not None:
        raise BackendTypeError(
            f"{plan.describe()}: x holds {source.name} packed; cast it to a number type first "
            "(e.g. castlike.cast(x, 'FLOAT')), then that to STRING"
        )
    if strings_involved:
        from . import strings

        result = strings.cast_strings(array, plan, adapter, errors=errors, like=like)
        if packed:  # the numbers read from the strings, packed in the library they landed in
            result_adapter = adapter_for(_namespace(result))
            identity = replace(plan, source=target)
            result = result_adapter.engine().cast_packed(
                result, identity, source_row=None, pack=True
            )
            result = result_adapter.packed_result(result, target)
    elif packed or source_row is not None:
        engine = adapter.engine()
        result = engine.cast_packed(array, plan, source_row=source_row, pack=packed)
        if packed:
            result = adapter.packed_result(result, target)
            if remember_as is not None and array is x:
                remember(x, *remember_as, lambda: adapter.repeat_cast(plan, packed=True))
    else:
        result = adapter.engine().cast(array, plan)
        if remember_as is not None and array is x:
            remember(x, *remember_as, lambda: adapter.repeat_cast(plan))
    if scalar and isinstance(result, np.ndarray):
        return result[()]
    return result


def _check_packable(adapter: Adapter, plan: Plan, array: Any, scalar: bool) -> None:
    """Refuse a packed cast that has no packed result: a target of 8 bits or more, an input
    without a last axis, a library that cannot compute the target's bits or hold bytes."""
    target = plan.target
    if layout_of(target) is None:
        raise CastValueError(
            f"{plan.describe()}: packed=True packs the sub-byte types ({_PACKED_NAMES}); "
            f"{target.name} "
            "takes whole bytes already: cast without packed"
        )
    if scalar or len(array.shape) == 0:
        raise CastValueError(
            f"{plan.describe()}: packed=True packs along the last axis, and x is 0-d; pass "
            "x.reshape(1) (or [x])"
        )
    if adapter.library_dtype(TYPES[OnnxType.UINT8]) is None or not adapter.holds_packed(target):
        raise BackendTypeError(
            f"{plan.describe()}: the {adapter.name} backend cannot compute {target.name}'s "
            "bit patterns into bytes; pass a NumPy array (or the library's own array of "
            "numpy, torch, JAX or Dask) instead"
        )


def _is_masked(x: Any) -> bool:
    """Whether ``x`` is a NumPy masked array, without importing numpy.ma (16 ms of a first
    cast): if nothing imported it, nothing can be one."""
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(x, ma.MaskedArray)


def _run_masked(
    op: Op, x: np.ma.MaskedArray, target: TypeSpec, options: dict[str, Any], errors: str, like: Any
) -> np.ma.MaskedArray:
    """A masked array gives a masked array with the same mask (NumPy's convention for
    ``np.ma``).  The data under the mask is cast too, as ``MaskedArray.astype`` does, except
    from STRING, where masked texts are not read (they may be anything) and become 0."""
    mask = np.ma.getmaskarray(x).copy()
    data = np.asarray(x.data)
    if _holds_strings(data) and mask.any():
        data = data.copy()
        data[mask] = b"0" if data.dtype.kind == "S" else "0"
    result = _run(op, data, target, options, errors, like)
    if not isinstance(result, np.ndarray):
        # Strings cast like a torch/JAX array (R9) would land in a library without masks.
        raise BackendTypeError(
            f"x is a masked array, and its result would be a {type(result).__module__} array, "
            "which holds no mask; pass x.filled(...) or x.data, or a NumPy like"
        )
    return np.ma.MaskedArray(result, mask=mask)


def _in_machine_order(array: Any) -> Any:
    """Byte-swapped NumPy input becomes machine byte order (a copy); others pass through."""
    if isinstance(array, np.ndarray) and not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
    return array


def _check_backend_holds(
    adapter: Adapter, plan: Plan, *, packed_source: bool = False, packed_target: bool = False
) -> None:
    for t, packed in ((plan.source, packed_source), (plan.target, packed_target)):
        if t.code == OnnxType.STRING and moves_strings(adapter):
            continue  # R9: strings live in NumPy arrays whatever the numeric library
        if packed and t.code != OnnxType.STRING and adapter.holds_packed(t):
            continue  # held as bytes (checked by _check_packable for a target)
        if adapter.library_dtype(t) is None:
            raise BackendTypeError(
                f"{plan.describe()}: {adapter.name} cannot hold {t.name}; "
                f"{adapter.cannot_hold_hint(t)}"
            )


#: cast()'s default options that are strings: the signature's defaults are these objects, so
#: that a call leaving them so is told by identity (the repeat path's shortcut).
_ROUND_MODE = "up"
_PROFILE = "spec"
_ERRORS = "raise"
set_default_options((True, _ROUND_MODE, None, _PROFILE, _ERRORS, False))


def cast(
    x: Any,
    to: Any,
    /,
    *,
    saturate: bool = True,
    round_mode: str = _ROUND_MODE,
    opset: int | None = None,
    profile: str = _PROFILE,
    errors: str = _ERRORS,
    packed: bool = False,
) -> Any:
    """Cast ``x`` to the ONNX type ``to`` exactly as the ONNX ``Cast`` operator defines.

    Parameters
    ----------
    x : array or scalar
        NumPy (with ml_dtypes), PyTorch, JAX or Dask array.  Python scalars and lists are
        taken as NumPy arrays; a NumPy scalar gives a NumPy scalar back.  ``x`` is never
        modified.
    to : str, int, dtype or array
        The target type: an ONNX name (case-insensitive, e.g. ``"FLOAT8E4M3FN"``), a
        ``TensorProto`` code, a dtype of any supported library, or an array whose dtype to use.
    saturate : bool, default True
        The ``saturate`` attribute (Cast-19+): for float8 targets, out-of-range values and Inf
        become +-max instead of NaN/Inf; for FLOAT8E8M0, see ``round_mode``.
    round_mode : {"up", "down", "nearest"}, default "up"
        The ``round_mode`` attribute (Cast-24+), used by FLOAT8E8M0 targets only.
    opset : int, optional
        Validate against this opset's version of Cast (allowed types, attributes, the FNUZ
        change at 24).  None means the latest definitions.
    profile : {"spec", "reference", "legacy"}, default "spec"
        ``"spec"`` follows the operator text (the rules R1-R11); ``"reference"`` reproduces
        ``onnx.reference`` of onnx >= 1.19 bit for bit; ``"legacy"`` that of onnx <= 1.18.
    errors : {"raise", "coerce"}, default "raise"
        STRING sources only (R9): an element that is not a number raises
        :class:`InvalidStringError` naming its index and text, or, with ``"coerce"``, becomes
        NaN (targets without a NaN still raise).
    packed : bool, default False
        For the sub-byte targets (INT4, UINT4, INT2, UINT2, FLOAT4E2M1, FLOAT6E2M3,
        FLOAT6E3M2): pack each row (the last axis) as ONNX's ``raw_data`` does, the elements
        a little-endian bit stream with the first in the lowest bits, the row's unused high
        bits zero.  The last axis becomes ``ceil(n * bits / 8)`` bytes, of dtype ``uint8``
        (torch: ``float4_e2m1fn_x2`` for FLOAT4E2M1).  Passing ``torch.float4_e2m1fn_x2``
        as ``to`` implies it.  See :func:`unpack` for the way back.

    Returns
    -------
    array
        Same library, device and shape as ``x``, with the target's dtype (packed: see
        ``packed``).  A ``torch.float4_e2m1fn_x2`` input is read as FLOAT4E2M1, its last axis
        twice as long.

    Raises
    ------
    CastTypeError
        Unknown or unsupported types, a pair the opset does not allow, or a type the array
        library cannot hold.
    CastValueError
        Bad options (unknown profile or round_mode, an attribute the opset lacks).

    Examples
    --------
    >>> import numpy as np, castlike
    >>> y = castlike.cast(np.array([0.1, 448.0, 500.0, np.inf]), "FLOAT8E4M3FN")
    >>> [hex(b) for b in y.view(np.uint8)]
    ['0x1d', '0x7e', '0x7e', '0x7e']
    """
    # Every option at its default (the objects of this signature, by identity): the shortcut.
    if (
        saturate is True
        and round_mode is _ROUND_MODE
        and opset is None
        and profile is _PROFILE
        and errors is _ERRORS
        and packed is False
    ):
        found = cached_default_cast(x, to)
    else:
        found = cached_cast(x, to, (saturate, round_mode, opset, profile, errors, packed))
    if found is not None:
        return found
    simple = (saturate, round_mode, opset, profile, errors, packed)
    _check_packed(packed)
    target, packed_dtype = _target_of(to)
    options = {"saturate": saturate, "round_mode": round_mode, "opset": opset, "profile": profile}
    packed = packed or packed_dtype
    return _run(Op.CAST, x, target, options, errors, remember_as=(to, simple), packed=packed)


def _check_packed(packed: Any) -> None:
    if not isinstance(packed, bool):
        raise CastValueError(f"packed must be True or False, got {shown_value(packed)}")


def _target_of(to: Any) -> tuple[TypeSpec, bool]:
    """The ONNX type ``to`` names, and whether it names a packed dtype (torch's
    ``float4_e2m1fn_x2``, or an array of it), which asks for a packed result."""
    dtype = to.dtype if _is_array(to) else to
    if not isinstance(dtype, (str, int)):
        found = packed_type_of_dtype(dtype)
        if found is not None:
            return TYPES[found], True
    return resolve_type(to), False


def cast_like(
    x: Any,
    like: Any,
    /,
    *,
    saturate: bool = True,
    round_mode: str = "up",
    opset: int | None = None,
    profile: str = "spec",
    errors: str = "raise",
    packed: bool = False,
) -> Any:
    """Cast ``x`` to the element type of ``like``, as the ONNX ``CastLike`` operator defines.

    Parameters
    ----------
    x : array or scalar
        As for :func:`cast`.
    like : array, dtype, str or int
        An array whose element type to use, or anything :func:`cast` accepts as ``to``.
        An array of a different library than ``x`` is an error (pass its dtype instead),
        except a NumPy string array, which pairs with any library (R9).
    saturate, round_mode, opset, profile, errors, packed
        As for :func:`cast`.  With ``opset=None`` CastLike behaves as the latest Cast; with an
        explicit opset it is validated against CastLike's own versions (15 and later).  A
        ``like`` that holds its type packed (a ``torch.float4_e2m1fn_x2`` tensor) gives a
        packed result.

    Returns
    -------
    array
        Same library, device and shape as ``x``, with ``like``'s element type.

    Examples
    --------
    >>> import numpy as np, ml_dtypes, castlike
    >>> y = castlike.cast_like(np.array([1.0, 2.5]), np.zeros(1, ml_dtypes.int4))
    >>> y.dtype.name, y.tolist()
    ('int4', [1, 2])
    """
    simple = (saturate, round_mode, opset, profile, errors, packed)
    remembered_like = like_target(like)
    if remembered_like is not None:
        found = cached_cast(x, remembered_like, simple, like=True)
        if found is not None:
            return found
    if _is_array(like) and not _holds_strings(like):
        x_array, _ = _as_array(x)
        if aac.is_array_api_obj(x_array) and not _holds_strings(x_array):
            x_ns = aac.array_namespace(x_array)
            like_ns = aac.array_namespace(
                np.asarray(like) if isinstance(like, np.generic) else like
            )
            if adapter_for(x_ns) is not adapter_for(like_ns):
                raise CastTypeError(
                    f"CastLike: x is a {adapter_for(x_ns).name} array but like is a "
                    f"{adapter_for(like_ns).name} array; pass like.dtype or an ONNX type name "
                    "instead"
                )
    _check_packed(packed)
    target, packed_dtype = _target_of(like)
    if _is_array(like) and not isinstance(like, (np.ndarray, np.generic)):
        like_adapter = adapter_for(aac.array_namespace(like))
        if not moves_strings(like_adapter):
            # The numbers read from strings would have to move from NumPy into like's library.
            x_array, _ = _as_array(x)
            if _holds_strings(x_array):
                string = TYPES[OnnxType.STRING]
                raise BackendTypeError(
                    f"CastLike STRING -> {target.name}: {like_adapter.name} cannot hold STRING; "
                    f"{like_adapter.cannot_hold_hint(string)}"
                )
    options = {"saturate": saturate, "round_mode": round_mode, "opset": opset, "profile": profile}
    remember_as = None if remembered_like is None else (remembered_like, simple)
    return _run(
        Op.CAST_LIKE,
        x,
        target,
        options,
        errors,
        like=like,
        remember_as=remember_as,
        packed=packed or packed_dtype,
    )


def unpack(data: Any, type: Any, n: int, /) -> Any:
    """The one-element-per-byte array of ``type`` that packed ``data`` holds.

    The inverse of ``cast(..., packed=True)``: ``unpack(cast(x, T, packed=True), T,
    x.shape[-1])`` equals ``cast(x, T)``, bit for bit.

    Parameters
    ----------
    data : array
        Packed rows along the last axis, as :func:`cast` with ``packed=True`` writes them and
        ONNX's ``raw_data`` stores them: ``uint8`` of shape ``(..., ceil(n * bits / 8))``, or
        a ``torch.float4_e2m1fn_x2`` tensor for FLOAT4E2M1.
    type : str, int or dtype
        The sub-byte ONNX type the bytes hold (INT4, UINT4, INT2, UINT2, FLOAT4E2M1,
        FLOAT6E2M3, FLOAT6E3M2).
    n : int
        Elements per row; the row's bits beyond ``n * bits`` are not read.

    Returns
    -------
    array
        Same library and device as ``data``, shape ``(..., n)``, the type's dtype (R10: a
        library without a one-per-byte dtype for it, torch for FLOAT4E2M1, refuses; pass the
        packed tensor to :func:`cast` instead, which reads it directly).

    Examples
    --------
    >>> import numpy as np, castlike
    >>> packed = castlike.cast(np.array([[1.0, -2.0, 3.0]]), "INT4", packed=True)
    >>> packed, packed.dtype.name
    (array([[225,   3]], dtype=uint8), 'uint8')
    >>> castlike.unpack(packed, "INT4", 3).tolist()
    [[1, -2, 3]]
    """
    t = resolve_type(type)
    layout = layout_of(t)
    if layout is None:
        raise CastValueError(
            f"unpack: {t.name} is not a packed type; the packed ones are {_PACKED_NAMES}"
        )
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise CastValueError(
            f"unpack: n must be a count of elements (an int >= 0), got {shown_value(n)}"
        )
    n = int(n)
    array, scalar = _as_array(data)
    if scalar or len(array.shape) == 0:
        raise CastValueError("unpack: data is 0-d; packed rows lie along a last axis")
    adapter = adapter_for(_namespace(array))
    found = adapter.packed_source(array)
    if found is not None:
        array, held, _ = found
        if held is not t:
            raise CastTypeError(f"unpack: data holds {held.name} packed, not {t.name}")
    elif _source_type(adapter, array).code != OnnxType.UINT8:
        raise CastTypeError(
            f"unpack: packed data is bytes (uint8), and data holds {shown_value(array.dtype)}; "
            "pass data.view(uint8) if these are its bytes"
        )
    length = layout.packed_length(n)
    if array.shape[-1] != length:
        raise CastValueError(
            f"unpack: {n} {t.name} elements per row take {length} byte(s), and data's last "
            f"axis holds {array.shape[-1]}"
        )
    plan = resolve(Op.CAST, t, t)
    _check_backend_holds(adapter, plan, packed_source=True)
    return adapter.engine().cast_packed(array, plan, source_row=n, pack=False)
