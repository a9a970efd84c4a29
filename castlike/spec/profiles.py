"""The names of the profiles (R12), and which ``reference`` profile an installation is.

``onnx.reference`` casts through ml_dtypes, and ml_dtypes changed its conversions between
releases; onnx changed its own FLOAT8E8M0 helper once.  castlike has one ``reference`` profile
per combination of an *ml_dtypes behaviour family* (:data:`ML_DTYPES_FAMILIES`, a run of
releases that convert alike) and an *onnx behaviour family* (:data:`ONNX_FAMILIES`); the rules
of each are data in :data:`castlike.spec.rules.PROFILES`.  A user names a profile as:

* ``"spec"`` (the default) or ``"legacy"``;
* ``"reference"``: the families of the ml_dtypes and onnx installed here, read from their
  package metadata (neither is imported);
* ``"reference:ml_dtypes-0.6"`` (or ``-0.6.0``): the family of that ml_dtypes release, with the
  newest onnx behaviour, e.g. to reproduce data made with 0.6 on a machine with 0.7;
* ``"reference:onnx-1.20:ml_dtypes-0.6"``: both named.

Standard library only, like the rest of :mod:`castlike.spec`.
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import CastValueError
from .rules import Profile

__all__ = [
    "ML_DTYPES_FAMILIES",
    "ONNX_FAMILIES",
    "MlDtypesFamily",
    "OnnxFamily",
    "family_of",
    "installed_ml_dtypes",
    "installed_version",
    "onnx_family_of",
    "profile_names",
    "reference_profile",
    "resolve_profile",
]

_REFERENCE = "reference"
_PREFIX = "reference:ml_dtypes-"


@dataclass(frozen=True)
class MlDtypesFamily:
    """A run of ml_dtypes releases whose conversions onnx.reference sees alike."""

    #: The first and the last release (major, minor) of the run that castlike knows.
    first: tuple[int, int]
    last: tuple[int, int]
    #: The ``reference`` profile that reproduces onnx.reference with these releases.
    profile: Profile
    #: What changed from the previous family, for the docs and the CLI.
    changes: str

    @property
    def releases(self) -> str:
        """``0.5-0.6`` style label."""
        first, last = (".".join(map(str, v)) for v in (self.first, self.last))
        return first if first == last else f"{first}-{last}"


#: Every behaviour family, oldest first.  A new ml_dtypes release that converts as the newest
#: family does extends its ``last``; one that converts differently adds a family (and a profile).
ML_DTYPES_FAMILIES: tuple[MlDtypesFamily, ...] = (
    MlDtypesFamily(
        (0, 5),
        (0, 6),
        Profile.REFERENCE_ML_DTYPES_0_5,
        "the oldest release castlike supports: DOUBLE and 32/64-bit integer sources rounded "
        "through FLOAT; floats into INT4/UINT4/INT2/UINT2 truncated, NaN, Inf and values beyond "
        "INT32 giving 0, the rest keeping their low bits",
    ),
    MlDtypesFamily(
        (0, 7),
        (0, 7),
        Profile.REFERENCE_ML_DTYPES_0_7,
        "DOUBLE and 32/64-bit integer sources rounded once; NaN, Inf and values whose truncation "
        "is beyond the target's range give 0 in every integer conversion ml_dtypes performs "
        "(into INT4/UINT4/INT2/UINT2, and from BFLOAT16, the float8, float4 and float6 types "
        "and FLOAT8E8M0)",
    ),
)


@dataclass(frozen=True)
class OnnxFamily:
    """A run of onnx releases whose ``onnx.reference`` Cast (with a given ml_dtypes) agrees."""

    first: tuple[int, int]
    last: tuple[int, int]
    #: The part of the profile's name that names it ("" for the newest).
    tag: str
    changes: str

    @property
    def releases(self) -> str:
        first, last = (".".join(map(str, v)) for v in (self.first, self.last))
        return first if first == last else f"{first}-{last}"


#: The onnx releases whose reference casts through ml_dtypes, oldest first (onnx <= 1.18 is the
#: ``legacy`` profile).
ONNX_FAMILIES: tuple[OnnxFamily, ...] = (
    OnnxFamily(
        (1, 19),
        (1, 21),
        "onnx-1.19",
        "FLOAT8E8M0 with round_mode 'up' rounds up only for a FLOAT fraction in the bits of "
        "0x4FFFFF (its helper's mask), so a fraction in bits 20-21 alone rounds down",
    ),
    OnnxFamily((1, 22), (1, 23), "", "the FLOAT8E8M0 helper tests every fraction bit"),
)


def _reference_profile(onnx_family: OnnxFamily, ml_family: MlDtypesFamily) -> Profile:
    """The profile of one combination of families (every one has a member)."""
    ml = ml_family.profile.value.removeprefix(_PREFIX)
    tag = f"{onnx_family.tag}:" if onnx_family.tag else ""
    return Profile(f"reference:{tag}ml_dtypes-{ml}")


def _release(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``0.7.0``, ``0.6`` or ``0.8.0rc1``."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:[.\w+-]*)", text.strip())
    return (int(match[1]), int(match[2])) if match else None


def _family(
    families: tuple[Any, ...], package: str, version: str, installed: bool, example: str
) -> Any:
    """The family of ``families`` holding ``version`` of ``package`` (see :func:`family_of`)."""
    known = ", ".join(f.releases for f in families)
    release = _release(version)
    if release is None:
        raise CastValueError(
            f"{version!r} is not a {package} version; write it as major.minor, e.g. {example!r} "
            f"(castlike knows {package} {known})"
        )
    for family in families:
        if family.first <= release <= family.last:
            return family
    oldest, newest = families[0], families[-1]
    if release < oldest.first:
        older = " (onnx <= 1.18 is profile='legacy')" if package == "onnx" else ""
        raise CastValueError(
            f"{package} {version} is older than the reference profile supports ({package} >= "
            f"{oldest.releases.split('-')[0]}){older}; castlike knows {package} {known}"
        )
    if installed:
        warnings.warn(
            f"the installed {package} {version} is newer than every release castlike knows "
            f"({known}); profile='reference' follows {package} {newest.releases}, which may "
            f"differ from it",
            stacklevel=5,
        )
        return newest
    raise CastValueError(
        f"castlike does not know how {package} {version} casts; it knows {package} {known}"
    )


def family_of(version: str, *, installed: bool = False) -> MlDtypesFamily:
    """The behaviour family of ml_dtypes ``version``.

    Parameters
    ----------
    version : str
        A release: ``"0.6"``, ``"0.6.0"``, ``"0.7.0rc1"``.
    installed : bool
        Whether ``version`` is the installed ml_dtypes rather than one a user named.  A release
        newer than every family castlike knows then follows the newest family, with a warning;
        named explicitly, it is an error.

    Raises
    ------
    CastValueError
        A version that is not ``major.minor[...]``, one older than the oldest family, or (named
        explicitly) one newer than the newest.
    """
    example = f"{_PREFIX}0.6"
    return _family(ML_DTYPES_FAMILIES, "ml_dtypes", version, installed, example)


def onnx_family_of(version: str, *, installed: bool = False) -> OnnxFamily:
    """The behaviour family of onnx ``version`` (as :func:`family_of` for ml_dtypes)."""
    example = "reference:onnx-1.20:ml_dtypes-0.6"
    return _family(ONNX_FAMILIES, "onnx", version, installed, example)


def installed_version(package: str) -> str | None:
    """The installed ``package``'s version: the loaded module's where it is loaded, else from
    its package metadata (the package is not imported), or None."""
    module = sys.modules.get(package)
    if isinstance(getattr(module, "__version__", None), str):
        return str(module.__version__)  # type: ignore[union-attr]
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def installed_ml_dtypes() -> str | None:
    """The installed ml_dtypes' version (not imported), or None."""
    return installed_version("ml_dtypes")


