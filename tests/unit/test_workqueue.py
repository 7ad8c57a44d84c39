"""The reconcile work queue: bursts fold into one pass, nothing runs twice at once,
nothing added is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

from shoal.workqueue import WorkQueue
from tests.support.wait import wait_for


class Recorder:
    """A handler that counts passes per key and can hold a pass open."""

    def __init__(self) -> None:
        self.passes: Counter[Hashable] = Counter()
        self.running: Counter[Hashable] = Counter()
        self.overlaps = 0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, key: Hashable) -> None:
        with self.lock:
            self.running[key] += 1
            if self.running[key] > 1:
                self.overlaps += 1
        self.entered.set()
        self.gate.wait(10)
        with self.lock:
            self.running[key] -= 1
            self.passes[key] += 1


@contextmanager
def queue(handler: Recorder, workers: int = 4) -> Iterator[WorkQueue]:
    q = WorkQueue(handler, workers)
    q.start()
    try:
        yield q
    finally:
        q.stop()


def test_a_burst_for_one_key_costs_one_pass() -> None:
    handler = Recorder()
    with queue(handler) as q:
        for _ in range(100):
            q.add("a", delay=0.2)
        q.add("b", delay=0.2)
        wait_for(
            "both passes", lambda: handler.passes, lambda p: bool(p["a"] and p["b"]), timeout=5
        )
        time.sleep(0.3)
    assert handler.passes == Counter({"a": 1, "b": 1})


def test_an_earlier_request_wins_over_a_later_one() -> None:
    handler = Recorder()
    with queue(handler) as q:
        q.add("a", delay=30)
        q.add("a")
        wait_for("the immediate pass", lambda: handler.passes["a"], lambda n: n == 1, timeout=5)
        assert len(q) == 0


def test_a_key_added_while_running_runs_again_after_and_never_concurrently() -> None:
    handler = Recorder()
    with queue(handler, workers=4) as q:
        handler.gate.clear()
        q.add("a")
        assert handler.entered.wait(5)
        for _ in range(10):  # changes arriving while the first pass is still reading
            q.add("a")
        time.sleep(0.2)
        assert handler.passes["a"] == 0
        assert handler.running["a"] == 1
        handler.gate.set()
        wait_for("the second pass", lambda: handler.passes["a"], lambda n: n == 2, timeout=5)
        time.sleep(0.2)
    assert handler.passes["a"] == 2
    assert handler.overlaps == 0


def test_a_failing_pass_does_not_stop_the_workers() -> None:
    seen: list[Hashable] = []

    def handle(key: Hashable) -> None:
        seen.append(key)
        if key == "bad":
            raise RuntimeError("boom")

    q = WorkQueue(handle, workers=1)
    q.start()
    try:
        q.add("bad")
        q.add("good", delay=0.05)
        wait_for("the pass after a failure", lambda: seen, lambda s: "good" in s, timeout=5)
    finally:
        q.stop()
    assert seen == ["bad", "good"]


def test_a_failure_of_the_servers_backs_off_to_4_seconds_and_leaves_the_keys_backoff() -> None:
    """Through a 15 s API-server restart a key fails six times in a row: had those
    doubled its backoff, it would wait 16 s more once the server is back. They cap at
    TRANSIENT_MAX_SECONDS, and a failure of the object's own after them (a 403 while
    the server's authorizer warms up) starts where the cap left it, not at 16 s."""
    q = WorkQueue(lambda key: None, workers=1)
    transient = [q.retry("a", transient=True) for _ in range(6)]
    assert transient == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert q.retry("a") == 4.0
    assert q.retry("a") == 8.0
    assert [q.retry("b") for _ in range(8)][-1] == 60.0
