"""Sphinx configuration for the castlike documentation (built by ``nox -s docs`` with -W)."""

project = "castlike"
author = "castlike developers"
copyright = "2026, castlike developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_typehints = "description"
autodoc_member_order = "bysource"
intersphinx_mapping = {}
html_theme = "alabaster"
exclude_patterns = ["_build"]
nitpicky = False
