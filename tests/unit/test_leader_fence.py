"""The leader's write fence and its election decisions, on a clock the test drives.

The fence is what keeps a deposed leader from writing: it must close at the renew
deadline counted from the start of the last successful renew, whatever the election
loop is doing, and every write the operator sends must pass it. The elector's decisions
(take, renew, step down) are checked against a Lease API that keeps a real Lease's
optimistic-concurrency rule.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from shoal.kube.client import Kube
from shoal.leader import (
    LEASE_CALL_SECONDS,
    LEASE_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RETRY_SECONDS,
    Election,
    Elector,
    Fence,
    NotLeadingError,
    Observed,
    may_take,
)

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "shoal"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fence(clock: Clock) -> tuple[Fence, list[float]]:
    stepped: list[float] = []
    return Fence(clock=clock, on_expired=lambda: stepped.append(clock.now)), stepped


def test_the_fence_is_closed_until_the_first_renew() -> None:
    clock = Clock()
    fence, stepped = _fence(clock)
    with pytest.raises(NotLeadingError):
        fence.check()
    assert stepped == [1000.0]


def test_the_fence_closes_at_the_renew_deadline_from_the_renews_start() -> None:
    clock = Clock()
    fence, stepped = _fence(clock)
    fence.renewed(began=clock.now - 1.0)  # the renew took a second to answer
    clock.now += RENEW_DEADLINE_SECONDS - 1.0 - 0.01
    fence.check()
    assert stepped == []
    clock.now += 0.02
    with pytest.raises(NotLeadingError):
        fence.check()
    assert len(stepped) == 1


def test_a_late_answer_to_an_older_renew_does_not_move_the_fence_back() -> None:
    clock = Clock()
    fence, _ = _fence(clock)
    fence.renewed(began=clock.now)
    fence.renewed(began=clock.now - 5.0)
    assert fence.deadline() == clock.now + RENEW_DEADLINE_SECONDS


def test_a_revoked_fence_refuses_at_once() -> None:
    clock = Clock()
    fence, stepped = _fence(clock)
    fence.renewed(began=clock.now)
    fence.revoke()
    with pytest.raises(NotLeadingError):
        fence.check()
    assert stepped


# ---------------------------------------------------------------- every write passes it
class RecordingApi:
    """The kubernetes ApiClient's two calls Kube uses; records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def param_serialize(self, **kw: Any) -> tuple[Any, ...]:
        return kw["method"], kw["resource_path"], {}, kw.get("body"), None

    def call_api(self, method: str, url: str, **_: Any) -> Any:
        self.sent.append(f"{method} {url}")
        raise AssertionError("sent past a closed fence")


MODEL = {
    "apiVersion": "shoal.dev/v1alpha1",
    "kind": "InferenceModel",
    "metadata": {"name": "m", "namespace": "t", "uid": "u", "resourceVersion": "1"},
}
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "t"}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"}}

WRITES: dict[str, Callable[[Kube], Any]] = {
    "apply": lambda k: k.apply(CONFIG_MAP),
    "preview": lambda k: k.preview(CONFIG_MAP),
    "set_finalizers": lambda k: k.set_finalizers(MODEL, []),
    "delete": lambda k: k.delete(CONFIG_MAP),
    "evict": lambda k: k.evict(POD),
    "patch_status": lambda k: k.patch_status(MODEL, {"observedGeneration": 1}),
    "event": lambda k: k.event(MODEL, "Normal", "Test", "a message"),
}


class Absent:
    """A watch cache that vouches the child does not exist (apply sends without a read)."""

    def record(self, wanted: str, body: dict[str, Any]) -> None: ...

    def vouch(self, desired: dict[str, Any], wanted: str) -> dict[str, Any] | None:
        return None

    def absent(self, desired: dict[str, Any]) -> bool:
        return True


