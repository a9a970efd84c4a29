"""ONNX interop: ``TensorProto`` <-> arrays, and running Cast / CastLike nodes with castlike.

Requires the ``onnx`` extra (``pip install castlike[onnx]``).  Nothing here uses onnx's own
conversions: tensors are decoded from the wire format that ``onnx.proto`` defines (typed fields
or little-endian ``raw_data``, with 4-bit values packed two per byte, 2-bit values four per
byte and 6-bit values four per three bytes), so that every element keeps its exact bits, and
the result is an array of any library castlike supports.

Examples
--------
>>> import numpy as np, onnx, castlike.onnx as co
>>> node = onnx.helper.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.FLOAT8E4M3FN)
>>> (y,) = co.run_node(node, [np.array([0.1, 500.0], np.float32)])
>>> [hex(b) for b in y.view(np.uint8)]
['0x1d', '0x7e']
>>> co.to_array(co.from_array(y)).tolist() == y.tolist()
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._frontend import cast, cast_like, resolve_type
from .backends import Adapter, adapter_for, adapter_named, moves_strings
from .backends._numpy_dtypes import is_string_dtype
from .backends.numpy import ADAPTER as NUMPY
from .errors import BackendTypeError, CastTypeError, CastValueError
from .spec.opsets import Op
from .spec.packing import LAYOUTS
from .spec.plan import resolve
from .spec.types import TYPES, OnnxType, TypeSpec

__all__ = ["from_array", "run_node", "to_array"]

_T = OnnxType
_STRING = TYPES[_T.STRING]

#: Types whose ``int32_data`` entries hold one element each (bit pattern in the low bits).
_INT32_FIELD_TYPES = frozenset(
    {
        _T.INT32,
        _T.INT16,
        _T.INT8,
        _T.UINT16,
        _T.UINT8,
        _T.BOOL,
        _T.FLOAT16,
        _T.BFLOAT16,
        _T.FLOAT8E4M3FN,
        _T.FLOAT8E4M3FNUZ,
        _T.FLOAT8E5M2,
        _T.FLOAT8E5M2FNUZ,
        _T.FLOAT8E8M0,
        _T.FLOAT6E2M3,
        _T.FLOAT6E3M2,
    }
)


# -- wire format -------------------------------------------------------------------------------
# The sub-byte types travel packed (castlike.spec.packing.LAYOUTS): flat, in row-major order,
# one stream for the whole tensor.  Packing and unpacking are the packed casts of the type to
# itself, by the same native kernels as cast(..., packed=True) and unpack().


def _pack(host: np.ndarray, t: TypeSpec) -> bytes:
    """A NumPy array of the sub-byte type ``t`` as the packed bytes of ``raw_data``."""
    flat = np.ascontiguousarray(host).reshape(-1)
    plan = resolve(Op.CAST, t, t)
    return NUMPY.engine().cast_packed(flat, plan, source_row=None, pack=True).tobytes()


def _unpack(data: np.ndarray, t: TypeSpec, count: int) -> np.ndarray:
    """Packed bytes (uint8) as ``count`` element bit patterns, one per byte."""
    layout = LAYOUTS[_T(t.code)]
    length = layout.packed_length(count)
    if data.size < length:
        raise CastValueError(
            f"{t.name} tensor: {data.size} packed byte(s) hold fewer than {count} elements"
        )
    plan = resolve(Op.CAST, t, t)
    flat = np.ascontiguousarray(data[:length])
    return NUMPY.bits(NUMPY.engine().cast_packed(flat, plan, source_row=count, pack=False), t)


def _storage(t: TypeSpec) -> np.dtype[Any]:
    return np.dtype(f"uint{t.storage_bits}")


def _element_type(code: int) -> TypeSpec:
    if code == 0:
        raise CastTypeError("the tensor's element type is UNDEFINED")
    return resolve_type(int(code))


def _bits_of(tensor: Any, t: TypeSpec, count: int) -> np.ndarray:
    """The element bit patterns of a numeric TensorProto, as unsigned storage integers."""
    code = _T(t.code)
    storage = _storage(t)
    if tensor.HasField("raw_data"):
        raw = np.frombuffer(tensor.raw_data, dtype=np.uint8)
        if code in LAYOUTS:
            return _unpack(raw, t, count)
        return np.frombuffer(tensor.raw_data, dtype=storage.newbyteorder("<")).astype(storage)
    if code is _T.FLOAT:
        return np.asarray(tensor.float_data, dtype=np.float32).view(np.uint32)
    if code is _T.DOUBLE:
        return np.asarray(tensor.double_data, dtype=np.float64).view(np.uint64)
    if code is _T.INT64:
        return np.asarray(tensor.int64_data, dtype=np.int64).view(np.uint64)
    if code in (_T.UINT32, _T.UINT64):
        return np.asarray(tensor.uint64_data, dtype=np.uint64).astype(storage)
    values = np.asarray(tensor.int32_data, dtype=np.int64).view(np.uint64)
    if code in LAYOUTS and LAYOUTS[code].group_bytes == 1:
        # The 4- and 2-bit types: each int32 entry holds one packed byte (the 6-bit ones, whose
        # groups span bytes, one element per entry, as onnx.helper writes them).
        return _unpack((values & np.uint64(0xFF)).astype(np.uint8), t, count)
    if code in _INT32_FIELD_TYPES:
        return (values & np.uint64((1 << t.storage_bits) - 1)).astype(storage)
    raise CastValueError(f"cannot read {t.name} tensors without raw_data")  # pragma: no cover


def _resolve_xp(xp: Any) -> Adapter:
    if xp is None:
        return NUMPY
    if isinstance(xp, str):
        return adapter_named(xp)
    return adapter_for(xp)


def to_array(tensor: Any, xp: Any = np) -> Any:
    """The array a ``TensorProto`` holds, with every element's exact bits.

    Parameters
    ----------
    tensor : onnx.TensorProto
        A tensor of any of the 26 ONNX element types castlike knows, stored in its typed field
        or in ``raw_data`` (4-bit and 2-bit types packed, FLOAT6* as a 6-bit stream).
    xp : module, namespace or str, default numpy
        The array library of the result: ``numpy``, ``torch``, ``jax.numpy``, ``dask.array``,
        another Array-API namespace, or a backend's name in castlike's registry.  STRING
        tensors are always NumPy ``StringDType`` arrays (R9).

    Returns
    -------
    array
        Shape ``tensor.dims``, dtype the library's dtype of the tensor's element type (NumPy:
        ml_dtypes for the exotic types, one element per byte for sub-byte types).

    Raises
    ------
    CastTypeError
        COMPLEX/UNDEFINED element types, or a library that cannot hold the type.
    CastValueError
        Data stored outside the tensor (external data, segments) or too little data.

    Examples
    --------
    >>> import numpy as np, onnx, castlike.onnx as co
    >>> t = onnx.helper.make_tensor("x", onnx.TensorProto.INT4, [3], [-1, 7, 2])
    >>> a = co.to_array(t)
    >>> a.dtype.name, a.tolist()
    ('int4', [-1, 7, 2])
    """
    t = _element_type(tensor.data_type)
    if tensor.HasField("segment"):
        raise CastValueError("tensor segments are not supported")
    import onnx

    if tensor.external_data or tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise CastValueError(
            f"tensor {tensor.name!r} keeps its data in an external file; load the model with "
            "onnx.load(path) (which reads external data) before converting it"
        )
    dims = tuple(int(d) for d in tensor.dims)
    count = math.prod(dims)
    if t.code == _T.STRING:
        texts = [s.decode("utf-8") for s in tensor.string_data]
        _check_count(len(texts), count, t)
        return np.array(texts, dtype=np.dtypes.StringDType()).reshape(dims)
    bits = _bits_of(tensor, t, count)
    _check_count(bits.size, count, t)
    if t.code == _T.BOOL:
        bits = (bits != 0).astype(np.uint8)  # "00000001 for true": any nonzero byte is True
    array = NUMPY.from_bits(bits.reshape(dims), t)
    adapter = _resolve_xp(xp)
    return array if adapter is NUMPY else adapter.from_numpy(array)


def _check_count(found: int, wanted: int, t: TypeSpec) -> None:
    if found != wanted:
        raise CastValueError(f"{t.name} tensor: {found} element(s) for a shape of {wanted}")


def from_array(array: Any, name: str | None = None) -> Any:
    """A ``TensorProto`` holding ``array`` bit for bit.

    Parameters
    ----------
    array : array
        NumPy (including ml_dtypes types and string arrays: ``StringDType``, ``U``, ``S`` or
        objects of ``str``/``bytes``), PyTorch, JAX or Dask.
    name : str, optional
        The tensor's name.

    Returns
    -------
    onnx.TensorProto
        Numeric data in little-endian ``raw_data`` (4-bit types packed two per byte, 2-bit
        types four per byte, FLOAT6* four per three bytes), strings UTF-8 in ``string_data``.

    Examples
    --------
    >>> import numpy as np, ml_dtypes, castlike.onnx as co
    >>> t = co.from_array(np.array([1, -1, 3], ml_dtypes.int4))
    >>> t.data_type, t.raw_data.hex()
    (22, 'f103')
    """
    import onnx

    tensor = onnx.TensorProto()
    if name:
        tensor.name = name
    host = _to_numpy(array)
    tensor.dims.extend(int(d) for d in host.shape)
    if is_string_dtype(host.dtype):
        tensor.data_type = _T.STRING
        tensor.string_data.extend(_utf8(v) for v in host.reshape(-1).tolist())
        return tensor
    t = resolve_type(host.dtype)
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    code = _T(t.code)
    if code in LAYOUTS:
        tensor.raw_data = _pack(host, t)
    else:
        bits = NUMPY.bits(np.ascontiguousarray(host), t)
        tensor.raw_data = bits.astype(_storage(t).newbyteorder("<")).tobytes()
    tensor.data_type = t.code
    return tensor


def _utf8(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise CastTypeError(f"a STRING tensor holds str or bytes, not {type(value).__name__}")


def _to_numpy(array: Any) -> np.ndarray:
    """Any supported array (or scalar, list) as a NumPy array with the same bits."""
    if isinstance(array, (np.ndarray, np.generic)):
        return np.asarray(array)
    import array_api_compat as aac

    if aac.is_array_api_obj(array):
        return adapter_for(aac.array_namespace(array)).to_numpy(array)
    return np.asarray(array)


# -- running nodes -----------------------------------------------------------------------------

_OPS = ("Cast", "CastLike")
_ATTRIBUTES = {"Cast": {"to", "saturate", "round_mode"}, "CastLike": {"saturate", "round_mode"}}


def _node_options(node: Any) -> dict[str, Any]:
    """The castlike options a Cast/CastLike node's attributes ask for."""
    from onnx import helper

    options: dict[str, Any] = {}
    allowed = _ATTRIBUTES[node.op_type]
    for attribute in node.attribute:
        if attribute.name not in allowed:
            raise CastValueError(f"{node.op_type} has no attribute {attribute.name!r}")
        value = helper.get_attribute_value(attribute)
        if attribute.name == "saturate":
            options["saturate"] = bool(value)
        elif attribute.name == "round_mode":
            options["round_mode"] = value.decode() if isinstance(value, bytes) else str(value)
        else:
            options["to"] = int(value)
    if node.op_type == "Cast" and "to" not in options:
        raise CastValueError("a Cast node needs the 'to' attribute")
    return options


