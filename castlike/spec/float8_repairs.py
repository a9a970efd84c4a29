"""A library's own FLOAT -> float8 conversion, with its specials repaired from the spec.

Some libraries round FLOAT to a float8 format to nearest even, subnormals included, but make
something else of overflow, Inf or NaN than R4 says (torch: E4M3FN saturates in 2.13 and
writes NaN in 2.11, E5M2 writes NaN as 0x7F).  An adapter declares, per float8 type, what
its conversion makes of those (:class:`LibrarySpecials`, measured); this module derives from
the spec's own tables (:func:`~castlike.spec.rules.overflow_rule`, the format's NaN encoding)
how each target under each mode is repaired in a pass or two (:class:`Float8Plan`), or that
it cannot be (the engine then takes the class table).  A route carries its plan
(:attr:`castlike.spec.route.Route.float8_plan`), and the engine applies it.

Plans are computed once, when the adapter is defined, and looked up by plain values: the
engine runs under ``torch.compile``, which cannot trace Fraction arithmetic or
``cached_property``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .rules import Action, Mode, Profile, RoundMode, overflow_rule
from .types import TYPES, OnnxType, TypeSpec

__all__ = ["Float8Plan", "LibrarySpecials", "PlanKey", "plan_for", "plans"]

_T = OnnxType

#: (target code, saturate, round_mode, profile, inf_to_fnuz_is_nan) of an effective mode.
PlanKey = tuple[int, bool, str, str, bool]


@dataclass(frozen=True)
class LibrarySpecials:
    """What a library's FLOAT -> float8 conversion makes of a FLOAT beyond the format's range
    and of +-Inf, and the NaN encoding it writes (sign bit added for signed NaNs).

    ``overflow`` and ``inf`` are None where there is no one answer (library versions or
    devices differ): the plans then repair every mode, relying only on the result beyond
    max being +-max, +-Inf or NaN."""

    overflow: Action | None
    inf: Action | None
    nan: int


@dataclass(frozen=True)
class Float8Plan:
    """How to get one float8 target under one mode from the library's conversion: the repair
    ("none", "clamp" to +-``top`` first, or "nan beyond max": NaN where the magnitude passes
    ``boundary``), and the library's NaN byte to rewrite (None when it is already the
    rule's)."""

    repair: str
    top: float
    boundary: float
    inclusive: bool
    nan_magnitude: int
    library_nan: int | None


def float8_plan(library: LibrarySpecials, target: TypeSpec, mode: Mode) -> Float8Plan | None:
    """The plan for ``target`` under ``mode`` from R4's tables, or None (use the class table)."""
    fmt = target.fmt
    nan = fmt.nan_bits()
    if target.code == _T.FLOAT8E5M2:
        nan = mode.profile.rules.float8e5m2_nan  # R12: 0x7F in the legacy profile
    if nan is None or nan not in (library.nan, library.nan - 1):
        return None
    rule = overflow_rule(target, mode)
    wanted = (rule.overflow, rule.inf)
    max_bits = fmt.max_bits & ~fmt.sign_mask
    # Marking NaN ORs NaN's magnitude bits onto what the library wrote beyond max: right for
    # a saturated max, and for anything else (Inf, NaN) only where those bits cover it.
    nan_magnitude = nan & ~fmt.sign_mask
    written = (max_bits, fmt.inf_bits() or 0, library.nan & ~fmt.sign_mask)
    covers = all(bits | nan_magnitude == nan_magnitude for bits in written)
    if library.overflow is not None and wanted == (library.overflow, library.inf):
        repair = "none"
    elif wanted == (Action.MAX, Action.MAX):
        repair = "clamp"
    elif wanted == (Action.NAN, Action.NAN) and (
        library.inf is Action.MAX or (library.inf is None and covers)
    ):
        repair = "nan beyond max"
    else:
        return None
    # The magnitude from which a value rounds (to nearest even) above max; the boundary itself
    # does when max's last mantissa bit is odd.
    ulp = fmt.magnitude_of(max_bits) - fmt.magnitude_of(max_bits - 1)
    return Float8Plan(
        repair=repair,
        top=float(fmt.max_value),
        boundary=float(fmt.max_value + ulp / 2),
        inclusive=bool(max_bits & 1),
        nan_magnitude=nan_magnitude,
        library_nan=None if nan == library.nan else library.nan,
    )


def mode_key(target: TypeSpec, mode: Mode) -> PlanKey:
    """The plain-value key of ``mode`` as ``target`` sees it."""
    m = mode.effective_for(target)
    return (target.code, m.saturate, m.round_mode.value, m.profile.value, m.inf_to_fnuz_is_nan)


def plans(declared: Mapping[OnnxType, LibrarySpecials]) -> dict[PlanKey, Float8Plan | None]:
    """Every declared float8 target under every effective mode."""
    out: dict[PlanKey, Float8Plan | None] = {}
    for t, library in declared.items():
        target = TYPES[t]
        for saturate in (True, False):
            for round_mode in RoundMode:
                for profile in Profile:
                    for fnuz in (True, False):
                        m = Mode(saturate, round_mode, profile, fnuz).effective_for(target)
                        out[mode_key(target, m)] = float8_plan(library, target, m)
    return out


def plan_for(
    table: Mapping[PlanKey, Float8Plan | None], target: TypeSpec, mode: Mode
) -> Float8Plan | None:
    """The plan of ``target`` under ``mode`` in an adapter's ``table``, or None."""
    if not table:
        return None
    return table.get(mode_key(target, mode))