def test_every_public_write_of_the_api_edge_is_listed_here() -> None:
    """A new method that sends a write must be added to WRITES (and so be fenced)."""
    source = (PACKAGE / "kube" / "client.py").read_text()
    kube = next(
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Kube"
    )
    writers = set()
    for method in kube.body:
        if not isinstance(method, ast.FunctionDef) or method.name.startswith("_"):
            continue
        for call in ast.walk(method):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "_call"
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value != "GET"
            ):
                writers.add(method.name)
    assert writers == set(WRITES)


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_closed_fence_refuses_every_write_before_it_is_sent(write: str) -> None:
    clock = Clock()
    fence, stepped = _fence(clock)
    api = RecordingApi()
    kube = Kube(api, known=Absent(), fence=fence)  # type: ignore[arg-type]
    with pytest.raises(NotLeadingError):
        WRITES[write](kube)
    assert api.sent == []
    assert stepped, "the process was not told to step down"


def _generated_writes() -> set[str]:
    """Every write method of the kubernetes client's generated APIs (read from their
    source: importing them all takes seconds)."""
    import kubernetes.client.api as apis

    write = re.compile(r"^    def ((?:create|patch|replace|delete)_\w+)\(", re.M)
    return {
        name
        for directory in apis.__path__
        for source in Path(directory).glob("*_api.py")
        for name in write.findall(source.read_text())
    }


def test_no_module_writes_to_the_api_server_past_the_edge() -> None:
    """Only shoal.kube.client sends requests of its own, and only shoal.leader writes
    through the generated clients (the Lease, which is what renews the fence). The
    gateway agent (a separate process in the gateway pods) only reads."""
    generated = _generated_writes()
    assert "patch_namespaced_deployment" in generated
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        imports = _imports(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            sends = name in ("call_api", "request") and relative != "kube/client.py"
            writes = name in generated and relative != "leader.py"
            if sends or writes or _other_writer(node.func, imports, node):
                found.append(f"{relative}:{node.lineno} {name}")
        found += [f"{relative}: imports {m}" for m in imports if m.startswith(OTHER_CLIENTS)]
    assert found == []


# Clients that write past the edge: the dynamic client, kubernetes.utils' creates and
# a second HTTP client library for the API.
OTHER_CLIENTS = ("kubernetes.dynamic", "kubernetes.utils.create_from", "aiohttp", "urllib.request")
# kopf's Event posting, and an HTTP client's sending verbs (the doctor's httpx only
# reads Prometheus).
KOPF_POSTS = {"event", "info", "warn", "exception"}
HTTP_SENDS = {"post", "put", "patch", "delete", "request", "stream"}


def _other_writer(func: ast.Attribute, imports: set[str], call: ast.Call) -> bool:
    receiver = func.value.id if isinstance(func.value, ast.Name) else ""
    if receiver == "kopf":
        return func.attr in KOPF_POSTS
    if "httpx" in imports or "requests" in imports:
        # A streamed GET only reads (the OIDC issuers' keys, read with a size bound).
        reads = func.attr == "stream" and _first_argument(call) == "GET"
        return func.attr in HTTP_SENDS and receiver not in ("self", "kube", "op") and not reads
    return func.attr == "server_side_apply"


def _first_argument(call: ast.Call) -> object:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) else None


def _imports(tree: ast.Module) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def test_only_the_one_write_path_sends_in_the_api_edge() -> None:
    """Inside shoal.kube.client, bytes leave only from Kube._call, after the fence: a new
    method that calls the API client itself would skip the check."""
    tree = ast.parse((PACKAGE / "kube" / "client.py").read_text())
    senders = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for call in ast.walk(function):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr in ("call_api", "request", "urlopen")
                ):
                    senders.add(function.name)
    assert senders == {"_call"}


def test_every_api_edge_the_operator_builds_is_fenced() -> None:
    """Kube takes its fence as an optional argument (the doctor only reads): every other
    place that builds one must pass it."""
    unfenced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Kube"
                and "fence" not in {k.arg for k in node.keywords}
                and relative != "cli.py"
            ):
                unfenced.append(f"{relative}:{node.lineno}")
    assert unfenced == []