def _model_opset(model: Any) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise CastValueError("the model imports no opset of the default ONNX domain")


def _library_of(values: Sequence[Any]) -> Adapter:
    """The adapter of the first numeric array among ``values`` (NumPy if there is none)."""
    import array_api_compat as aac

    for value in values:
        if isinstance(value, (np.ndarray, np.generic)) or not aac.is_array_api_obj(value):
            continue
        return adapter_for(aac.array_namespace(value))
    return NUMPY


def _is_string_array(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) and is_string_dtype(value.dtype)


def _prepare(value: Any, adapter: Adapter, declared: int | None) -> Any:
    """An input (array, TensorProto, list) as an array of ``adapter``'s library.

    ``declared`` is the element type a model declares for it: tensors stored as their storage
    type (ONNX <= 1.14 test data writes BFLOAT16 tensors as UINT16) are reinterpreted.
    """
    import onnx

    if isinstance(value, onnx.TensorProto):
        value = to_array(value)
    elif not isinstance(value, (np.ndarray, np.generic)):
        import array_api_compat as aac

        if aac.is_array_api_obj(value):
            source = adapter_for(aac.array_namespace(value))
            if source is adapter and declared is None:
                return value
            value = source.to_numpy(value)
        else:
            value = np.asarray(value)
    value = np.asarray(value)
    if declared is not None and not is_string_dtype(value.dtype):
        value = as_declared(value, declared)
    if is_string_dtype(value.dtype) or adapter is NUMPY:
        return value
    return adapter.from_numpy(value)


