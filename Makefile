# Shoal's developer entry points. `make demo` and `make test` are the two commands the
# README promises; everything they need is installed by the targets below.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt 2>/dev/null | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help bench elastic-figures chaos venv tools system-deps binaries node-binaries cluster-up cluster-down cluster-status demo test lint unit generate

help:
	@echo "make demo          local cluster (unless KUBECONFIG is set), CRDs, operator in the foreground"
	@echo "make test          lint, then every test tier cheapest first (unit, cluster, e2e, realnode, chaos)"
	@echo "make cluster-up    start (or reuse) the local cluster; kubeconfig in .dev-cluster/kubeconfig"
	@echo "                   (REAL_NODE=1: with the real node real-0 beside the simulated ones; root)"
	@echo "make cluster-down  stop the local cluster and remove its state"
	@echo "make generate      regenerate crds/ and docs/api-reference.md from the models"
	@echo "make chaos         the chaos suite at full size (200 models, 10 kill rounds); figures in benchmarks/results/chaos.json"
	@echo "make bench         benchmarks: batching (real Triton), control plane (local cluster), autoscaling replay, gateway (real haproxy + Triton), elastic capacity (real Kueue); figures in benchmarks/results/"
	@echo "make elastic-figures  the elastic-capacity tests on real Kueue, writing benchmarks/results/elastic_capacity.json"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)

# network-config-analyzer pins old libraries: it gets a virtual environment of its own.
NCA_STAMP := .venv-nca/.installed-2.1.0
$(NCA_STAMP):
	@test -x .venv-nca/bin/python || $(PYTHON) -m venv .venv-nca
	.venv-nca/bin/python -m pip install --quiet network-config-analyzer==2.1.0
	@touch $@

tools: $(NCA_STAMP)

# Debian packages the tests run for real: rclone (the model-fetch init container's
# tool), prometheus (the server and promtool) and haproxy (the pool gateway's engine,
# 2.6 with the Prometheus exporter and jwt_verify). The tests run their own haproxy
# processes: the service the package starts is stopped again. shellcheck: actionlint
# checks the workflows' run: blocks with it (tests/unit/test_release_workflow.py).
# nftables: the chaos tier cuts a leader off from the API server with it.
# The real node's (e2e/cluster/node.py): runc, the CNI plugins (bridge, host-local),
# busybox-static (the tests' image) and gcc with a static libc (the pause image);
# buildah and debootstrap build the images of Shoal's pods (e2e/cluster/image_builds.py);
# ipset for kube-router, which enforces NetworkPolicies there (e2e/cluster/netpol.py).
DEBIAN_PACKAGES := rclone prometheus haproxy shellcheck nftables \
  runc containernetworking-plugins busybox-static gcc libc6-dev buildah debootstrap ipset
system-deps:
	@command -v rclone >/dev/null && command -v prometheus >/dev/null && command -v promtool >/dev/null && test -x /usr/sbin/haproxy && command -v shellcheck >/dev/null && test -x /usr/sbin/nft \
	  && test -x /usr/sbin/runc && test -x /usr/lib/cni/bridge && test -x /bin/busybox && command -v gcc >/dev/null && test -f /usr/lib/x86_64-linux-gnu/libc.a \
	  && command -v buildah >/dev/null && command -v debootstrap >/dev/null && test -x /usr/sbin/ipset || { \
	  echo "installing Debian packages: $(DEBIAN_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES) >/dev/null && \
	  { $(SUDO) service haproxy stop >/dev/null 2>&1 || true; }; }

binaries:
	e2e/cluster/build.sh

# The real node's binaries (kubelet, kube-proxy, containerd); built on first use too.
node-binaries:
	e2e/cluster/build_node.sh

cluster-up: venv binaries
	$(PY) -m e2e.cluster up $(if $(REAL_NODE),--real-node)

cluster-down: venv
	$(PY) -m e2e.cluster down

cluster-status: venv
	$(PY) -m e2e.cluster status

demo: venv binaries system-deps
	$(PY) -m e2e.demo

lint: venv
	$(VENV)/bin/ruff check operator tests e2e benchmarks
	$(VENV)/bin/ruff format --check operator tests e2e benchmarks
	$(VENV)/bin/mypy

generate: venv
	$(VENV)/bin/shoal generate
	$(VENV)/bin/python -m e2e.argocd_health --write
	$(VENV)/bin/python -m e2e.chart_readme --write

# Benchmarks print figures and write benchmarks/results/*.json; they are not tests.
# The autoscaling replay is calibrated on the batching benchmark's curve: it runs after.
bench: venv binaries system-deps
	$(PY) -m benchmarks.batching
	$(PY) -m benchmarks.control_plane
	$(PY) -m benchmarks.autoscaling
	$(PY) -m benchmarks.gateway
	$(PY) -m benchmarks.ramp
	$(MAKE) elastic-figures

# The elastic-capacity tests on real Kueue, writing their figures for docs/benchmarks.md
# (`python -m benchmarks.summary --write` then quotes them).
elastic-figures: venv binaries
	SHOAL_RESULTS_DIR=benchmarks/results $(PY) -m pytest -p no:cacheprovider tests/cluster/test_elastic_capacity.py

# The chaos tier runs small in `make test`; this runs every scenario at full size.
chaos: venv binaries system-deps
	$(PY) -m benchmarks.chaos

unit: venv
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

# Every tier, cheapest first, stopping at the first that fails (tests/tiers.py).
test: venv tools system-deps binaries lint
	$(PY) -m tests.tiers $(PYTEST_ARGS)
