"""The package's version: a leaf that imports nothing, so any module (writers stamp it into their outputs) and
pyproject.toml (setuptools reads it) take it from here."""
__version__ = "0.1.0"
