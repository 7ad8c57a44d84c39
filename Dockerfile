# The Shoal operator image: `docker build -t ghcr.io/shoal-dev/shoal-operator:0.1.0 .`
# Multi-stage: dependencies are built into a virtual environment in the first stage;
# the final stage holds only Python, HAProxy, that environment and the package, and
# runs as a non-root user (65532, as in the manifests' securityContext).

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/shoal
COPY pyproject.toml constraints.txt README.md ./
COPY operator ./operator
RUN /opt/shoal/bin/pip install -c constraints.txt . \
# Bytecode checked by hash, not by the source's modification time: copying the
# environment into the final stage (and into an image's layers) can move those times,
# and an unreadable .pyc makes every start recompile the kubernetes client, over
# 100 MB (the gateway agent's container was OOMKilled at its 128Mi limit for it).
 && /opt/shoal/bin/python -m compileall -q -f -j 0 --invalidation-mode unchecked-hash /opt/shoal/lib

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="shoal-operator" \
      org.opencontainers.image.description="Kubernetes operator serving many models for many tenants on NVIDIA Triton" \
      org.opencontainers.image.licenses="Apache-2.0"
# The gateway agent (`shoal gateway-agent`, a sidecar of each pool gateway pod) checks
# every configuration with `haproxy -c` before it reloads: the same HAProxy 2.6 as the
# gateway image (docker.io/library/haproxy:2.6.12).
RUN apt-get update \
 && apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/shoal /opt/shoal
ENV PATH=/opt/shoal/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["shoal"]
CMD ["run"]