def test_kopf_posts_no_events_past_the_fence() -> None:
    from shoal.runtime import operator_settings
    from shoal.settings import Settings

    assert operator_settings(Settings()).posting.enabled is False


def test_a_fenced_operator_never_lets_urllib3_send_a_write_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """urllib3 would resend a request whose connection broke, after the one fence check:
    with a fence, the operator's client does not retry (a failed pass is retried by the
    work queue, which checks the fence again)."""
    import shoal.runtime as runtime
    from shoal.settings import Settings

    asked: list[bool] = []

    def load(**kwargs: Any) -> client.ApiClient:
        asked.append(kwargs.get("retries", True))
        return client.ApiClient(client.Configuration())

    monkeypatch.setattr(runtime, "load_api_client", load)
    runtime.build(Settings(), Fence())
    runtime.build(Settings())
    assert asked == [False, True]


def test_every_lease_renew_gives_up_before_the_next_retry() -> None:
    assert LEASE_CALL_SECONDS < RETRY_SECONDS < RENEW_DEADLINE_SECONDS < LEASE_SECONDS


# ------------------------------------------------------------------- the election
class Leases:
    """One Lease with a real Lease's rules: a replace must carry the current
    resourceVersion (409 otherwise)."""

    def __init__(self) -> None:
        self.lease: client.V1Lease | None = None
        self.version = 0
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise client.ApiException(status=0, reason="timed out")

    def read_namespaced_lease(self, name: str, namespace: str, **_: Any) -> client.V1Lease:
        self._check()
        if self.lease is None:
            raise client.ApiException(status=404)
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease, **_: Any) -> None:
        self._check()
        if self.lease is not None:
            raise client.ApiException(status=409)
        self._store(body)

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: client.V1Lease, **_: Any
    ) -> None:
        self._check()
        assert self.lease is not None
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            raise client.ApiException(status=409)
        self._store(body)

    def _store(self, body: client.V1Lease) -> None:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease.metadata.resource_version = str(self.version)

    def hand_to(self, holder: str) -> None:
        assert self.lease is not None
        body = copy.deepcopy(self.lease)
        body.spec.holder_identity = holder
        self._store(body)

    @property
    def holder(self) -> str | None:
        return self.lease.spec.holder_identity if self.lease else None


def _elector(leases: Leases, who: str, clock: Clock) -> tuple[Elector, list[str]]:
    lost: list[str] = []
    fence = Fence(clock=clock, on_expired=lambda: lost.append("expired"))
    elector = Elector(
        client.ApiClient(), Election("ns", who), fence, on_lost=lambda: lost.append("lost")
    )
    elector.leases = leases  # type: ignore[assignment]
    return elector, lost


def test_a_follower_waits_a_whole_lease_duration_for_an_unrenewed_lease() -> None:
    clock, leases = Clock(), Leases()
    a, _ = _elector(leases, "a", clock)
    b, _ = _elector(leases, "b", clock)
    assert a.attempt(clock.now) is True
    assert leases.holder == "a"
    assert b.attempt(clock.now) is False  # seen now; a stops renewing from here
    clock.now += LEASE_SECONDS - 0.1
    assert b.attempt(clock.now) is False
    clock.now += 0.2
    assert b.attempt(clock.now) is True
    assert leases.holder == "b"


def test_a_released_lease_is_taken_at_once() -> None:
    clock, leases = Clock(), Leases()
    a, _ = _elector(leases, "a", clock)
    b, _ = _elector(leases, "b", clock)
    assert a.attempt(clock.now) is True
    a.leading.set()
    a.release()
    assert leases.holder is None
    assert b.attempt(clock.now) is True