def reference_profile(
    onnx_version: str | None, ml_dtypes_version: str, *, installed: bool = False
) -> Profile:
    """The ``reference`` profile of onnx ``onnx_version`` (None: the newest behaviour) casting
    with ml_dtypes ``ml_dtypes_version`` (``installed``: see :func:`family_of`)."""
    onnx = (
        ONNX_FAMILIES[-1]
        if onnx_version is None
        else onnx_family_of(onnx_version, installed=installed)
    )
    return _reference_profile(onnx, family_of(ml_dtypes_version, installed=installed))


@lru_cache(maxsize=1)
def _installed_reference() -> Profile:
    version = installed_ml_dtypes()
    if version is None:  # castlike requires ml_dtypes; a broken environment still gets a name
        raise CastValueError(
            "profile='reference' follows the installed ml_dtypes, and none is installed; name a "
            f"release instead, e.g. {_PREFIX}{ML_DTYPES_FAMILIES[-1].releases.split('-')[-1]}"
        )
    return reference_profile(installed_version("onnx"), version, installed=True)


def _named_reference(text: str) -> Profile:
    """``reference:[onnx-A.B:]ml_dtypes-X.Y`` (lower case) as a profile."""
    match = re.fullmatch(r"reference:(?:onnx-([^:]+):)?ml_dtypes-(.+)", text)
    if match is None:
        raise CastValueError(
            f"unknown profile {text!r}; a reference release is named "
            f"'{_PREFIX}X.Y' or 'reference:onnx-A.B:ml_dtypes-X.Y'"
        )
    onnx = ONNX_FAMILIES[-1] if match[1] is None else onnx_family_of(match[1])
    return _reference_profile(onnx, family_of(match[2]))


def resolve_profile(name: str | Profile) -> Profile:
    """The :class:`~castlike.spec.rules.Profile` a user's ``profile=`` names.

    ``"reference"`` is the family of the installed ml_dtypes; ``"reference:ml_dtypes-X.Y"``
    that of release X.Y; the other names are the profiles' own values (case-insensitive).

    Raises
    ------
    CastValueError
        An unknown name or ml_dtypes release; the message lists the valid names.
    """
    if isinstance(name, Profile):
        return name
    text = str(name).strip().lower()
    if text == _REFERENCE:
        return _installed_reference()
    if text.startswith("reference:"):
        return _named_reference(text)
    found = _BY_VALUE.get(text)
    if found is not None:
        return found
    names = ", ".join(repr(n) for n in profile_names())
    raise CastValueError(
        f"unknown profile {name!r}; expected one of {names}, or "
        f"'{_PREFIX}X.Y' for the ml_dtypes release X.Y ('reference:onnx-A.B:ml_dtypes-X.Y' "
        "with an onnx release too)"
    )


#: The profiles by value: a dict lookup rather than ``Profile(text)``, which torch 2.11's
#: Dynamo cannot trace (it fails to guard on an enum member made from a value).
_BY_VALUE: dict[str, Profile] = {p.value: p for p in Profile}


def profile_names() -> tuple[str, ...]:
    """The names ``profile=`` accepts, but for the ``reference:ml_dtypes-X.Y`` releases."""
    return ("spec", _REFERENCE, *(p.value for p in Profile if p.is_reference), "legacy")
