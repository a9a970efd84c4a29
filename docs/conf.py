"""Sphinx configuration for the castlike documentation (built by ``nox -s docs`` with -W).

``_ext/castlike_docs.py`` generates the type matrix, the value tables, the command-line
reference, the "where others differ" page and the plots from castlike itself when the build
starts, into ``_generated/`` (git-ignored; the pages include those files).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the checkout's castlike, installed or not

project = "castlike"
author = "castlike developers"
copyright = "2026, castlike developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "castlike_docs",
]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autosummary_generate = True
intersphinx_mapping = {}
html_theme = "furo"
html_title = "castlike"
html_theme_options = {"navigation_with_keys": True}
html_static_path = ["_static"]
html_css_files = ["castlike.css"]
exclude_patterns = ["_build", "_generated", "_data", "_ext"]
nitpicky = False
