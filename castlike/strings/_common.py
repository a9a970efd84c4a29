"""Constants shared by the string modules."""

from __future__ import annotations

import numpy as np

from ..spec.types import OnnxType, spec_of

_T = OnnxType
_DOUBLE = spec_of(_T.DOUBLE)
_SD = np.dtypes.StringDType()
#: A StringDType whose missing values are NaN-like, so that ``np.isnan`` finds them.
_NAN_SD = np.dtypes.StringDType(na_object=np.nan)
_U64 = np.uint64
_M32 = 0xFFFFFFFF
#: Rows are processed in chunks of this many elements so that temporaries stay in cache.
_CHUNK = 1 << 15
