"""Shoal: many models, many tenants, on NVIDIA Triton Inference Server."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("shoal")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
