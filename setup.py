"""The one compiled part: the buffer protocol of arrays (src/streamlet/core/_buffer.c).

Everything else is in pyproject.toml.  The extension is optional: without a C compiler
the package installs, and arrays export buffers through CPython 3.12's `__buffer__`.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("streamlet.core._buffer", ["src/streamlet/core/_buffer.c"],
                             optional=True)])
