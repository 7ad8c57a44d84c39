"""How a model's files get from its storage URI into the pod, beside its config.

An init container copies the version directories into the ``model-repository``
emptyDir with rclone (one tool for every scheme). The rendered config.pbtxt is then
mounted from the ConfigMap on top, at ``/models/<model>/config.pbtxt``, so it wins over
any config.pbtxt that came with the files.

  s3://bucket/path     rclone :s3:  with credentials from the environment (IRSA, ...)
  gs://bucket/path     rclone :gcs: with credentials from the environment (Workload Identity)
  pvc://claim/path     the claim mounted read-only at /mnt/source, copied locally
  https://host/path    an HTTP directory listing (rclone :http:)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MODEL_ROOT = "/models"
SOURCE_MOUNT = "/mnt/source"


@dataclass(frozen=True)
class FetchPlan:
    """The init container's arguments and the extra volume a source needs."""

    args: list[str]
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def needs_network(storage_uri: str) -> bool:
    """Whether fetching from ``storage_uri`` needs the network (every scheme but pvc://)."""
    return urlsplit(storage_uri).scheme != "pvc"


def fetch_plan(storage_uri: str, model_name: str) -> FetchPlan:
    """Pure: the copy command for a (validated) storage URI."""
    dest = f"{MODEL_ROOT}/{model_name}"
    parts = urlsplit(storage_uri)
    path = parts.path.strip("/")
    common = ["copy", "--config=/dev/null", "--retries=5", "--stats-one-line", "-v"]
    if parts.scheme == "s3":
        return FetchPlan([*common, "--s3-env-auth", f":s3:{parts.netloc}/{path}", dest])
    if parts.scheme == "gs":
        return FetchPlan([*common, "--gcs-env-auth", f":gcs:{parts.netloc}/{path}", dest])
    if parts.scheme == "https":
        url = f"https://{parts.netloc}/{path}/" if path else f"https://{parts.netloc}/"
        return FetchPlan([*common, f"--http-url={url}", ":http:", dest])
    if parts.scheme == "pvc":
        source = f"{SOURCE_MOUNT}/{path}" if path else SOURCE_MOUNT
        return FetchPlan(
            [*common, source, dest],
            volumes=[
                {
                    "name": "model-source",
                    "persistentVolumeClaim": {"claimName": parts.netloc, "readOnly": True},
                }
            ],
            mounts=[{"name": "model-source", "mountPath": SOURCE_MOUNT, "readOnly": True}],
        )
    raise ValueError(f"unsupported storage URI scheme in {storage_uri!r}")
