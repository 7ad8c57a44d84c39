"""The ``shoal`` command line."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from shoal import __version__


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"shoal {__version__}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from shoal.runtime import run
    from shoal.settings import Settings

    config = Settings.from_env()
    overrides: dict[str, object] = {}
    if args.namespace:
        overrides["namespaces"] = tuple(args.namespace)
    if args.liveness:
        overrides["liveness_endpoint"] = args.liveness
    run(config.model_copy(update=overrides))
    return 0


def _cmd_gateway_agent(args: argparse.Namespace) -> int:
    import logging

    from shoal.gateway.agent import run
    from shoal.render.gateway_files import RuntimePaths

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return run(
        args.namespace,
        args.configmap,
        Path(args.dir),
        RuntimePaths(args.runtime_dir),
        args.local_peer,
        once=args.once,
        health_port=args.health_port,
    )


def _cmd_generate(args: argparse.Namespace) -> int:
    from shoal.generate import write

    for path in write(Path(args.root)):
        print(f"wrote {path}")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    import yaml

    from shoal.render.documents import RenderError, RenderFacts, render_documents
    from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS

    docs: list[dict[str, object]] = []
    for name in args.filename:
        if name == "-":
            texts = [sys.stdin.read()]
        else:
            path = Path(name)
            files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
            try:
                texts = [f.read_text(encoding="utf-8") for f in files]
            except OSError as exc:
                print(f"shoal render: {exc}", file=sys.stderr)
                return 1
        for text in texts:
            docs += [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    try:
        facts = RenderFacts(
            at=args.at or dt.datetime.now(dt.UTC),
            kueue_served=args.kueue,
            forecasts=dict(args.forecast or []),
            available=dict(args.available or []),
        )
        cidrs = tuple(args.cluster_cidr) if args.cluster_cidr else DEFAULT_CLUSTER_CIDRS
        objects = render_documents(docs, cidrs, facts=facts)
    except RenderError as exc:
        print(f"shoal render: {exc}", file=sys.stderr)
        return 1
    # What the operator would read from the cluster, as this preview assumed it.
    sys.stdout.write("".join(f"# {line}\n" for line in facts.described()))
    sys.stdout.write(yaml.dump_all(objects, Dumper=_block_dumper(), sort_keys=False))
    return 0


def _moment(text: str) -> dt.datetime:
    """An RFC 3339 time (``2026-12-03T09:00:00Z``) for ``--at``."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time such as 2026-12-03T09:00:00Z"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add Z or an offset")
    return moment


