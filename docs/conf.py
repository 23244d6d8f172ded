"""Sphinx configuration of streamlet's documentation (`./dev docs` builds it)."""
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

project = "streamlet"
author = "the streamlet authors"
copyright = "the streamlet authors"
release = version = "0.1.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "streamlet_api"]
exclude_patterns = ["_build"]
default_role = "code"  # `x` in docstrings is code, as the docstrings use it

# Google/MLX-style "Args:" and "Returns:" sections
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # Attributes: as a compact field list
autodoc_member_order = "alphabetical"
autodoc_typehints = "signature"
add_module_names = False

html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"
html_title = "streamlet"
html_static_path = []
