"""A stand-in for Triton's vLLM backend (a Python-based backend named ``vllm``).

vLLM needs a GPU, so the real engine cannot run here. This backend keeps what the real
one (vllm_backend r24.10, src/model.py) demands of a model's config and files when it
loads, and answers as it does, echoing the prompt word by word instead of generating:

- the ``text_output`` output's config is read for its data type;
- the model must be decoupled (the real backend asserts it);
- ``model.json`` (the engine's arguments) must be in the model's directory;
- KIND_GPU is refused when ``tensor_parallel_size`` is above 1.

It has no ``auto_complete_config``: the operator runs a vllm model's server with
--disable-auto-complete-config, which would not call it, so the config must already be
whole, as the operator renders it.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        output = pb_utils.get_output_config_by_name(self.model_config, "text_output")
        self.output_dtype = pb_utils.triton_string_to_numpy(output["data_type"])
        assert pb_utils.using_decoupled_model_transaction_policy(self.model_config), (
            "vLLM Triton backend must be configured to use decoupled model transaction policy"
        )
        model_dir = pb_utils.get_model_dir()
        path = os.path.join(model_dir, "model.json")
        assert os.path.isfile(path), f"'model.json' with the engine's arguments not in {model_dir}"
        with open(path) as file:
            self.engine_args = json.load(file)
        self.kind = args["model_instance_kind"]
        if int(self.engine_args.get("tensor_parallel_size", 1)) > 1 and self.kind == "GPU":
            raise ValueError(
                "KIND_GPU is currently for single-GPU models, please specify KIND_MODEL "
                "in the model's config.pbtxt for multi-GPU models"
            )

    def _flag(self, request, name):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        return bool(tensor.as_numpy().flatten()[0]) if tensor is not None else False

    def _respond(self, sender, text, final):
        array = np.asarray([text.encode()], dtype=self.output_dtype)
        response = pb_utils.InferenceResponse([pb_utils.Tensor("text_output", array)])
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        sender.send(response, flags=flags)

    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input")
            text = prompt.as_numpy().flatten()[0].decode()
            sampling = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
            params = json.loads(sampling.as_numpy().flatten()[0]) if sampling is not None else {}
            words = text.split()[: int(params.get("max_tokens", 16))]
            if not self._flag(request, "exclude_input_in_output"):
                words = [f"[{self.kind}]", *words]
            sender = request.get_response_sender()
            if self._flag(request, "stream"):
                for i, word in enumerate(words):
                    self._respond(sender, word, final=i == len(words) - 1)
            else:
                self._respond(sender, " ".join(words), final=True)
        return None
