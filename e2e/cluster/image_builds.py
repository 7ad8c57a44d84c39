"""The images Shoal's pods name, built here with buildah: no registry, no daemon.

- ``docker.io/library/debian:bookworm-slim``: a Debian 12 ``minbase`` root file system
  made by debootstrap, the base of the others.
- Stand-ins for the upstream images, from ``containerfiles/`` (each says which of the
  upstream image's properties it mirrors): ``python:3.11-slim-bookworm`` (the operator
  Dockerfile's base), ``haproxy:2.6.12`` (the gateways), ``rclone/rclone`` (the model
  pods' fetch) and ``tritonserver`` (the model pods' server, the wheel's real binary).
- The operator's own image, from the project's ``Dockerfile`` as it is.

Each image is cached as a ``docker-archive`` tar (what ``ctr images import`` reads, with
its name) under ``~/.cache/shoal/images/``, keyed by its inputs and its base's key, so a
second build is a file lookup; a new build deletes the archives of that image's earlier
builds. buildah keeps its own storage beside it; an image whose
archive is cached but not in that storage is loaded back from the archive when another
image builds on it.

``RUN`` steps download Debian and PyPI packages: the operator's build gets the build
machine's pip configuration and CA certificates mounted read-only, so its ``pip install``
works behind a TLS-inspecting proxy as the machine's own pip does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e.cluster.images import ImageError, cache_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CONTAINERFILES = HERE / "containerfiles"
DEBIAN_RELEASE = "bookworm"

DEBIAN = "docker.io/library/debian:bookworm-slim"
PYTHON = "docker.io/library/python:3.11-slim-bookworm"
# The names Shoal renders and the chart defaults to, so pods need no override.
HAPROXY = "docker.io/library/haproxy:2.6.12"
RCLONE = "docker.io/rclone/rclone:1.68.2"
TRITON = "nvcr.io/nvidia/tritonserver:24.10-py3"
OPERATOR = "ghcr.io/shoal-dev/shoal-operator:0.1.0"

# What the operator Dockerfile copies (besides itself): its build's inputs.
OPERATOR_INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "constraints.txt", "README.md")
# Mounted into RUN steps when the build machine has them (see the module's docstring).
HOST_BUILD_FILES = (Path("/etc/pip.conf"), Path("/etc/ssl/certs/ca-certificates.crt"))


@dataclass(frozen=True)
class Image:
    """One image: its name, what it is built on, and the inputs its cache key hashes."""

    name: str
    base: str | None
    containerfile: Path | None
    stem: str


def _storage_args() -> list[str]:
    root = cache_dir().parent / "buildah"
    return [
        f"--root={root / 'storage'}",
        f"--runroot={root / 'run'}",
        "--storage-driver=vfs",
    ]


def _buildah(*args: str, capture: bool = False) -> str:
    buildah = shutil.which("buildah")
    if buildah is None:
        raise ImageError("buildah is needed to build the real node's images (make system-deps)")
    done = subprocess.run(
        [buildah, *_storage_args(), *args],
        check=False,
        text=True,
        stdout=subprocess.PIPE if capture else sys.stderr,
        stderr=subprocess.PIPE if capture else sys.stderr,
    )
    if done.returncode != 0:
        detail = (done.stderr or "").strip()[-2000:] if capture else "see the output above"
        raise ImageError(f"buildah {' '.join(args[:3])} failed: {detail}")
    return done.stdout or ""


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _tree_digest(root: Path, paths: Iterable[str]) -> bytes:
    """The names and bytes of every file under ``paths`` (relative to ``root``)."""
    h = hashlib.sha256()
    for name in paths:
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts:
                continue
            h.update(f.relative_to(root).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.digest()


def _wheel_tritonserver() -> tuple[Path, Path]:
    """The installed nvidia-pytriton wheel's server tree and its bundled libraries."""
    import pytriton

    server = Path(pytriton.__file__).resolve().parent / "tritonserver"
    libs = server.parent.parent / "nvidia_pytriton.libs"
    if not (server / "bin" / "tritonserver").exists() or not libs.is_dir():
        raise ImageError(f"no tritonserver in the nvidia-pytriton wheel at {server}")
    return server, libs


def _inputs_digest(image: Image) -> bytes:
    if image.name == OPERATOR:
        return _tree_digest(REPO, (*OPERATOR_INPUTS, "operator"))
    if image.name == TRITON:
        server, libs = _wheel_tritonserver()
        return _tree_digest(server.parent.parent, (server.name, libs.name))
    return b""


IMAGES = {
    i.name: i
    for i in (
        Image(DEBIAN, None, None, "debian"),
        Image(PYTHON, DEBIAN, CONTAINERFILES / "python.Containerfile", "python"),
        Image(HAPROXY, DEBIAN, CONTAINERFILES / "haproxy.Containerfile", "haproxy"),
        Image(RCLONE, DEBIAN, CONTAINERFILES / "rclone.Containerfile", "rclone"),
        Image(TRITON, PYTHON, CONTAINERFILES / "tritonserver.Containerfile", "tritonserver"),
        Image(OPERATOR, PYTHON, REPO / "Dockerfile", "operator"),
    )
}


