"""The batching a model actually gets: its BatchPolicy with the model's overrides."""

from __future__ import annotations

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel


def effective_batching(model: InferenceModel, policy: BatchPolicySpec | None) -> BatchPolicySpec:
    """Merge the referenced policy (or the defaults) with the model's overrides.

    Raises ValueError when the result cannot serve the model: the overrides break the
    policy's rules (a maxBatchSize below a preferred batch size), or a warm-up batch is
    larger than the maximum batch.
    """
    merged = policy or BatchPolicySpec()
    ref = model.spec.batch_policy
    if ref is not None:
        overrides = {
            "max_batch_size": ref.max_batch_size,
            "max_queue_delay": ref.max_queue_delay,
            "default_priority": ref.default_priority,
        }
        changed = merged.model_dump() | {k: v for k, v in overrides.items() if v is not None}
        merged = BatchPolicySpec.model_validate(changed)
    warmup = model.spec.model.warmup
    too_big = [b for b in (warmup.batch_sizes if warmup else []) if b > merged.max_batch_size]
    if too_big:
        # Triton refuses to load a model whose warm-up batch exceeds max_batch_size.
        raise ValueError(
            f"warmup batch sizes {too_big} exceed the maxBatchSize of {merged.max_batch_size}"
        )
    return merged
