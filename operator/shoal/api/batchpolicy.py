"""BatchPolicy: how requests to a model are gathered into batches.

The fields map onto Triton's dynamic batcher (``dynamic_batching`` in a model's
config.pbtxt); the operator renders them into every InferenceModel that names the
policy.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from shoal.api.common import (
    Conditions,
    DurationFormat,
    ObjectMeta,
    Rule,
    SpecModel,
    UniqueList,
    conditions_field,
    unique_by,
)

MAX_BATCH = 4096
MAX_PRIORITY_LEVELS = 16
DEFAULT_MAX_BATCH = 32

# Triton holds both in 64-bit microseconds; the bounds are what makes sense. A request
# waits for others to join its batch for milliseconds, not minutes; a queue timeout past
# an hour outlives any client waiting for the answer.
QueueDelay = Annotated[str, DurationFormat("0s", "10s", example="2ms")]
QueueTimeout = Annotated[str, DurationFormat("0s", "1h", example="30s")]


class QueuePolicy(SpecModel):
    """What happens to requests waiting in the batcher's queue."""

    max_queue_size: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Most requests that may wait; more are rejected at once. 0 means unbounded.",
    )
    timeout: QueueTimeout = Field(
        default="0s",
        description="How long a request may wait in the queue before timeoutAction applies; "
        "0s means no timeout.",
    )
    timeout_action: Literal["Reject", "Delay"] = Field(
        default="Reject",
        description="Reject: fail a request that waited past timeout. Delay: keep it, but let "
        "requests that have not timed out go first.",
    )
    allow_timeout_override: bool = Field(
        default=False,
        description="Whether a request may set a shorter timeout of its own.",
    )


class PriorityQueuePolicy(SpecModel):
    """A queue policy for the requests of one priority level."""

    priority: int = Field(
        ge=1, le=MAX_PRIORITY_LEVELS, description="The priority level (1 is highest)."
    )
    policy: QueuePolicy = Field(description="The queue policy for that level.")


class BatchPolicySpec(SpecModel):
    """How requests are gathered into batches before they reach the model."""

    max_batch_size: int = Field(
        default=DEFAULT_MAX_BATCH,
        ge=1,
        le=MAX_BATCH,
        description="Largest batch the model executes. Becomes the model's max_batch_size.",
    )
    max_queue_delay: QueueDelay = Field(
        default="2ms",
        description="Longest a request waits for others to join its batch, e.g. 500us, 5ms. "
        "Longer waits give bigger batches and more throughput, at some latency.",
    )
    preferred_batch_sizes: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_BATCH)]], UniqueList
    ] = Field(
        default_factory=list,
        max_length=16,
        description="Batch sizes the batcher forms as soon as it can (each at most "
        "maxBatchSize). Empty: form the largest batch possible within the delay.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    priority_levels: int = Field(
        default=0,
        ge=0,
        le=MAX_PRIORITY_LEVELS,
        description="Number of priority levels (1 is the highest). 0 disables priorities.",
    )
    default_priority: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PRIORITY_LEVELS,
        description="Priority of requests that name none. Requires priorityLevels; defaults "
        "to the lowest level.",
    )
    queue_policy: QueuePolicy = Field(
        default_factory=QueuePolicy,
        description="The default queue policy, for every priority level without its own.",
    )
    priority_queue_policies: Annotated[list[PriorityQueuePolicy], unique_by("priority")] = Field(
        default_factory=list,
        max_length=MAX_PRIORITY_LEVELS,
        description="Queue policies for particular priority levels, e.g. a short timeout for "
        "the interactive lane.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["priority"],
        },
    )
    preserve_ordering: bool = Field(
        default=False,
        description="Return responses in the order requests arrived (costs some throughput).",
    )

    rules = (
        Rule(
            # has(): a null (refused by its own rule) must not make this one fail to run.
            cel="!has(self.preferredBatchSizes) || !has(self.maxBatchSize) || "
            "self.preferredBatchSizes.all(s, s <= self.maxBatchSize)",
            check=lambda s: all(b <= s.max_batch_size for b in s.preferred_batch_sizes),
            message="every preferred batch size must be at most maxBatchSize",
            field=".preferredBatchSizes",
        ),
        Rule(
            cel="!has(self.defaultPriority) || !has(self.priorityLevels) || "
            "self.defaultPriority <= self.priorityLevels",
            check=lambda s: s.default_priority is None or s.default_priority <= s.priority_levels,
            message="defaultPriority must be between 1 and priorityLevels",
            field=".defaultPriority",
        ),
        Rule(
            cel="!has(self.priorityQueuePolicies) || !has(self.priorityLevels) || "
            "self.priorityQueuePolicies.all(p, p.priority <= self.priorityLevels)",
            check=lambda s: all(p.priority <= s.priority_levels for p in s.priority_queue_policies),
            message="each priorityQueuePolicies[].priority must be at most priorityLevels",
            field=".priorityQueuePolicies",
        ),
        Rule(
            # Triton refuses to load such a model: it keeps the order of one queue only.
            cel="!has(self.preserveOrdering) || !self.preserveOrdering || "
            "!has(self.priorityLevels) || self.priorityLevels <= 1",
            check=lambda s: not s.preserve_ordering or s.priority_levels <= 1,
            message="preserveOrdering allows at most one priority level: set priorityLevels "
            "to 0 or 1, or preserveOrdering to false",
            field=".preserveOrdering",
        ),
    )


class BatchPolicyStatus(SpecModel):
    """What the operator observed about the policy."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation last acted upon."
    )
    conditions: Conditions = conditions_field()
    models: int | None = Field(
        default=None, ge=0, description="How many InferenceModels use this policy."
    )


class BatchPolicy(SpecModel):
    """BatchPolicy describes how requests to a model are gathered into batches by Triton's
    dynamic batcher: batch sizes, how long to wait, priority lanes and queue limits.
    InferenceModels in the same namespace refer to it by name."""

    api_version: Literal["shoal.dev/v1alpha1"] = "shoal.dev/v1alpha1"
    kind: Literal["BatchPolicy"] = "BatchPolicy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: BatchPolicySpec = Field(default_factory=BatchPolicySpec)
    status: BatchPolicyStatus | None = None
