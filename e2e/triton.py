"""The real Triton Inference Server, on the CPU, for tests and benchmarks.

The ``nvidia-pytriton`` wheel ships the ``tritonserver`` binary (server 2.51) with its
Python backend. We run that binary directly on a model repository of our own, exactly
as the Deployments the operator renders run it on a GPU node: it parses and loads our
``config.pbtxt`` files as written, with ``--disable-auto-complete-config`` (or, with
``strict=False``, as the rendered flags say). Only the device differs (``KIND_CPU``
instances; the CUDA and NVML warnings it prints at start are harmless).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from e2e.cluster.local import free_port


def model_metric(text: str, name: str, model: str) -> float:
    """The sum of one metric's series for ``model`` in the server's metrics text (one
    series per version); fails when the model has none."""
    pattern = rf'^{name}\{{[^}}]*model="{model}"[^}}]*\}} (\S+)$'
    values = [float(m.group(1)) for m in re.finditer(pattern, text, re.MULTILINE)]
    assert values, f"{name} for {model} not in metrics:\n{text[:2000]}"
    return sum(values)


class TritonError(RuntimeError):
    """tritonserver did not become ready, or died."""


@dataclass(frozen=True)
class TritonInstall:
    """Where the wheel keeps the server, its Python backend and the backend stubs."""

    root: Path

    @classmethod
    def find(cls) -> TritonInstall:
        import pytriton  # the wheel's package; imported only to locate its files

        root = Path(pytriton.__file__).resolve().parent / "tritonserver"
        if not (root / "bin" / "tritonserver").exists():
            raise TritonError(f"no tritonserver binary under {root}; is nvidia-pytriton installed?")
        return cls(root)

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def libs(self) -> Path:
        return self.root.parent.parent / "nvidia_pytriton.libs"

    def stub(self) -> Path:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"


def backend_directory(install: TritonInstall, workdir: Path) -> Path:
    """A ``--backend-directory`` whose Python backend runs this interpreter's stub.

    The wheel keeps one stub per Python version apart from the backend; Triton looks
    for the stub beside ``libtriton_python.so``.
    """
    python = workdir / "backends" / "python"
    python.mkdir(parents=True, exist_ok=True)
    for item in (install.root / "backends" / "python").iterdir():
        target = python / item.name
        if item.is_file() and not target.exists():
            target.symlink_to(item)
    stub = python / "triton_python_backend_stub"
    if not stub.exists():
        shutil.copy2(install.stub(), stub)
    return workdir / "backends"


def server_environment(install: TritonInstall) -> dict[str, str]:
    """Environment for tritonserver and the Python backend stub it starts.

    The stub links ``libpython3.X.so``: this interpreter's library directory goes first,
    or an older system libpython may be picked up. The stub embeds Python with an
    isolated configuration that ignores PYTHONPATH; it finds its prefix from the first
    ``python3`` on PATH, so this interpreter's directory goes first on PATH, and a
    virtual environment's site-packages (numpy for model.py) is then found through its
    pyvenv.cfg.
    """
    env = dict(os.environ)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ld = [libdir, str(install.libs), env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in ld if p)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@dataclass
class TritonServer:
    """A running tritonserver process and its ports."""

    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    metrics_port: int
    log: Path
    args: list[str] = field(default_factory=list)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def log_tail(self, lines: int = 15) -> str:
        """The server's error lines (glog severity E), then the last ``lines`` lines."""
        if not self.log.exists():
            return ""
        all_lines = self.log.read_text(errors="replace").splitlines()
        errors = [line for line in all_lines if line.startswith("E")]
        return "\n".join([*errors, "...", *all_lines[-lines:]])

    def metrics(self) -> str:
        return httpx.get(self.metrics_url, timeout=5).text

    def stop(self, grace: float = 5.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# Flags of a rendered Triton container that a local run sets for itself: where the
# repository is, which ports and addresses it listens on, GPU metrics, and how long it
# waits on SIGTERM.
LOCAL_FLAGS = (
    "--model-repository=",
    "--http-port=",
    "--grpc-port=",
    "--metrics-port=",
    "--allow-gpu-metrics=",
    "--exit-timeout-secs=",
)


def rendered_server_args(deployment: Mapping[str, Any]) -> list[str]:
    """The server flags of a rendered Deployment's ``triton`` container, for ``start``'s
    ``extra_args``: every one but the command's name and the LOCAL_FLAGS. So a test runs
    the server as the operator configures it (model control, strictness, metrics, the
    response cache), not as the test would write it."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    args = list(next(c for c in containers if c["name"] == "triton")["args"])
    if args and not args[0].startswith("-"):
        args = args[1:]  # the command, "tritonserver"
    return [a for a in args if not a.startswith(LOCAL_FLAGS)]


def start(
    model_repository: Path,
    workdir: Path,
    *,
    extra_args: Sequence[str] = (),
    timeout: float = 90.0,
    wait_ready: bool = True,
    strict: bool = True,
) -> TritonServer:
    """Start tritonserver on ``model_repository`` and wait until it reports ready.

    ``strict``: load every config as written (``--disable-auto-complete-config``);
    False leaves that to ``extra_args``, as a rendered Deployment's flags decide it
    (``rendered_server_args``): without the flag, backends complete the configs.
    """
    install = TritonInstall.find()
    workdir.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port, metrics_port = free_port(), free_port(), free_port()
    args = [
        str(install.binary),
        f"--model-repository={model_repository}",
        f"--backend-directory={backend_directory(install, workdir)}",
        f"--cache-directory={install.root / 'caches'}",
        *(["--disable-auto-complete-config"] if strict else []),
        f"--http-port={http_port}",
        f"--grpc-port={grpc_port}",
        f"--metrics-port={metrics_port}",
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        "--metrics-address=127.0.0.1",
        "--allow-metrics=true",
        "--allow-gpu-metrics=false",
        "--metrics-config=summary_latencies=true",
        # The default waits 30s for in-flight requests on SIGTERM; tests want it quick.
        "--exit-timeout-secs=2",
        *extra_args,
    ]
    log = workdir / f"tritonserver-{http_port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_environment(install),
            cwd=workdir,
        )
    server = TritonServer(process, http_port, grpc_port, metrics_port, log, args)
    if wait_ready:
        try:
            wait_until_ready(server, timeout)
        except BaseException:
            server.stop()
            raise
    return server


def wait_until_ready(server: TritonServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise TritonError(
                f"tritonserver exited with {server.process.returncode}:\n{server.log_tail()}"
            )
        try:
            if httpx.get(f"{server.http_url}/v2/health/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TritonError(f"tritonserver not ready after {timeout:.0f}s:\n{server.log_tail()}")


@contextmanager
def running(model_repository: Path, workdir: Path, **kwargs: object) -> Iterator[TritonServer]:
    """``with running(repo, tmp) as server:`` starts and always stops tritonserver."""
    server = start(model_repository, workdir, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
