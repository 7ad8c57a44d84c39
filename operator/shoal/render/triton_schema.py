"""Triton's ModelConfig protobuf schema, without the gRPC client around it.

tritonclient ships the schema as ``tritonclient.grpc.model_config_pb2``. Importing it
through its package runs ``tritonclient.grpc``'s ``__init__``, which loads the whole
gRPC client (grpcio, numpy, ml_dtypes): about 40 MB of the operator's memory for a
module that needs only protobuf. The module is loaded from its own file instead, under
its own name, so that a later ``import tritonclient.grpc`` in the same process finds it
and does not register the schema twice.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCHEMA_MODULE = "tritonclient.grpc.model_config_pb2"


def model_config_schema() -> ModuleType:
    """The ``model_config_pb2`` module tritonclient ships (loaded once)."""
    loaded = sys.modules.get(SCHEMA_MODULE)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("tritonclient")
    if package is None or package.origin is None:
        raise ModuleNotFoundError("tritonclient is not installed", name="tritonclient")
    path = Path(package.origin).parent / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location(SCHEMA_MODULE, path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no {SCHEMA_MODULE} at {path}", name=SCHEMA_MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[SCHEMA_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[SCHEMA_MODULE]
        raise
    return module
