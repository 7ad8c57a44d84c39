"""``python -m e2e.cluster up|down|status``: the local cluster from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from e2e.cluster import local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "build"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=local.DEFAULT_STATE_DIR,
        help="where certificates, kubeconfig, etcd data and logs live",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="up: also start the real node real-0 (containerd, kubelet, kube-proxy; root)",
    )
    args = parser.parse_args(argv)
    cluster = local.LocalCluster(args.state_dir)

    if args.command == "build":
        print(local.ensure_binaries())
    elif args.command == "up":
        reused = local.healthy(cluster)
        started = time.monotonic()
        local.up(cluster, real_node=args.real_node)
        verb = "reused running cluster" if reused else "started cluster"
        print(
            f"{verb} in {time.monotonic() - started:.1f}s; export KUBECONFIG={cluster.kubeconfig}"
        )
    elif args.command == "down":
        local.down(cluster)
        print("cluster stopped")
    else:
        print(json.dumps(local.info(cluster), indent=2))
        return 0 if local.healthy(cluster) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
