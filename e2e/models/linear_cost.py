"""A Triton Python-backend model whose execution time grows with the batch like a GPU
kernel's: a fixed launch cost plus a small cost per item.

It echoes INPUT0 to OUTPUT0. The costs come from the model config's parameters
``base_ms`` and ``per_item_ms``, so tests and benchmarks shape the curve without
editing code. Copied into a model repository as ``<model>/1/model.py``.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        """Its tensors, for a config that leaves them out: Triton calls this when it runs
        without --disable-auto-complete-config, as the operator runs a model that
        declares no tensors. A declared tensor must agree (Triton refuses the model
        otherwise). max_batch_size is left alone: it is the BatchPolicy's."""
        auto_complete_model_config.add_input(
            {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        )
        auto_complete_model_config.add_output(
            {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}
        )
        return auto_complete_model_config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})

        def param(name, default):
            return float(params.get(name, {}).get("string_value", default))

        self.base_s = param("base_ms", 5.0) / 1000.0
        self.per_item_s = param("per_item_ms", 0.2) / 1000.0

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        items = sum(int(x.shape[0]) for x in inputs)
        time.sleep(self.base_s + self.per_item_s * items)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array(x, copy=True))])
            for x in inputs
        ]