def _model_count(text: str) -> tuple[tuple[str, str], int]:
    """``NAMESPACE/NAME=N`` for ``--forecast`` and ``--available``."""
    where, _, count = text.partition("=")
    namespace, _, name = where.partition("/")
    if not (namespace and name and count.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME=N (N a whole number)")
    return (namespace, name), int(count)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from kubernetes.config import ConfigException

    from shoal.doctor import report
    from shoal.doctor.findings import failed
    from shoal.doctor.probe import Cluster, Options, Prometheus, diagnose
    from shoal.kube.client import Kube, load_api_client
    from shoal.settings import Settings

    try:
        url = args.prometheus_url or Settings.from_env().prometheus_url
        api = load_api_client(args.kubeconfig, connections=2)
    except (ConfigException, OSError, ValueError) as exc:
        print(f"shoal doctor: {exc}", file=sys.stderr)
        return 1
    options = Options(namespaces=tuple(args.namespace or ()), skip=frozenset(args.skip or ()))
    findings = diagnose(Cluster(Kube(api)), Prometheus(url) if url else None, options)
    json_output = args.output == "json"
    sys.stdout.write(report.as_json(findings) + "\n" if json_output else report.table(findings))
    return 1 if failed(findings) else 0


def _block_dumper() -> type:
    """A YAML dumper writing multi-line strings (config.pbtxt, haproxy.cfg) as blocks."""
    import yaml

    class BlockDumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        block = "\n" in value and not any(line.endswith(" ") for line in value.splitlines())
        style = "|" if block else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    BlockDumper.add_representer(str, text)
    return BlockDumper


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shoal", description="Shoal operator for Triton")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("version", help="print the version")
    p.set_defaults(func=_cmd_version)

    p = sub.add_parser("run", help="run the operator against the current kubeconfig")
    p.add_argument(
        "-n",
        "--namespace",
        action="append",
        help="watch only this namespace (repeatable); default: the whole cluster",
    )
    p.add_argument("--liveness", help="liveness endpoint URL, e.g. http://0.0.0.0:8080/healthz")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "render", help="print every object the operator would create for the given resources"
    )
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="a YAML file or directory of custom resources, or - for stdin (repeatable)",
    )
    p.add_argument(
        "--cluster-cidr",
        action="append",
        metavar="CIDR",
        help="a network of the cluster that model downloads never reach (repeatable), as "
        "SHOAL_CLUSTER_CIDRS gives it to the operator; default: the private ranges",
    )
    # The facts the operator reads from the cluster; the output's first lines say which
    # were given and which defaulted.
    p.add_argument(
        "--at",
        type=_moment,
        help="the moment to plan for (scheduled windows, capacity windows), RFC 3339; default: now",
    )
    p.add_argument(
        "--kueue",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether the cluster serves Kueue (elastic pools' queues and GPU ceilings); "
        "default: yes",
    )
    p.add_argument(
        "--forecast",
        action="append",
        type=_model_count,
        metavar="NAMESPACE/NAME=N",
        help="the warm pool a predictive model's forecast asks for (repeatable); default: none",
    )
    p.add_argument(
        "--available",
        action="append",
        type=_model_count,
        metavar="NAMESPACE/NAME=N",
        help="available replicas of a model, for its elastic pool's GPU shares (repeatable); "
        "default: its minReplicas",
    )
    p.set_defaults(func=_cmd_render)

    p = sub.add_parser(
        "gateway-agent",
        help="keep a pool gateway's HAProxy on its ConfigMap (the gateway pods' sidecar)",
    )
    p.add_argument("--namespace", required=True, help="the gateways' namespace")
    p.add_argument("--configmap", required=True, help="the pool's gateway ConfigMap")
    p.add_argument("--dir", required=True, help="where HAProxy reads its configuration")
    p.add_argument("--runtime-dir", required=True, help="where HAProxy's sockets are")
    p.add_argument("--local-peer", required=True, help="this replica's peer name (its pod)")
    p.add_argument("--once", action="store_true", help="write the files and exit")
    p.add_argument(
        "--health-port", type=int, default=0, help="serve /healthz for a liveness probe; 0: off"
    )
    p.set_defaults(func=_cmd_gateway_agent)

    from shoal.doctor.findings import CHECKS

    p = sub.add_parser(
        "doctor",
        help="check the installation on the current cluster: CRDs, admission policy, "
        "operator, GPU nodes and products, Kueue for elastic pools, metrics API, HPAs, "
        "Prometheus; exits 1 when a check fails",
    )
    p.add_argument("--kubeconfig", help="outside a pod; default: $KUBECONFIG, else ~/.kube/config")
    p.add_argument(
        "--prometheus-url",
        help="Prometheus to check for Shoal's rules and scrape targets; default: "
        "SHOAL_PROMETHEUS_URL; unset: not checked",
    )
    p.add_argument(
        "-n",
        "--namespace",
        action="append",
        help="check the HPAs of this namespace only (repeatable); default: every namespace",
    )
    p.add_argument(
        "--skip", action="append", choices=CHECKS, help="leave this check out (repeatable)"
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("generate", help="write crds/ and docs/api-reference.md from the models")
    p.add_argument("--root", default=".", help="repository root to write into")
    p.set_defaults(func=_cmd_generate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
