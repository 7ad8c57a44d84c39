"""How a model's files get from its storage URI into the pod, beside its config.

An init container copies the version directories into the ``model-repository``
emptyDir with rclone (one tool for every scheme). The rendered config.pbtxt is then
mounted from the ConfigMap on top, at ``/models/<model>/config.pbtxt``, so it wins over
any config.pbtxt that came with the files.

  s3://bucket/path     rclone :s3:  with credentials from the environment: the pods'
                       cloud identity (IRSA, ...), or the keys of the model's
                       s3.credentialsSecret; at AWS or at the model's s3.endpoint
  gs://bucket/path     rclone :gcs: with credentials from the environment (Workload Identity)
  pvc://claim/path     the claim mounted read-only at /mnt/source, copied locally
  https://host/path    an HTTP directory listing (rclone :http:)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from shoal.api.inferencemodel import S3_ACCESS_KEY, S3_SECRET_KEY, S3Storage

MODEL_ROOT = "/models"
SOURCE_MOUNT = "/mnt/source"


@dataclass(frozen=True)
class FetchPlan:
    """The init container's arguments and the extra volume a source needs."""

    args: list[str]
    env: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def needs_network(storage_uri: str) -> bool:
    """Whether fetching from ``storage_uri`` needs the network (every scheme but pvc://)."""
    return urlsplit(storage_uri).scheme != "pvc"


def _s3_options(s3: S3Storage | None) -> tuple[list[str], list[dict[str, Any]]]:
    """rclone's flags and the environment for an S3-compatible store; the keys come from
    the Secret through the environment, so they never show in the pod's arguments."""
    if s3 is None:
        return [], []
    flags: list[str] = []
    if s3.endpoint:
        flags += ["--s3-provider=Other", f"--s3-endpoint={s3.endpoint}"]
    if s3.region:
        flags.append(f"--s3-region={s3.region}")
    flags.append(f"--s3-force-path-style={str(s3.path_style).lower()}")
    env = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": s3.credentials_secret, "key": key}}}
        for key in (S3_ACCESS_KEY, S3_SECRET_KEY)
        if s3.credentials_secret
    ]
    return flags, env


def fetch_plan(storage_uri: str, model_name: str, s3: S3Storage | None = None) -> FetchPlan:
    """Pure: the copy command for a (validated) storage URI."""
    dest = f"{MODEL_ROOT}/{model_name}"
    parts = urlsplit(storage_uri)
    path = parts.path.strip("/")
    # An object store has no directories: a prefix that holds nothing copies nothing and
    # rclone would succeed. Every file is copied even when an earlier run of this
    # container left it in place, so that "nothing copied" (exit 9) means "no files".
    common = [
        "copy",
        "--config=/dev/null",
        "--retries=5",
        "--ignore-times",
        "--error-on-no-transfer",
        "--stats-one-line",
        "-v",
    ]
    if parts.scheme == "s3":
        flags, env = _s3_options(s3)
        source = f":s3:{parts.netloc}/{path}"
        return FetchPlan([*common, "--s3-env-auth", *flags, source, dest], env=env)
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
