"""Container images for the real node, built here without a registry or a daemon.

An image is an OCI image layout in a tar archive (what ``ctr images import`` reads):
one uncompressed layer holding the given files, an image config, a manifest and an
index naming the image. The archives are reproducible (fixed times and owners) and
cached outside the repository, keyed by their inputs, so a second build is instant.

Two images: the pod sandbox's ``registry.k8s.io/pause`` (our own static pause program,
node/pause.c) and a small busybox image from Debian's busybox-static for the tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAUSE_SOURCE = HERE / "node" / "pause.c"
# The sandbox image containerd v2.4 pins by default; pods never name it.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"
# Debian's busybox-static, one binary with the applets the tests use (httpd, sh, ...).
BUSYBOX = Path("/bin/busybox")
BUSYBOX_IMAGE_REPO = "shoal.local/busybox"
# (Not wget: Debian's static build crashes resolving any address; nc works.)
BUSYBOX_APPLETS = (
    *("sh", "cat", "echo", "grep", "hostname", "httpd", "id", "ls", "nc", "printf", "seq"),
    *("sleep", "test", "["),
)

_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_INDEX = "application/vnd.oci.image.index.v1+json"


class ImageError(RuntimeError):
    """An image could not be built."""


@dataclass(frozen=True)
class Entry:
    """One file of a layer: a regular file's bytes, or a symbolic link's target."""

    data: bytes = b""
    mode: int = 0o644
    link: str = ""


def cache_dir() -> Path:
    root = os.environ.get("SHOAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shoal"
    )
    return Path(root) / "images"


def _tar_info(name: str, *, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def layer(files: Mapping[str, Entry]) -> bytes:
    """An uncompressed layer tar of ``files`` (paths relative to /), parents included."""
    dirs: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(_tar_info(d, mode=mode, kind=tarfile.DIRTYPE))
        for path in sorted(files):
            entry = files[path]
            if entry.link:
                info = _tar_info(path, mode=0o777, kind=tarfile.SYMTYPE)
                info.linkname = entry.link
                tar.addfile(info)
            else:
                info = _tar_info(path, mode=entry.mode)
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    return out.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = _tar_info(f"blobs/sha256/{digest}", mode=0o644)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def oci_archive(name: str, layer_tar: bytes, config: Mapping[str, object]) -> bytes:
    """An OCI image layout as a tar archive: ``name`` (repository:tag) over one layer."""
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": dict(config),
        "rootfs": {
            "type": "layers",
            "diff_ids": [f"sha256:{hashlib.sha256(layer_tar).hexdigest()}"],
        },
        "history": [{"created_by": "shoal e2e/cluster/images.py"}],
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        layer_digest = _blob(tar, layer_tar)
        config_bytes = json.dumps(image_config, sort_keys=True).encode()
        config_digest = _blob(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": {"mediaType": _CONFIG, "digest": config_digest, "size": len(config_bytes)},
            "layers": [{"mediaType": _LAYER, "digest": layer_digest, "size": len(layer_tar)}],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "mediaType": _INDEX,
            "manifests": [
                {
                    "mediaType": _MANIFEST,
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        # ctr names the imported image after this one.
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
        for path, data in (
            ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
            ("index.json", json.dumps(index, sort_keys=True).encode()),
        ):
            info = _tar_info(path, mode=0o644)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _cached(stem: str, key: str, build: Callable[[], bytes]) -> Path:
    path = cache_dir() / f"{stem}-{key[:16]}.tar"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(build())
        tmp.replace(path)
    return path


def pause_image() -> Path:
    """The pause image's archive (built with ``gcc -static`` on first use)."""
    source = PAUSE_SOURCE.read_bytes()
    key = hashlib.sha256(source + PAUSE_IMAGE.encode()).hexdigest()

    def build() -> bytes:
        gcc = shutil.which("gcc")
        if gcc is None:
            raise ImageError("gcc is needed to build the pause image (Debian: gcc, libc6-dev)")
        out = cache_dir() / "pause.bin"
        subprocess.run(
            [
                gcc,
                "-static",
                "-Os",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-o",
                str(out),
                str(PAUSE_SOURCE),
            ],
            check=True,
        )
        subprocess.run(["strip", str(out)], check=True)
        binary = out.read_bytes()
        out.unlink()
        files = {"pause": Entry(binary, mode=0o755)}
        return oci_archive(
            PAUSE_IMAGE, layer(files), {"Entrypoint": ["/pause"], "User": "65535:65535"}
        )

    return _cached("pause", key, build)


def busybox_version() -> str:
    """Debian's busybox-static version, as an image tag (epoch and '+' dropped)."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "busybox-static"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split(":")[-1].replace("+", "-").replace("~", "-")


def busybox_image() -> tuple[str, Path]:
    """The test image's name and archive: busybox-static with its applets as links, a
    passwd naming the unprivileged user 65532, and an empty /tmp."""
    if not BUSYBOX.exists():
        raise ImageError(
            f"{BUSYBOX} is missing: install Debian's busybox-static (make system-deps)"
        )
    name = f"{BUSYBOX_IMAGE_REPO}:{busybox_version()}"
    binary = BUSYBOX.read_bytes()
    key = hashlib.sha256(binary + name.encode() + " ".join(BUSYBOX_APPLETS).encode()).hexdigest()

    def build() -> bytes:
        files = {"bin/busybox": Entry(binary, mode=0o755)}
        files.update({f"bin/{a}": Entry(link="busybox") for a in BUSYBOX_APPLETS})
        files["etc/passwd"] = Entry(
            b"root:x:0:0:root:/:/bin/sh\nnonroot:x:65532:65532::/tmp:/bin/sh\n"
        )
        files["etc/group"] = Entry(b"root:x:0:\nnonroot:x:65532:\n")
        files["tmp/.keep"] = Entry(b"")
        config = {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"], "WorkingDir": "/"}
        return oci_archive(name, layer(files), config)

    return name, _cached("busybox", key, build)
