"""The compiled part of the build: pyproject.toml holds the metadata. `pip install .` (or `-e .`) builds pass 1's C
frame walk with the system compiler; without one the install still succeeds and the numpy walk runs instead
(vizexport/pickles/opscan.py)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("vizexport.pickles._opscan", ["vizexport/pickles/_opscan.c"], optional=True)])
