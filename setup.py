"""The compiled part of the build: pyproject.toml holds the metadata. `pip install .` (or `-e .`) builds, with the
system compiler, pass 1's C frame walk (vizexport/pickles/opscan.py), the reader's timestamp parse and gather of range
fields (vizexport/tinygrad/common.py, profile.py) and the trace encoder's packet framing and tails
(vizexport/perfetto/wire.py); without one the install still succeeds and their numpy and Python references run
instead."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("vizexport.pickles._opscan", ["vizexport/pickles/_opscan.c"], optional=True),
                   Extension("vizexport.tinygrad._times", ["vizexport/tinygrad/_times.c"], optional=True),
                   Extension("vizexport.tinygrad._ranges", ["vizexport/tinygrad/_ranges.c"], optional=True),
                   Extension("vizexport.perfetto._wire", ["vizexport/perfetto/_wire.c"], optional=True)])
