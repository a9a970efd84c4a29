"""Dask backend: the NumPy engine applied block by block, so the result stays lazy.

A Dask array's chunks are NumPy arrays with the same dtypes (ml_dtypes included), so the cast
of a Dask array is ``map_blocks`` of the NumPy cast: nothing is computed until the caller asks.
Casts to STRING are ``map_blocks`` of the string functions the same way; casts from STRING
read every block before handing any on, so that an error names the first element of the whole
array that cannot be cast (see :func:`_checked_blocks`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import array_api_compat.dask.array as xp_dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._adapter import Adapter
from .._engine import Engine
from ..errors import CastValueError
from ..spec.packing import layout_of
from ..spec.types import Kind, OnnxType, TypeSpec
from .numpy import ADAPTER as NUMPY

__all__ = ["ADAPTER", "DaskAdapter", "DaskEngine"]


class DaskAdapter(Adapter):
    """Dask arrays of NumPy chunks."""

    packs = True

    name = "dask"
    xp = xp_dask

    def library_dtype(self, t: TypeSpec) -> Any | None:
        return NUMPY.library_dtype(t)

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        return NUMPY.onnx_type_of(dtype)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> Any:
        array = np.asarray(array)
        if like is not None and like.shape == array.shape:
            chunks = like.chunks
        else:  # a few chunks along the first axis, so that block-wise code is exercised
            chunks = (max(1, -(-array.shape[0] // 4)), *array.shape[1:]) if array.ndim else ()
        return da.from_array(array, chunks=chunks)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x.compute())

    def engine(self) -> Engine:
        return DaskEngine(self)

    def cast_strings(self, x: Any, plan: Any, *, errors: str, like: Any) -> Any:
        from .. import strings  # the string code loads only for string casts

        source, target = plan.source, plan.target
        kind = strings.output_kind(like)
        dtype: Any
        if target.kind is Kind.STRING:
            if source.kind is Kind.STRING and kind in "SU":
                kind = "T"  # a fixed width would depend on every block's longest string
            dtype = strings.block_text_dtype(source, kind)
        else:
            dtype = NUMPY.library_dtype(target)
        if source.kind is not Kind.STRING:  # formatting numbers never fails
            return x.map_blocks(strings.format_block, plan, kind, dtype=dtype, meta=_meta(x, dtype))
        if strings.block_can_fail(plan, errors, x.dtype):
            result = _checked_blocks(x, plan, errors, kind, dtype)
        else:
            read = partial(_read_unfailing, plan=plan, errors=errors, kind=kind)
            result = x.map_blocks(read, dtype=dtype, meta=_meta(x, dtype))
        other = strings.is_other_library(like) and not isinstance(like, da.Array)
        if other and target.kind is not Kind.STRING:
            # The numbers go into like's library (R9), which has no lazy arrays to hold them.
            return strings.deliver_numbers(np.asarray(result.compute()), plan, like)
        return result


# == Casts from STRING: the first problem of the whole array ======================================
#
# A block of strings may hold an element the cast cannot take (invalid text, a missing value,
# an object that is no text).  The error must name the first such element of the whole array,
# in row-major order, by its index in the whole array, whatever order the scheduler computes
# the blocks in and even where the chunk sizes are unknown (after boolean indexing).  So no
# block raises: each reports its shape and its first problem (index in the block), one task
# gathers those reports, adds up the blocks' shapes into offsets and raises the first
# problem, and every block of the result waits for that task.  The cost: the blocks are all
# read (and held) before any block of the result is handed on.


def _read_unfailing(block: np.ndarray, *, plan: Any, errors: str, kind: str) -> np.ndarray:
    from .. import strings

    result = strings.read_block(block, plan, errors, kind)
    if isinstance(result, strings.Problem):  # block_can_fail said it cannot happen
        raise result.exception()
    return result


def _read(block: np.ndarray, *, plan: Any, errors: str, kind: str) -> tuple[Any, Any]:
    """One block's shape and its result or first problem."""
    from .. import strings

    return np.shape(block), strings.read_block(block, plan, errors, kind)


def _report(read: tuple[Any, Any]) -> tuple[tuple[int, ...], Any]:
    """One block's shape and first problem (None if none): a small task, so that only the
    reports, not the blocks, travel to the task that gathers them."""
    from .. import strings

    shape, outcome = read
    return tuple(shape), outcome if isinstance(outcome, strings.Problem) else None


def _raise_first(reports: list[tuple[tuple[int, ...], Any]], *, numblocks: tuple[int, ...]) -> None:
    """Raise the problem of the first element (row-major) of the whole array, if any.

    ``reports`` come in the order of ``numpy.ndindex(*numblocks)``.  A block's offset along
    an axis is the sum of the sizes of the blocks before it on that axis, read from the
    computed blocks' shapes (known even where the array's chunks were not).
    """
    blocks = list(np.ndindex(*numblocks))
    shapes = dict(zip(blocks, (shape for shape, _ in reports), strict=True))
    offsets = []
    for axis, count in enumerate(numblocks):
        first_on_axis = [
            tuple(j if a == axis else 0 for a in range(len(numblocks))) for j in range(count)
        ]
        sizes = [shapes[block][axis] for block in first_on_axis]
        offsets.append([sum(sizes[:j]) for j in range(count)])
    found: list[tuple[tuple[int, ...], Any]] = []
    for block, (_, problem) in zip(blocks, reports, strict=True):
        if problem is not None:
            local = enumerate(zip(block, problem.index, strict=True))
            found.append((tuple(offsets[axis][b] + i for axis, (b, i) in local), problem))
    if found:
        index, problem = min(found, key=lambda f: f[0])
        raise problem.exception(index)