def as_declared(array: np.ndarray, declared: int) -> np.ndarray:
    """``array`` reinterpreted as the element type ``declared`` (a code) when they differ.

    Only a change between types of the same storage width is a reinterpretation (UINT16 bits
    as BFLOAT16, as ONNX <= 1.14 test data stores BFLOAT16); anything else is an error.
    """
    t = resolve_type(array.dtype)
    want = _element_type(declared)
    if t.code == want.code or want.code == _T.STRING:
        return array
    if t.storage_bits != want.storage_bits or not want.is_numeric:
        raise CastTypeError(f"a tensor of {t.name} where the model declares {want.name}")
    return NUMPY.from_bits(NUMPY.bits(array, t), want)


def _run_one(
    node: Any, values: list[Any], adapter: Adapter, opset: int | None, options: dict[str, Any]
) -> Any:
    attrs = _node_options(node)
    kwargs = {**options, **{k: v for k, v in attrs.items() if k != "to"}, "opset": opset}
    if values and _is_string_array(values[0]) and not moves_strings(adapter):
        # The numbers read would have to move from NumPy into the adapter's library, which
        # the generic Array-API backend never does (STRING is refused there, R10).
        hint = adapter.cannot_hold_hint(_STRING)
        raise BackendTypeError(f"{node.op_type}: {adapter.name} cannot hold STRING; {hint}")
    if node.op_type == "Cast":
        if len(values) != 1:
            raise CastValueError(f"Cast takes one input, got {len(values)}")
        result = cast(values[0], attrs["to"], **kwargs)
    else:
        if len(values) != 2:
            raise CastValueError(
                f"CastLike takes two inputs (input, target_type), got {len(values)}"
            )
        result = cast_like(values[0], values[1], **kwargs)
    # Strings cast to numbers come back as NumPy (R9); the caller asked for ``adapter``'s arrays.
    if adapter is not NUMPY and _is_string_array(values[0]) and not _is_string_array(result):
        result = adapter.from_numpy(np.asarray(result))
    return result


