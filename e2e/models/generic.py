"""A Triton Python-backend model that serves any config: zeros for every output.

Used to load configs rendered for other backends (ONNX, TensorRT, ...) into the real
server on a CPU: the config is what is under test, not the numbers.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.outputs = [
            (
                o["name"],
                pb_utils.triton_string_to_numpy(o["data_type"]),
                [max(int(d), 1) for d in o["dims"]],
            )
            for o in config.get("output", [])
        ]
        self.inputs = [i["name"] for i in config.get("input", [])]

    def execute(self, requests):
        responses = []
        for request in requests:
            batch = 1
            if self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, self.inputs[0])
                if tensor is not None and tensor.as_numpy().ndim > 0:
                    batch = tensor.as_numpy().shape[0]
            tensors = [
                pb_utils.Tensor(name, np.zeros([batch, *dims], dtype=dtype))
                for name, dtype, dims in self.outputs
            ]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
