"""The images a model's pods run where its spec names none.

They come from the operator's settings, so an air-gapped cluster points them at its own
mirror once (chart values ``tritonImage`` and ``fetchImage``) instead of in every model.
A backend that NVIDIA ships in an image of its own (vLLM) has a setting of its own: the
general Triton image, or a mirror of it, cannot serve it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.api.inferencemodel import DEFAULT_TRITON_IMAGE, DEFAULT_TRITON_VLLM_IMAGE

__all__ = [
    "DEFAULT_FETCH_IMAGE",
    "DEFAULT_IMAGES",
    "DEFAULT_TRITON_IMAGE",
    "DEFAULT_TRITON_VLLM_IMAGE",
    "ServingImages",
]

DEFAULT_FETCH_IMAGE = "docker.io/rclone/rclone:1.68.2"


@dataclass(frozen=True)
class ServingImages:
    # Triton, for a model without spec.runtime.image.
    triton: str = DEFAULT_TRITON_IMAGE
    # rclone, which copies the model's files into the pod before Triton starts.
    fetch: str = DEFAULT_FETCH_IMAGE
    # Triton with its vLLM backend, for a backend vllm model without spec.runtime.image.
    triton_vllm: str = DEFAULT_TRITON_VLLM_IMAGE

    def triton_for(self, backend: str | None) -> str:
        """The Triton image of a model with ``backend`` that names no image itself."""
        return self.triton_vllm if backend == "vllm" else self.triton


DEFAULT_IMAGES = ServingImages()
