"""Operator configuration, read once from the environment at start-up."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shoal.api.common import LabelKey, LabelValue, Toleration
from shoal.api.formats import ImageReference
from shoal.render.gateway import DEFAULT_GATEWAY_IMAGE, DEFAULT_GATEWAY_NAMESPACE, GatewaySite
from shoal.render.images import (
    DEFAULT_FETCH_IMAGE,
    DEFAULT_TRITON_IMAGE,
    DEFAULT_TRITON_VLLM_IMAGE,
    ServingImages,
)
from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS


class Settings(BaseModel):
    """Everything that can be tuned without rebuilding the operator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespaces: tuple[str, ...] = Field(
        default=(), description="Namespaces to watch; empty means the whole cluster."
    )
    liveness_endpoint: str = Field(
        default="http://0.0.0.0:8080/healthz",
        description="Where kopf serves its liveness probe.",
    )
    resync_seconds: float = Field(
        default=60.0, gt=0, description="Period of the level-triggered re-check of every object."
    )
    prometheus_url: str | None = Field(
        default=None, description="Prometheus to read queue depth and latency from."
    )
    watch_server_timeout: int = Field(
        default=300, gt=0, description="Seconds the API server keeps one watch open."
    )
    watch_client_timeout: int = Field(
        default=330, gt=0, description="Seconds before a silent watch is dropped and re-opened."
    )

    metrics_port: int = Field(
        default=8081, ge=0, le=65535, description="Port of the operator's /metrics; 0: off."
    )
    watch_stale_seconds: float = Field(
        default=120.0,
        gt=0,
        description="How long the watch may lag the API server before liveness fails.",
    )
    cluster_cidrs: tuple[str, ...] = Field(
        default=DEFAULT_CLUSTER_CIDRS,
        description="The cluster's pod, Service and node networks (and the API server's "
        "address where it lies outside them): model downloads never reach them. A pool "
        "may say otherwise in access.modelDownload.clusterCIDRs.",
    )
    gateway_namespace: str = Field(
        default=DEFAULT_GATEWAY_NAMESPACE,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="Where the pools' gateways run (the namespace must exist, with the "
        "gateway's ServiceAccount: the chart and manifests/base create both).",
    )
    gateway_image: str = Field(
        default=DEFAULT_GATEWAY_IMAGE, min_length=1, description="The gateways' HAProxy image."
    )
    gateway_node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="Node labels the gateways' pods must match (ingress or CPU nodes, say); "
        "empty: any node.",
    )
    gateway_tolerations: tuple[Toleration, ...] = Field(
        default=(), description="Taints the gateways' pods tolerate, as a pod's tolerations."
    )
    triton_image: ImageReference = Field(
        default=DEFAULT_TRITON_IMAGE,
        description="The Triton image of a model whose spec.runtime.image is unset (but "
        "for backend vllm: triton_vllm_image).",
    )
    triton_vllm_image: ImageReference = Field(
        default=DEFAULT_TRITON_VLLM_IMAGE,
        description="The Triton image of a backend vllm model whose spec.runtime.image is "
        "unset: one with Triton's vLLM backend and vLLM, which the general image lacks. "
        "Not derived from triton_image: a mirror sets both.",
    )
    fetch_image: ImageReference = Field(
        default=DEFAULT_FETCH_IMAGE,
        description="The rclone image that copies a model's files into its pods.",
    )
    image: str = Field(
        default=GatewaySite().agent_image,
        min_length=1,
        description="The operator's own image: the gateways' agent runs it.",
    )
    verbose: bool = Field(default=False, description="Log every API call kopf makes.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text: one line per record; json: one JSON object per record, for log "
        "pipelines (the object's namespace and name as fields where a record is about one).",
    )
    leader_election_namespace: str | None = Field(
        default=None,
        description="Where the leader Lease is; set, only the replica holding it "
        "reconciles (run two or more replicas). Unset: this replica always reconciles.",
    )
    pod_name: str = Field(
        default="", description="This replica's name among the candidates (its pod's)."
    )
    workers: int = Field(
        default=16, ge=1, le=256, description="Threads that run reconciles concurrently."
    )

    @property
    def gateway(self) -> GatewaySite:
        """Where and with what the gateways run."""
        return GatewaySite(
            namespace=self.gateway_namespace,
            image=self.gateway_image,
            agent_image=self.image,
            node_selector=tuple(sorted(self.gateway_node_selector.items())),
            tolerations=self.gateway_tolerations,
        )

    @property
    def serving_images(self) -> ServingImages:
        """The images a model's pods run where its spec names none."""
        return ServingImages(
            triton=self.triton_image, fetch=self.fetch_image, triton_vllm=self.triton_vllm_image
        )

    @field_validator("cluster_cidrs")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            ipaddress.ip_network(network, strict=True)  # ValueError names the bad one
        return value

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``SHOAL_*`` variables; unset ones keep their defaults."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for key, name in (
            ("namespaces", "SHOAL_NAMESPACES"),
            ("cluster_cidrs", "SHOAL_CLUSTER_CIDRS"),
        ):
            if listed := env.get(name, "").strip():
                values[key] = tuple(n.strip() for n in listed.split(",") if n.strip())
        # Structured ones as JSON, as the chart writes them (toJson).
        for key, name in (
            ("gateway_node_selector", "SHOAL_GATEWAY_NODE_SELECTOR"),
            ("gateway_tolerations", "SHOAL_GATEWAY_TOLERATIONS"),
        ):
            if raw := env.get(name, "").strip():
                try:
                    values[key] = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{name} is not JSON: {exc}") from exc
        for key, name in (
            ("liveness_endpoint", "SHOAL_LIVENESS_ENDPOINT"),
            ("resync_seconds", "SHOAL_RESYNC_SECONDS"),
            ("prometheus_url", "SHOAL_PROMETHEUS_URL"),
            ("watch_server_timeout", "SHOAL_WATCH_SERVER_TIMEOUT"),
            ("watch_client_timeout", "SHOAL_WATCH_CLIENT_TIMEOUT"),
            ("workers", "SHOAL_WORKERS"),
            ("leader_election_namespace", "SHOAL_LEADER_ELECTION_NAMESPACE"),
            ("pod_name", "POD_NAME"),
            ("verbose", "SHOAL_VERBOSE"),
            ("log_format", "SHOAL_LOG_FORMAT"),
            ("gateway_namespace", "SHOAL_GATEWAY_NAMESPACE"),
            ("gateway_image", "SHOAL_GATEWAY_IMAGE"),
            ("image", "SHOAL_IMAGE"),
            ("triton_image", "SHOAL_TRITON_IMAGE"),
            ("triton_vllm_image", "SHOAL_TRITON_VLLM_IMAGE"),
            ("fetch_image", "SHOAL_FETCH_IMAGE"),
            ("metrics_port", "SHOAL_METRICS_PORT"),
            ("watch_stale_seconds", "SHOAL_WATCH_STALE_SECONDS"),
        ):
            if name in env and env[name] != "":
                values[key] = env[name]
        return cls.model_validate(values)