def run_node(
    node_or_model: Any,
    inputs: Sequence[Any] | Mapping[str, Any],
    *,
    opset: int | None = None,
    backend: str | None = None,
    profile: str = "spec",
    errors: str = "raise",
) -> list[Any]:
    """Execute a Cast or CastLike node (or a model made of them) with castlike.

    Parameters
    ----------
    node_or_model : onnx.NodeProto or onnx.ModelProto
        A ``Cast`` or ``CastLike`` node of the default domain, with its attributes (``to``,
        ``saturate``, ``round_mode``); or a model whose graph holds only such nodes (the node
        test models, including CastLike's ``_expanded`` function bodies).
    inputs : sequence or mapping
        The node's (or graph's) inputs, in order or by name: arrays of any supported library,
        NumPy string arrays, ``TensorProto`` s or lists.  A model's declared element types
        reinterpret tensors stored as their storage type (UINT16 bits for BFLOAT16).
    opset : int, optional
        The opset of the default domain.  None means the latest definitions for a node, and
        the model's own opset for a model (an explicit value must then agree with it).
    backend : str, optional
        The array library to compute with, by its name in castlike's registry ("numpy",
        "torch", "jax", "dask", "array-api-strict", or a registered one: see
        :func:`castlike.backends.backends`); inputs are moved to it.  None: the library of the
        first numeric array input, NumPy if there is none.
    profile, errors
        As for :func:`castlike.cast`.

    Returns
    -------
    list of array
        The node's (graph's) outputs, arrays of the chosen library (STRING results are NumPy
        arrays, R9).

    Raises
    ------
    CastError
        As :func:`castlike.cast`, and for nodes other than Cast/CastLike, unknown attributes
        or the wrong number of inputs.
    """
    import onnx

    options = {"profile": profile, "errors": errors}
    if isinstance(node_or_model, onnx.ModelProto):
        model_opset = _model_opset(node_or_model)
        if opset is not None and opset != model_opset:
            raise CastValueError(f"opset={opset} but the model imports opset {model_opset}")
        return _run_graph(node_or_model.graph, inputs, model_opset, backend, options)
    if isinstance(node_or_model, onnx.GraphProto):
        return _run_graph(node_or_model, inputs, opset, backend, options)
    if not isinstance(node_or_model, onnx.NodeProto):
        raise CastTypeError(
            f"run_node takes a NodeProto or a ModelProto, not {type(node_or_model).__name__}"
        )
    node = node_or_model
    _check_node(node)
    values = [inputs[n] for n in node.input] if isinstance(inputs, Mapping) else list(inputs)
    adapter = adapter_named(backend) if backend else _library_of(values)
    prepared = [_prepare(v, adapter, None) for v in values]
    return [_run_one(node, prepared, adapter, opset, options)]