def _result(read: tuple[Any, Any], checked: None) -> np.ndarray:
    """One block's result, once the whole array is known to hold no problem."""
    return read[1]


def _checked_blocks(x: Any, plan: Any, errors: str, kind: str, dtype: Any) -> Any:
    """``x``'s blocks read by :func:`_read`, as a Dask array whose every block waits for the
    check of the whole array (:func:`_raise_first`)."""
    token = tokenize(x, plan, errors, kind)
    read_name, report_name = f"castlike-read-{token}", f"castlike-report-{token}"
    check_name, name = f"castlike-check-{token}", f"castlike-strings-{token}"
    read = partial(_read, plan=plan, errors=errors, kind=kind)
    blocks = list(np.ndindex(*x.numblocks))
    graph: dict[Any, Any] = {}
    for block in blocks:
        source, read_key, report_key = (x.name, *block), (read_name, *block), (report_name, *block)
        result_key = (name, *block)
        graph[read_key] = (read, source)
        graph[report_key] = (_report, read_key)
        graph[result_key] = (_result, read_key, check_name)
    check = partial(_raise_first, numblocks=tuple(x.numblocks))
    graph[check_name] = (check, [(report_name, *block) for block in blocks])
    layers = HighLevelGraph.from_collections(name, graph, dependencies=[x])
    return da.Array(layers, name, chunks=x.chunks, dtype=dtype, meta=_meta(x, dtype))


def _meta(x: Any, dtype: Any) -> np.ndarray:
    """An empty NumPy array of the result's type: given to ``map_blocks`` so that Dask does
    not run the cast on made-up data to find it out."""
    return np.empty((0,) * x.ndim, dtype=dtype)


class DaskEngine(Engine):
    """Every cast is the NumPy engine's cast of each block (the rules are not repeated)."""

    def cast(self, x: Any, plan: Any) -> Any:
        numpy_engine = NUMPY.engine()
        return x.map_blocks(numpy_engine.cast, plan, dtype=NUMPY.library_dtype(plan.target))

    def cast_packed(self, x: Any, plan: Any, *, source_row: int | None, pack: bool) -> Any:
        """Block by block with the NumPy engine's packed cast, the last axis rechunked first
        where a chunk boundary would split a byte (see :func:`_whole_groups`)."""
        numpy_engine = NUMPY.engine()
        target = plan.target
        _known_last_chunks(x)
        if source_row is not None:
            source_layout = layout_of(plan.source)
            assert source_layout is not None
            x = _whole_groups(x, source_layout.group_bytes)
            # Elements per block: whole groups, the last block what is left of the row.
            counts = [c // source_layout.group_bytes * source_layout.group for c in x.chunks[-1]]
            counts[-1] = source_row - sum(counts[:-1])

            def unpack_block(block: np.ndarray, block_id: tuple[int, ...]) -> np.ndarray:
                row = counts[block_id[-1]]
                return numpy_engine.cast_packed(block, plan, source_row=row, pack=False)

            dtype = NUMPY.library_dtype(target)
            x = x.map_blocks(
                unpack_block,
                chunks=(*x.chunks[:-1], tuple(counts)),
                dtype=dtype,
                meta=_meta(x, dtype),
            )
            if not pack:
                return x
            plan = replace(plan, source=target)  # the bits as they are
        layout = layout_of(target)
        assert layout is not None
        x = _whole_groups(x, layout.group)
        lengths = tuple(layout.packed_length(c) for c in x.chunks[-1])
        return x.map_blocks(
            partial(numpy_engine.cast_packed, source_row=None, pack=True),
            plan,
            chunks=(*x.chunks[:-1], lengths),
            dtype=np.uint8,
            meta=_meta(x, np.uint8),
        )


def _known_last_chunks(x: Any) -> None:
    if x.ndim and any(c != c for c in x.chunks[-1]):  # NaN: unknown sizes
        raise CastValueError(
            "a packed cast needs the chunk sizes of the last axis, and this Dask array's are "
            "unknown; call x.compute_chunk_sizes() first"
        )


def _whole_groups(x: Any, group: int) -> Any:
    """``x`` rechunked along its last axis so that every chunk but the last holds whole
    groups of ``group`` (elements that share bytes, or bytes that share elements): each block
    then packs or unpacks on its own.  ``x`` itself where its chunks already do."""
    chunks = x.chunks[-1]
    if all(c % group == 0 for c in chunks[:-1]):
        return x
    total = sum(chunks)
    bounds, position = set(), 0
    for c in chunks[:-1]:
        position += c
        bounds.add(position // group * group)
    edges = [*sorted(bounds - {0, total}), total]
    new = tuple(b - a for a, b in zip([0, *edges[:-1]], edges, strict=True))
    return x.rechunk({x.ndim - 1: new})


#: The one Dask adapter.
ADAPTER = DaskAdapter()
