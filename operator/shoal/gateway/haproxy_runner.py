"""Run and reload HAProxy on files: write atomically, check with ``haproxy -c``, reload.

HAProxy runs in master-worker mode (``-W``) with its master CLI on a unix socket
(``-S``). A change is applied by :func:`apply`:

1. the files the configuration names (signing keys) are written, each atomically
   (a temporary file in the same directory, then ``rename``);
2. the new configuration is written beside the live one and checked with
   ``haproxy -c`` (with the replica's ``-L`` name, as peers depend on it), and the key
   files it names are checked to be PEM public keys (``haproxy -c`` accepts a missing
   one); if either is refused, :class:`InvalidConfigError` is raised with what is wrong
   (HAProxy's own message), and the live file and the running workers are untouched;
3. the checked file replaces the live one (``rename``);
4. once the running worker can hand its stick tables over (HAProxy 2.6 does so only
   after the worker's own start-up resync, up to 5 s after it started), the servers'
   states are saved through its runtime API (the configuration loads them, so a
   replica that was down stays down in the new worker) and the master is told to
   ``reload``: it starts a new worker on the new file, which takes the listening
   sockets over from the old one (``expose-fd listeners``) and learns the stick
   tables from it (the local peer); the old worker finishes its requests, bounded by
   ``hard-stop-after``;
5. the master's reload counter is watched until it moves (a failed load is reported
   as :class:`ReloadError`), then the new worker until it has learned the tables.

No module state: every function takes the paths it works on. The file names and
HAProxy's command line come from shoal.render.gateway_files, shared with the operator.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shoal.render.gateway_files import CANDIDATE_FILE, CONFIG_FILE, RuntimePaths


class GatewayError(RuntimeError):
    """HAProxy could not be reached, or did not do what it was asked."""


class InvalidConfigError(GatewayError):
    """``haproxy -c`` refused a configuration; nothing was changed."""

    def __init__(self, output: str) -> None:
        super().__init__(f"haproxy refused the configuration; the old one keeps serving:\n{output}")
        self.output = output


class ReloadError(GatewayError):
    """The master could not load the new configuration; the old workers keep serving."""


@dataclass(frozen=True)
class MasterStatus:
    """What the master CLI's ``show proc`` says."""

    reloads: int
    failed_reloads: int
    workers: tuple[int, ...]  # process ids of the current workers, newest first
    # Workers of earlier configurations still finishing their requests.
    old_workers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Applied:
    """The outcome of :func:`apply`."""

    reloaded: bool
    reloads: int  # the master's reload count after this change
    seconds: float
    tables_handed_over: bool = True


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``path`` holds either its old content or ``data``, never a part of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


_JWT_KEY = re.compile(r'jwt_verify\("[A-Z0-9]+","([^"]+)"\)')
PUBLIC_KEY_PEM = b"-----BEGIN PUBLIC KEY-----"


def key_file_problems(config_text: str) -> list[str]:
    """What is wrong with the key files ``jwt_verify`` names. HAProxy 2.6 loads them as
    PEM public keys (SubjectPublicKeyInfo; not certificates) at start-up but accepts a
    configuration whose key is missing or unreadable, and then refuses every token signed
    with that key: so they are checked here."""
    problems = []
    for path in sorted(set(_JWT_KEY.findall(config_text))):
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            problems.append(f"{path}: {error.strerror or error}")
            continue
        if PUBLIC_KEY_PEM not in data:
            problems.append(f"{path}: not a PEM public key ({PUBLIC_KEY_PEM.decode()})")
    return problems