def _check_node(node: Any) -> None:
    if node.op_type not in _OPS or node.domain not in ("", "ai.onnx"):
        where = f"{node.domain}::" if node.domain else ""
        raise CastTypeError(
            f"castlike runs Cast and CastLike nodes only, not {where}{node.op_type}"
        )


def _run_graph(
    graph: Any,
    inputs: Sequence[Any] | Mapping[str, Any],
    opset: int | None,
    backend: str | None,
    options: dict[str, Any],
) -> list[Any]:
    initializers = {t.name: t for t in graph.initializer}
    graph_inputs = [i for i in graph.input if i.name not in initializers]
    if isinstance(inputs, Mapping):
        given = {i.name: inputs[i.name] for i in graph_inputs}
    else:
        values = list(inputs)
        if len(values) != len(graph_inputs):
            raise CastValueError(
                f"the graph has {len(graph_inputs)} input(s), {len(values)} were given"
            )
        given = {i.name: v for i, v in zip(graph_inputs, values, strict=True)}
    adapter = adapter_named(backend) if backend else _library_of(list(given.values()))
    declared = {i.name: i.type.tensor_type.elem_type or None for i in graph.input}
    env: dict[str, Any] = {}
    for name, tensor in initializers.items():
        env[name] = _prepare(tensor, adapter, declared.get(name))
    for name, value in given.items():
        env[name] = _prepare(value, adapter, declared.get(name))
    for node in graph.node:
        _check_node(node)
        result = _run_one(node, [env[n] for n in node.input], adapter, opset, options)
        env[node.output[0]] = result
    return [env[o.name] for o in graph.output]
