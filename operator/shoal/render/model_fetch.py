"""How a model's files get into the pod, beside its config.

Triton serves the repository at /models, the ``model-repository`` emptyDir: the model's
directory /models/<model>/ holds its version directories, and the rendered config.pbtxt
is mounted from the ConfigMap over /models/<model>/config.pbtxt, so it wins over any
config.pbtxt that came with the files. An init container of the rclone image (rclone,
and busybox's sh, tar and unzip) fills the model's directory first:

  s3://bucket/path     copied: rclone :s3: with credentials from the environment: the
                       pods' cloud identity (IRSA, ...), or the keys of the model's
                       s3.credentialsSecret; at AWS or at the model's s3.endpoint
  gs://bucket/path     copied: rclone :gcs: with credentials from the environment
                       (Workload Identity)
  https://host/path    copied from an HTTP directory listing (rclone :http:)
  https://host/m.tgz   an archive (.tar, .tar.gz, .tgz, .zip): downloaded (rclone
                       copyurl) beside the model's directory, unpacked into it, deleted
  pvc://claim/path     not copied: the claim is mounted read-only at /models/.source in
                       both containers, and the model's directory holds a symbolic link
                       to each entry of the claim's directory (but its config.pbtxt), so
                       Triton reads the files from the claim

Why links and not the claim itself at /models/<model>: the config is a file mounted over
/models/<model>/config.pbtxt, and the runtime must create that mount point when the
directory has no such file; on a read-only claim it cannot, and the container never
starts (runc: "open .../rootfs/models/<model>/config.pbtxt: read-only file system", seen
on the real node with a claim holding no config.pbtxt). A directory of links in the
emptyDir takes the mount point, and the claim stays read-only and uncopied.

A copy starts from an empty directory (a retry of the init container would otherwise
write each file again beside the one it replaces), so its peak is the model's size: with
``spec.model.size`` the emptyDir is limited to that plus a margin, and both containers
request it as ephemeral-storage (:func:`repository_room`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from shoal.api.formats import archive_format
from shoal.api.inferencemodel import S3_ACCESS_KEY, S3_SECRET_KEY, CaBundle, S3Storage
from shoal.api.quantity import canonical_quantity, quantity_value

MODEL_ROOT = "/models"
# Where a pvc:// model's claim is mounted, in both containers: inside the repository (a
# name no model can have), so the links' targets are the same in both.
SOURCE_MOUNT = f"{MODEL_ROOT}/.source"
# A downloaded archive, in the repository's emptyDir (so its limit bounds it too), out of
# the model's directory; deleted once unpacked.
ARCHIVE_PATH = f"{MODEL_ROOT}/.archive"
CA_MOUNT = "/etc/shoal/ca"
CA_FILE = f"{CA_MOUNT}/ca.crt"

# The init container's scripts: POSIX sh, run by the image's sh (busybox ash upstream).
# Paths and rclone's arguments come as the script's arguments, never inside its text.
# The kubelet expands $(NAME) in a command, so the scripts use no $( at all.
COPY_SCRIPT = 'dest="$1"; shift; rm -rf "$dest" && exec rclone "$@"'
ARCHIVE_SCRIPT = """set -eu
dest="$1"; archive="$2"; format="$3"; shift 3
rm -rf "$dest" "$archive"
rclone "$@" "$archive"
mkdir -p "$dest"
case "$format" in
  zip) unzip -q -o "$archive" -d "$dest" ;;
  tar.gz) tar -x -o -z -f "$archive" -C "$dest" ;;
  *) tar -x -o -f "$archive" -C "$dest" ;;
esac
rm -f "$archive"
for entry in "$dest"/* "$dest"/.[!.]* "$dest"/..?*; do
  if [ -e "$entry" ] || [ -L "$entry" ]; then
    echo "unpacked the archive into $dest"
    exit 0
  fi
done
echo "the archive holds no files: it must hold the model's version directories at its root" >&2
exit 1
"""
LINK_SCRIPT = """set -eu
source="$1"; dest="$2"; uri="$3"
if [ ! -d "$source" ]; then
  echo "$uri: no such directory in the claim" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
linked=""
for entry in "$source"/* "$source"/.[!.]* "$source"/..?*; do
  if [ ! -e "$entry" ] && [ ! -L "$entry" ]; then continue; fi
  name="${entry##*/}"
  if [ "$name" = config.pbtxt ]; then continue; fi
  ln -s "$entry" "$dest/$name"
  linked="$linked $name"
done
if [ -z "$linked" ]; then
  echo "$uri: the directory holds no files" >&2
  exit 1