def key(name: str) -> str:
    """The cache key of an image: its recipe, its inputs and its base's key."""
    image = IMAGES[name]
    recipe = image.containerfile.read_bytes() if image.containerfile else DEBIAN_RELEASE.encode()
    base = key(image.base).encode() if image.base else b""
    return _digest(image.name.encode(), recipe, _inputs_digest(image), base)


def archive(name: str) -> Path:
    return cache_dir() / f"{IMAGES[name].stem}-{key(name)[:16]}.tar"


def _in_storage(name: str) -> bool:
    out = _buildah("images", "--format", "{{.Name}}:{{.Tag}}", capture=True)
    return name in out.split()


def _load(name: str) -> None:
    """Put an image whose archive is cached back into buildah's storage."""
    _buildah("pull", "--quiet", f"docker-archive:{archive(name)}", capture=True)
    _record(name)


def _save(name: str) -> Path:
    path = archive(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    _buildah("push", "--quiet", name, f"docker-archive:{tmp}:{name}", capture=True)
    tmp.replace(path)
    return path


def _debootstrap(into: Path) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageError("debootstrap is needed for the images' Debian base (make system-deps)")
    subprocess.run(
        [debootstrap, "--variant=minbase", DEBIAN_RELEASE, str(into)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        shutil.rmtree(into / junk, ignore_errors=True)
    (into / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)


def _build_debian() -> None:
    with tempfile.TemporaryDirectory(prefix="shoal-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _debootstrap(rootfs)
        container = _buildah("from", "scratch", capture=True).strip()
        try:
            mount = _buildah("mount", container, capture=True).strip()
            subprocess.run(["cp", "-a", f"{rootfs}/.", mount], check=True)
            _buildah("umount", container, capture=True)
            _buildah(
                "config",
                "--env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--cmd=bash",
                "--os=linux",
                "--arch=amd64",
                container,
                capture=True,
            )
            _buildah("commit", "--quiet", container, DEBIAN, capture=True)
        finally:
            _buildah("rm", container, capture=True)


def _context(image: Image, tmp: Path) -> Path:
    """The build context: the repository for the operator, the wheel's server tree for
    Triton, an empty directory for the rest."""
    if image.name == OPERATOR:
        return REPO
    context = tmp / "context"
    context.mkdir()
    if image.name == TRITON:
        server, libs = _wheel_tritonserver()
        shutil.copytree(
            server, context / "tritonserver", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copytree(libs, context / "lib")
    return context


def _build_from_file(image: Image) -> None:
    assert image.containerfile is not None
    # Only pip needs them: a Debian package step would find its own CA bundle read-only.
    host_files = HOST_BUILD_FILES if image.name == OPERATOR else ()
    mounts = [f"--volume={p}:{p}:ro" for p in host_files if p.exists()]
    with tempfile.TemporaryDirectory(prefix="shoal-context-") as tmp:
        _buildah(
            "bud",
            "--isolation=chroot",
            "--pull-never",
            "--layers=false",
            "--quiet",
            *mounts,
            f"--file={image.containerfile}",
            f"--tag={image.name}",
            str(_context(image, Path(tmp))),
        )


def ensure(name: str, log: Callable[[str], None] = print) -> Path:
    """The archive of image ``name``, built (with its bases) unless it is cached."""
    path = archive(name)
    if path.exists():
        return path
    image = IMAGES[name]
    started = time.monotonic()
    if image.base is not None:
        ensure(image.base, log)
        if not _in_storage(image.base) or not _stored_is_current(image.base):
            _load(image.base)
    log(f"building image {name}")
    if image.containerfile is None:
        _build_debian()
    else:
        _build_from_file(image)
    saved = _save(name)
    _record(name)
    _prune_superseded(name)
    log(f"built image {name} in {time.monotonic() - started:.0f} s")
    return saved


def _prune_superseded(name: str) -> None:
    """Delete the archives of ``name``'s earlier builds: each is hundreds of MiB, and a
    change to any input (the README included, for the operator) makes a new one."""
    current = archive(name)
    for old in current.parent.glob(f"{IMAGES[name].stem}-*.tar"):
        if old != current:
            old.unlink(missing_ok=True)


def _marker(name: str) -> Path:
    return cache_dir().parent / "buildah" / f"{IMAGES[name].stem}.key"


def _record(name: str) -> None:
    """Note which build of ``name`` buildah's storage holds."""
    _marker(name).parent.mkdir(parents=True, exist_ok=True)
    _marker(name).write_text(key(name))


def _stored_is_current(name: str) -> bool:
    marker = _marker(name)
    return marker.exists() and marker.read_text() == key(name)


def ensure_all(names: Iterable[str] = (HAPROXY, RCLONE, TRITON, OPERATOR)) -> dict[str, Path]:
    """The archives of ``names`` (the images Shoal's pods run), built where missing."""
    return {name: ensure(name) for name in names}


def main() -> int:
    for name, path in ensure_all().items():
        size = os.path.getsize(path) / 2**20
        print(f"{name}\t{path}\t{size:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
