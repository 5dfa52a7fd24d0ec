"""The client's version: sent in its User-Agent and shown by `leasectl --version` (pyproject.toml's `version`)."""

__version__ = "0.1.0"
