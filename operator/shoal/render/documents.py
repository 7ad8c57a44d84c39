"""``shoal render``: custom resources in, every object the operator would create out.

Works on documents alone, with no cluster: the pools and batch policies a model refers
to must be among the documents, and a pool's selector is matched against the Namespace
documents given.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.refusal_words import invalid_message
from shoal.api.tenantpool import TenantPool
from shoal.render.batching import effective_batching
from shoal.render.gateway import GatewaySite, gateway_objects
from shoal.render.gateway_config import Route
from shoal.render.gateway_plan import gateway_config, route, unique_routes
from shoal.render.haproxy_config import haproxy_config
from shoal.render.keys import Issuer, PublicKey, issuer_file_prefix
from shoal.render.model_plan import Key, ModelFacts, PlanError, PoolMember, plan_model
from shoal.render.overflow import overflow_objects
from shoal.render.pool_plan import PoolFacts, plan_pool
from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS


class RenderError(ValueError):
    """A document cannot be rendered; the message says which and why."""


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{doc.get('kind')} {ns}{meta.get('name', '?')}"


# The gateway's configuration names the cluster's token signing keys, which only a
# cluster knows: a preview shows one placeholder in their place.
PREVIEW_ISSUER = Issuer(
    url="https://kubernetes.default.svc.cluster.local",
    keys=(PublicKey("the-clusters-signing-key", "RS256", "(the cluster's public key)\n"),),
)
PREVIEW_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def preview_oidc_keys(issuer: str) -> tuple[PublicKey, ...]:
    """An OIDC issuer's keys, which the operator fetches: one placeholder in a preview."""
    placeholder = "(the issuer's public key, fetched by the operator)\n"
    return (PublicKey("the-issuers-signing-key", "RS256", placeholder, issuer_file_prefix(issuer)),)


@dataclass(frozen=True)
class RenderFacts:
    """What the operator would read from the cluster, given instead (``shoal render``'s
    flags): the moment, whether Kueue is served, forecasts' warm pools, and how many
    replicas of each model are available (for an elastic pool's GPU shares)."""

    at: dt.datetime = PREVIEW_TIME
    kueue_served: bool = True
    forecasts: Mapping[Key, int] = field(default_factory=dict)
    available: Mapping[Key, int] = field(default_factory=dict)

    def for_model(self, model: InferenceModel, pool_models: Sequence[InferenceModel]) -> ModelFacts:
        """The model's facts; every model of its pool among the documents, this one
        included, counts as served, with its given available replicas or else its warm
        pool."""
        members = tuple(
            PoolMember(
                _key(other),
                other.spec.model_dump(by_alias=True, exclude_none=True),
                self.available.get(_key(other), other.spec.scaling.min_replicas),
            )
            for other in pool_models
        )
        return ModelFacts(
            now=self.at,
            kueue_served=self.kueue_served,
            forecast_warm_pool=self.forecasts.get(_key(model)),
            pool_members=members,
        )

    def described(self) -> list[str]:
        """One line per fact, saying where it came from."""
        forecasts = ", ".join(f"{ns}/{n}={w}" for (ns, n), w in sorted(self.forecasts.items()))
        available = ", ".join(f"{ns}/{n}={w}" for (ns, n), w in sorted(self.available.items()))
        return [
            f"time: {self.at.isoformat().replace('+00:00', 'Z')} (--at)",
            f"Kueue served: {'yes' if self.kueue_served else 'no'} (--kueue/--no-kueue)",
            f"forecast warm pools: {forecasts or 'none'} (--forecast NS/NAME=N)",
            "available replicas of other models: "
            f"{available or 'each its minReplicas'} (--available NS/NAME=N)",
            "namespaces: those the pools list, and the Namespace documents given",
        ]


def _key(model: InferenceModel) -> Key:
    return (model.metadata.namespace or "", model.metadata.name)


