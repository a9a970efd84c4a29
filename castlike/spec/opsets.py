"""Versions of the Cast and CastLike operators (rule R2) as data.

Each since-version lists the element types it allows (T1 and T2 are the same set in every
version), the attributes it has, and the semantic changes that come with it.  A test compares
these tables with ``onnx.defs`` for every opset when onnx is installed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .types import OnnxType

__all__ = [
    "LATEST_OPSET",
    "OPS",
    "Op",
    "OpVersion",
    "version_for",
]

#: The newest opset of the default ONNX domain these tables know.
LATEST_OPSET = 28


class Op(enum.Enum):
    """The two operators castlike implements."""

    CAST = "Cast"
    CAST_LIKE = "CastLike"


_T = OnnxType
_V1 = frozenset(
    {
        _T.BOOL,
        _T.DOUBLE,
        _T.FLOAT,
        _T.FLOAT16,
        _T.INT16,
        _T.INT32,
        _T.INT64,
        _T.INT8,
        _T.UINT16,
        _T.UINT32,
        _T.UINT64,
        _T.UINT8,
    }
)
_V9 = _V1 | {_T.STRING}
_V13 = _V9 | {_T.BFLOAT16}
_V19 = _V13 | {_T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2, _T.FLOAT8E5M2FNUZ}
_V21 = _V19 | {_T.UINT4, _T.INT4}
_V23 = _V21 | {_T.FLOAT4E2M1}
_V24 = _V23 | {_T.FLOAT8E8M0}
_V25 = _V24 | {_T.UINT2, _T.INT2}
_V28 = _V25 | {_T.FLOAT6E2M3, _T.FLOAT6E3M2}


@dataclass(frozen=True)
class OpVersion:
    """One since-version of Cast or CastLike."""

    op: Op
    since: int
    types: frozenset[OnnxType]
    #: Attributes besides ``to`` (``saturate`` from 19, ``round_mode`` from 24).
    attributes: frozenset[str]
    #: R2: with saturate on, +-Inf -> FLOAT8E4M3FNUZ / FLOAT8E5M2FNUZ is NaN in versions 19-23
    #: and +-max from 24 on (the operator's tables changed in Cast-24).
    inf_to_fnuz_is_nan: bool

    @property
    def label(self) -> str:
        return f"{self.op.value}-{self.since}"


def _versions(op: Op, table: list[tuple[int, frozenset[OnnxType]]]) -> tuple[OpVersion, ...]:
    out = []
    for since, types in table:
        attrs: set[str] = set()
        if since >= 19:
            attrs.add("saturate")
        if since >= 24:
            attrs.add("round_mode")
        out.append(OpVersion(op, since, types, frozenset(attrs), 19 <= since < 24))
    return tuple(out)


#: Since-versions of each operator, oldest first.  Cast-1 (whose ``to`` was a string) allows
#: the same types as Cast-6; rule R2 starts at 6, onnx.defs at 1.
OPS: dict[Op, tuple[OpVersion, ...]] = {
    Op.CAST: _versions(
        Op.CAST,
        [
            (1, _V1),
            (6, _V1),
            (9, _V9),
            (13, _V13),
            (19, _V19),
            (21, _V21),
            (23, _V23),
            (24, _V24),
            (25, _V25),
            (28, _V28),
        ],
    ),
    Op.CAST_LIKE: _versions(
        Op.CAST_LIKE,
        [(15, _V13), (19, _V19), (21, _V21), (23, _V23), (24, _V24), (25, _V25)],
    ),
}


def version_for(op: Op, opset: int | None) -> OpVersion | None:
    """The since-version of ``op`` in effect at ``opset`` (None: the latest).

    Returns None when ``opset`` predates the operator (CastLike below 15).
    """
    versions = OPS[op]
    if opset is None:
        return versions[-1]
    found = None
    for v in versions:
        if v.since <= opset:
            found = v
    return found