def check(config: Path, local_peer: str, binary: str = "haproxy", timeout: float = 30) -> None:
    """``haproxy -c`` on ``config``, and its key files; :class:`InvalidConfigError` with
    what is wrong if either is refused."""
    problems = key_file_problems(config.read_text())
    if problems:
        raise InvalidConfigError("\n".join(problems))
    result = subprocess.run(
        [binary, "-c", "-f", str(config), "-L", local_peer],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise InvalidConfigError((result.stdout + result.stderr).strip())


def cli(socket_path: str, request: str, timeout: float = 5.0) -> str:
    """One command on a HAProxy CLI socket (master or worker); its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(socket_path)
            conn.sendall(request.encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except OSError as error:
            raise GatewayError(f"{socket_path}: {request!r}: {error}") from error
    return b"".join(chunks).decode(errors="replace")


_MASTER_LINE = re.compile(r"^\d+\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]")
_WORKER_LINE = re.compile(r"^(\d+)\s+worker\s+(\d+)")


def master_status(runtime: RuntimePaths, timeout: float = 5.0) -> MasterStatus:
    """The master's reload counters and current workers (``show proc``)."""
    text = cli(runtime.master_socket, "show proc", timeout)
    reloads = failed = -1
    workers: dict[str, list[tuple[int, int]]] = {"# workers": [], "# old workers": []}
    section = ""
    for line in text.splitlines():
        if line.startswith("#"):
            section = line.strip()
            continue
        if match := _MASTER_LINE.match(line):
            reloads, failed = int(match[1]), int(match[2])
        elif (match := _WORKER_LINE.match(line)) and section in workers:
            workers[section].append((int(match[2]), int(match[1])))
    if reloads < 0:
        raise GatewayError(f"unexpected answer to show proc:\n{text}")
    return MasterStatus(
        reloads,
        failed,
        tuple(pid for _, pid in sorted(workers["# workers"])),
        tuple(pid for _, pid in sorted(workers["# old workers"])),
    )


def worker_cli(runtime: RuntimePaths, pid: int, request: str, timeout: float = 5.0) -> str:
    """A command for one worker, through the master CLI (``@!<pid>``): during a reload
    the old and the new worker both run, and this names which one answers."""
    return cli(runtime.master_socket, f"@!{pid} {request}", timeout)


# "show peers": the section's line carries its resync flags. Bits 0x1 and 0x2: the
# worker has finished learning the tables from its local predecessor and from the
# remote peers; 0x100/0x400: the local predecessor taught it (fully/partly).
_PEERS_FLAGS = re.compile(r"^0x[0-9a-f]+: .* id=\S+ .*flags=0x([0-9a-f]+)", re.MULTILINE)
RESYNC_FINISHED = 0x3
RESYNC_LOCAL_DONE = 0x1
TAUGHT_BY_PREDECESSOR = 0x100 | 0x400


def peers_flags(runtime: RuntimePaths, pid: int) -> int:
    match = _PEERS_FLAGS.search(worker_cli(runtime, pid, "show peers"))
    if not match:
        raise GatewayError("no peers section in the running configuration")
    return int(match[1], 16)


def _wait_flags(runtime: RuntimePaths, pid: int, bits: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        flags = peers_flags(runtime, pid)
        if flags & bits == bits or time.monotonic() > deadline:
            return flags
        time.sleep(0.05)


def save_server_state(runtime: RuntimePaths, pid: int) -> None:
    """The servers' states, for the next worker to start from (``server-state-file``)."""
    state = worker_cli(runtime, pid, "show servers state")
    if state.startswith("1\n"):  # the file format's version line
        write_atomically(Path(runtime.server_state), state.encode(), mode=0o600)


@dataclass(frozen=True)
class Reloaded:
    status: MasterStatus
    # Whether the new worker learned the stick tables (the tenants' request counts)
    # from the old one; False means they restart from zero.
    tables_handed_over: bool


def reload(runtime: RuntimePaths, timeout: float = 30.0) -> Reloaded:
    """Tell the master to reload and wait until it has: a new worker serves the current
    file and has learned the stick tables, the old one finishes its requests.
    :class:`ReloadError` if the master could not load the file.

    HAProxy 2.6 hands the tables over only from a worker that has finished its own
    start-up resync (from its predecessor, then from the remote peers, or after
    5 s without them): a reload sooner loses them. So this first waits for that."""
    before = master_status(runtime)
    deadline = time.monotonic() + timeout
    if before.workers:
        _wait_flags(runtime, before.workers[0], RESYNC_FINISHED, timeout / 2)
        save_server_state(runtime, before.workers[0])
    cli(runtime.master_socket, "reload")
    while time.monotonic() < deadline:
        try:
            after = master_status(runtime)
        except GatewayError:
            time.sleep(0.05)  # the master re-executes itself: its socket is back shortly
            continue
        if after.failed_reloads > before.failed_reloads:
            raise ReloadError(
                "the master could not load the new configuration; the old workers keep "
                "serving (see haproxy's log)"
            )
        if after.reloads > before.reloads and after.workers:
            remaining = max(0.1, deadline - time.monotonic())
            flags = _wait_flags(runtime, after.workers[0], RESYNC_LOCAL_DONE, remaining)
            return Reloaded(after, bool(flags & TAUGHT_BY_PREDECESSOR) or not before.workers)
        time.sleep(0.05)
    raise GatewayError(f"no reload within {timeout:.0f}s")


def _relative(name: str) -> Path:
    path = Path(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"{name!r}: files are named relative to the gateway's directory")
    return path


def apply(
    directory: Path,
    config_text: str,
    runtime: RuntimePaths,
    local_peer: str,
    *,
    files: Mapping[str, bytes] | None = None,
    binary: str = "haproxy",
    reload_running: bool = True,
    timeout: float = 30.0,
) -> Applied:
    """Make ``config_text`` (and ``files``, named relative to ``directory``) the
    gateway's configuration, checked first; reload a running HAProxy unless told not
    to (the first start, before HAProxy runs). :class:`InvalidConfigError` leaves the live
    configuration as it was. Applying what is already there does nothing."""
    started = time.monotonic()
    live = directory / CONFIG_FILE
    changed = {
        directory / _relative(name): data
        for name, data in sorted((files or {}).items())
        if not (directory / _relative(name)).exists()
        or (directory / _relative(name)).read_bytes() != data
    }
    if live.exists() and live.read_text() == config_text and not changed:
        # Nothing to do: an agent may apply what it renders on every pass.
        return Applied(False, master_status(runtime).reloads if reload_running else 0, 0.0)
    for path, data in changed.items():
        write_atomically(path, data)
    candidate = directory / CANDIDATE_FILE
    write_atomically(candidate, config_text.encode())
    try:
        check(candidate, local_peer, binary)
    except InvalidConfigError:
        candidate.unlink(missing_ok=True)
        raise
    os.replace(candidate, live)
    if not reload_running:
        return Applied(False, 0, time.monotonic() - started)
    done = reload(runtime, timeout)
    return Applied(True, done.status.reloads, time.monotonic() - started, done.tables_handed_over)


def wait_ready(runtime: RuntimePaths, timeout: float = 30.0) -> None:
    """Until the master answers and has a worker (after the process was started)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            if master_status(runtime).workers:
                return
        except GatewayError as error:
            last = str(error)
        time.sleep(0.05)
    raise GatewayError(f"haproxy's master did not come up in {timeout:.0f}s: {last}")