def test_its_own_name_on_a_lease_it_did_not_renew_counts_as_another_holder() -> None:
    """A restarted container (same pod name) or a hand edit naming a follower: it must
    wait out the previous holder's lease like any follower."""
    clock, leases = Clock(), Leases()
    a, _ = _elector(leases, "a", clock)
    b, _ = _elector(leases, "b", clock)
    assert a.attempt(clock.now) is True
    leases.hand_to("b")
    assert b.attempt(clock.now) is False
    clock.now += LEASE_SECONDS
    assert b.attempt(clock.now) is True


def test_a_leader_steps_down_at_once_when_the_lease_names_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, leases = Clock(), Leases()
    a, lost = _elector(leases, "a", clock)
    assert a.attempt(clock.now) is True
    a.leading.set()
    leases.hand_to("admin")
    monkeypatch.setattr("shoal.leader.time.sleep", lambda s: None)
    a.run()
    assert lost == ["lost"]
    assert not a.fence.fresh()


def test_a_cut_off_leader_steps_down_at_the_renew_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every Lease call fails (a partition); the loop wakes at the deadline at the latest
    and steps down, without waiting for a renew to answer."""
    clock, leases = Clock(), Leases()
    a, lost = _elector(leases, "a", clock)
    started = clock.now
    assert a.attempt(clock.now) is True
    a.leading.set()
    leases.fail = True
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds

    monkeypatch.setattr("shoal.leader.time.sleep", sleep)
    a.run()
    assert lost == ["lost"]
    assert clock.now == pytest.approx(started + RENEW_DEADLINE_SECONDS)


def test_a_leader_resumed_past_its_deadline_does_not_renew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paused (SIGSTOP) past the renew deadline but not yet past the Lease: nobody took
    it, yet the leader must not carry on as if nothing happened."""
    clock, leases = Clock(), Leases()
    a, lost = _elector(leases, "a", clock)
    assert a.attempt(clock.now) is True
    a.leading.set()
    renewed = leases.version
    clock.now += RENEW_DEADLINE_SECONDS + 1
    monkeypatch.setattr("shoal.leader.time.sleep", lambda s: None)
    a.run()
    assert lost == ["lost"]
    assert leases.version == renewed


@pytest.mark.parametrize(
    ("holder", "seen_for", "takes"),
    [("", 0.0, True), ("a", 0.0, False), ("a", LEASE_SECONDS - 0.1, False), ("a", 15.0, True)],
)
def test_may_take(holder: str, seen_for: float, takes: bool) -> None:
    observed = Observed(version="1", holder=holder, duration=LEASE_SECONDS, since=100.0)
    assert may_take(observed, 100.0 + seen_for) is takes


def test_a_release_that_meets_its_own_last_renew_reads_again_and_clears_the_holder() -> None:
    """A renew already sent when the process was told to stop lands between the
    release's read and its write (409): the release reads again instead of leaving the
    Lease to expire, so the follower still leads at its next retry."""
    clock, leases = Clock(), Leases()
    a, _ = _elector(leases, "a", clock)
    assert a.attempt(clock.now) is True
    a.leading.set()
    replace = leases.replace_namespaced_lease
    renewed_in_between: list[bool] = []

    def late_renew_first(name: str, namespace: str, body: client.V1Lease, **kw: Any) -> None:
        if not renewed_in_between:
            renewed_in_between.append(True)
            leases.hand_to("a")  # the in-flight renew: same holder, a new version
        replace(name, namespace, body, **kw)

    leases.replace_namespaced_lease = late_renew_first  # type: ignore[method-assign]
    a.release()
    assert renewed_in_between
    assert leases.holder is None


def test_a_released_elector_does_not_renew() -> None:
    clock, leases = Clock(), Leases()
    a, _ = _elector(leases, "a", clock)
    assert a.attempt(clock.now) is True
    a.leading.set()
    a.released = True
    version = leases.version
    assert a.attempt(clock.now) is None
    assert leases.version == version