def render_documents(
    docs: list[dict[str, Any]],
    cluster_cidrs: Sequence[str] = DEFAULT_CLUSTER_CIDRS,
    site: GatewaySite | None = None,
    facts: RenderFacts | None = None,
) -> list[dict[str, Any]]:
    """Every object the operator would create for ``docs``, planned by the operator's
    own planner (shoal.render.model_plan) on ``facts``."""
    facts = facts or RenderFacts()
    pools: dict[str, TenantPool] = {}
    policies: dict[tuple[str, str], BatchPolicy] = {}
    models: list[InferenceModel] = []
    namespaces: dict[str, dict[str, str]] = {}
    for doc in docs:
        if doc.get("kind") == "Namespace" and doc.get("apiVersion") == "v1":
            name = (doc.get("metadata") or {}).get("name", "")
            labels = dict((doc.get("metadata") or {}).get("labels") or {})
            namespaces[name] = {"kubernetes.io/metadata.name": name, **labels}
            continue
        if not str(doc.get("apiVersion", "")).startswith("shoal.dev/"):
            continue
        doc = dict(doc)
        if doc.get("kind") in ("InferenceModel", "BatchPolicy"):
            doc["metadata"] = {"namespace": "default", **(doc.get("metadata") or {})}
        try:
            if doc.get("kind") == "TenantPool":
                pool = TenantPool.model_validate(doc)
                pools[pool.metadata.name] = pool
            elif doc.get("kind") == "BatchPolicy":
                policy = BatchPolicy.model_validate(doc)
                policies[(policy.metadata.namespace or "", policy.metadata.name)] = policy
            elif doc.get("kind") == "InferenceModel":
                models.append(InferenceModel.model_validate(doc))
            else:
                raise RenderError(f"{_where(doc)}: unknown kind")
        except ValidationError as exc:
            raise RenderError(invalid_message(_where(doc), exc)) from None

    site = site or GatewaySite()
    out: list[dict[str, Any]] = []
    routes: dict[str, list[tuple[tuple[str, str], Route]]] = {}
    for model in models:
        where = f"InferenceModel {model.metadata.namespace}/{model.metadata.name}"
        model_pool = pools.get(model.spec.pool)
        if model_pool is None:
            raise RenderError(f"{where}: TenantPool {model.spec.pool!r} is not among the files")
        policy_spec = None
        if model.spec.batch_policy:
            key = (model.metadata.namespace or "", model.spec.batch_policy.name)
            found = policies.get(key)
            if found is None:
                raise RenderError(f"{where}: BatchPolicy {key[0]}/{key[1]} is not among the files")
            policy_spec = found.spec
        pool_models = [m for m in models if m.spec.pool == model.spec.pool]
        try:
            plan = plan_model(model, model_pool, policy_spec, facts.for_model(model, pool_models))
        except PlanError as exc:
            raise RenderError(f"{where}: {exc}") from None
        out += plan.objects
        overflow = model.spec.overflow
        if overflow is not None:
            spill_pool = pools.get(overflow.pool)
            if spill_pool is None:
                raise RenderError(
                    f"{where}: overflow TenantPool {overflow.pool!r} is not among the files"
                )
            batching = effective_batching(model, policy_spec)
            out += overflow_objects(model, batching, spill_pool, site.namespace)
        # No replica is ready in a preview: the routes have no servers yet.
        planned = route(model, policy_spec, ())
        if planned is not None:
            order = (str(model.metadata.namespace), model.metadata.name)
            routes.setdefault(model.spec.pool, []).append((order, planned))
    pool_docs: list[dict[str, Any]] = []
    live_pools = list(pools.values())
    for each_pool in live_pools:
        # Tenant namespaces: those the pool names, and the given Namespace documents
        # its selector admits (a cluster may hold more; the operator finds those).
        known = {
            name: {"kubernetes.io/metadata.name": name}
            for name in each_pool.spec.tenants.namespaces
        }
        planned_pool = plan_pool(
            each_pool,
            PoolFacts(
                now=facts.at,
                namespaces={**known, **namespaces},
                cluster_cidrs=cluster_cidrs,
                gateway_namespace=site.namespace,
                kueue_served=facts.kueue_served,
                pools=live_pools,
            ),
        )
        pool_docs += planned_pool.objects
        admitted = list(planned_pool.admitted)
        if each_pool.spec.gateway.enabled:
            mine = unique_routes(
                [r for r in routes.get(each_pool.metadata.name, []) if r[1].tenant in admitted]
            )
            oidc = [(spec, preview_oidc_keys(spec.issuer)) for spec in each_pool.spec.gateway.oidc]
            config = gateway_config(each_pool, PREVIEW_ISSUER, admitted, mine, (), facts.at, oidc)
            pool_docs += gateway_objects(
                each_pool,
                site,
                haproxy_config(config),
                PREVIEW_ISSUER.keys,
                admitted,
                [(spec.issuer, keys) for spec, keys in oidc],
            )
    return pool_docs + out