fi
echo "linked from the claim:$linked"
"""

# Room for the links of a pvc:// model: directories and symbolic links only.
LINKS_ROOM = "16Mi"
# The margin on a copy's room. The kubelet measures an emptyDir by the blocks it holds,
# which round every file up to 4 KiB and add the directories, while a model's size is
# usually read as bytes (a bucket listing, du --apparent-size): 5% covers files of 80 KiB
# on average, the floor a small model of up to 16,000 files.
MARGIN_RATIO = 0.05
MARGIN_FLOOR = 64 * 2**20


@dataclass(frozen=True)
class FetchPlan:
    """The init container's command and arguments, the environment and volumes a source
    needs, and what Triton's container mounts of it."""

    command: list[str]
    args: list[str]
    env: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    serving_mounts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RepositoryRoom:
    """The ``model-repository`` emptyDir's sizeLimit and the ephemeral-storage each
    container requests for it; None: no limit, no request."""

    size_limit: str | None
    fetch_request: str | None = None
    serving_request: str | None = None


def needs_network(storage_uri: str) -> bool:
    """Whether fetching from ``storage_uri`` needs the network (every scheme but pvc://)."""
    return urlsplit(storage_uri).scheme != "pvc"


def _room(size_bytes: float) -> str:
    """``size_bytes`` and its margin, rounded up to whole Mi, as a quantity."""
    with_margin = max(size_bytes * (1 + MARGIN_RATIO), size_bytes + MARGIN_FLOOR)
    return canonical_quantity(f"{math.ceil(with_margin / 2**20)}Mi", resource_list=True)


def repository_room(storage_uri: str, size: str | None) -> RepositoryRoom:
    """Pure: the room a model's files take in its pod. A pvc:// model's links take
    little; a copy takes its size (unbounded when the model does not say), an archive
    twice that while it is unpacked beside its files (a .tar is its files and headers,
    and model weights barely compress), then its size while Triton serves it."""
    if not needs_network(storage_uri):
        return RepositoryRoom(LINKS_ROOM)
    if size is None:
        return RepositoryRoom(None)
    files = float(quantity_value(size))
    serving = _room(files)
    peak = _room(2 * files) if archive_format(storage_uri) else serving
    return RepositoryRoom(peak, fetch_request=peak, serving_request=serving)


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


def _ca_options(
    ca: CaBundle | None,
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """rclone's flag, the volume and the mount of a CA bundle. rclone trusts the file's
    certificates instead of the system's."""
    if ca is None:
        return [], [], []
    volume = {
        "name": "model-ca",
        "configMap": {"name": ca.name, "items": [{"key": ca.key, "path": "ca.crt"}]},
    }
    mount = {"name": "model-ca", "mountPath": CA_MOUNT, "readOnly": True}
    return [f"--ca-cert={CA_FILE}"], [volume], [mount]


def fetch_plan(
    storage_uri: str,
    model_name: str,
    s3: S3Storage | None = None,
    ca_bundle: CaBundle | None = None,
) -> FetchPlan:
    """Pure: the init container's work for a (validated) storage URI."""
    dest = f"{MODEL_ROOT}/{model_name}"
    parts = urlsplit(storage_uri)
    path = parts.path.strip("/")
    ca_flags, ca_volumes, ca_mounts = _ca_options(ca_bundle)
    if parts.scheme == "pvc":
        source = f"{SOURCE_MOUNT}/{path}" if path else SOURCE_MOUNT
        mount = {"name": "model-source", "mountPath": SOURCE_MOUNT, "readOnly": True}
        return FetchPlan(
            ["sh", "-c", LINK_SCRIPT, "link-model", source, dest, storage_uri],
            [],
            volumes=[
                {
                    "name": "model-source",
                    "persistentVolumeClaim": {"claimName": parts.netloc, "readOnly": True},
                }
            ],
            mounts=[mount],
            serving_mounts=[mount],
        )
    logging = ["--config=/dev/null", "--stats-one-line", "-v", *ca_flags]
    archive = archive_format(storage_uri)
    if archive is not None:
        return FetchPlan(
            ["sh", "-c", ARCHIVE_SCRIPT, "fetch-archive", dest, ARCHIVE_PATH, archive],
            ["copyurl", *logging, storage_uri],
            volumes=ca_volumes,
            mounts=ca_mounts,
        )
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
        *ca_flags,
    ]
    command = ["sh", "-c", COPY_SCRIPT, "fetch-model", dest]
    if parts.scheme == "s3":
        flags, env = _s3_options(s3)
        source = f":s3:{parts.netloc}/{path}"
        return FetchPlan(
            command,
            [*common, "--s3-env-auth", *flags, source, dest],
            env=env,
            volumes=ca_volumes,
            mounts=ca_mounts,
        )
    if parts.scheme == "gs":
        return FetchPlan(
            command,
            [*common, "--gcs-env-auth", f":gcs:{parts.netloc}/{path}", dest],
            volumes=ca_volumes,
            mounts=ca_mounts,
        )
    if parts.scheme == "https":
        url = f"https://{parts.netloc}/{path}/" if path else f"https://{parts.netloc}/"
        return FetchPlan(
            command,
            [*common, f"--http-url={url}", ":http:", dest],
            volumes=ca_volumes,
            mounts=ca_mounts,
        )
    raise ValueError(f"unsupported storage URI scheme in {storage_uri!r}")
