"""The package's version, in a module of its own so that the model files and the command line
read it without importing the package's ``__init__`` (which imports them: a cycle)."""

__version__ = "0.1.0"
