"""The examples in the public docstrings run and print what they say."""

from __future__ import annotations

import doctest

import pytest

import castlike
import castlike._frontend
import castlike.backends


@pytest.mark.parametrize(
    "module", [castlike, castlike._frontend, castlike.backends], ids=lambda m: m.__name__
)
def test_docstring_examples(module) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
