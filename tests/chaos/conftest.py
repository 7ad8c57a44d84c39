"""The chaos tier: each scenario of ``benchmarks.chaos`` at CI size, on a local cluster
of the tier's own (its API server and etcd are killed and restarted; nothing else must
share them). ``make chaos`` runs the same scenarios bigger, with more rounds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from benchmarks.chaos.rig import Rig, rig
from benchmarks.chaos.scenarios import Size

# Small enough for every CI run; ``make chaos`` runs 200 models over 20 namespaces.
CI_SIZE = Size(models=40, namespaces=8)
# 40 models afford a faster resync and HPA sync than 200 (each no-op resync is observed
# over two resync rounds, a dozen times in the tier).
CI_RESYNC_SECONDS = 4.0
CI_HPA_SYNC_PERIOD = "5s"


@pytest.fixture(scope="package")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with rig(tmp_path_factory.mktemp("chaos"), CI_RESYNC_SECONDS, CI_HPA_SYNC_PERIOD) as the_rig:
        yield the_rig
