"""Names the API defines, one constant each: the group and version of the custom
resources, the field manager of every write, and the label on every object Shoal
creates."""

from __future__ import annotations

from typing import Final

GROUP: Final = "shoal.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

# The field manager of every server-side apply and status write; GitOps tools see this
# name as the owner of the fields Shoal sets.
FIELD_MANAGER: Final = "shoal-operator"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "shoal"
MODEL_LABEL: Final = f"{GROUP}/model"
POOL_LABEL: Final = f"{GROUP}/pool"
# On a model's pods: "network" when its files are fetched over the network (s3://, gs://,
# https://), "volume" when they come from a claim (pvc://). The pool's download egress
# selects only the "network" pods.
MODEL_SOURCE_LABEL: Final = f"{GROUP}/model-source"
# On a pool gateway's objects and pods: the pool's name.
GATEWAY_LABEL: Final = f"{GROUP}/gateway"
# On a model's overflow Service (and so its EndpointSlices): the pool whose gateway
# sends it requests; its pool label names the overflow pool, where its pods run.
ROUTED_BY_LABEL: Final = f"{GROUP}/routed-by-pool"
# On each object of a model's overflow stack: the model's name. Only objects with it are
# removed as the model's overflow (another model may be named <model>-overflow).
OVERFLOW_OF_LABEL: Final = f"{GROUP}/overflow-of"

# Kueue, which governs a pool's elastic capacity where it is installed: its API, and
# the label that puts a pod into a LocalQueue (its pod integration gates the pod until
# the quota admits it).
KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VERSION: Final = "v1beta2"
KUEUE_API_VERSION: Final = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
KUEUE_QUEUE_LABEL: Final = f"{KUEUE_GROUP}/queue-name"
# The scheduling gate Kueue holds a pod with until its quota admits it.
KUEUE_ADMISSION_GATE: Final = f"{KUEUE_GROUP}/admission"

# Shoal's own finalizer: a TenantPool is held while models still use it.
POOL_FINALIZER: Final = f"{GROUP}/pool-in-use"
# On every child: the digest of what Shoal last applied, so a pass can tell a field it
# stopped sending (which must go) from one the server added (which stays).
APPLIED_ANNOTATION: Final = f"{GROUP}/applied"

# The oldest Kubernetes the CRDs and the admission policy work on: selectable fields on
# custom resources (spec.pool) and the CEL CIDR library are on by default from 1.31;
# ValidatingAdmissionPolicy is GA from 1.30. The chart's kubeVersion says the same.
MINIMUM_KUBERNETES: Final = "1.31"
# The newest the tests run on (the local cluster's version).
TESTED_KUBERNETES: Final = "1.36"

# On what outlives the operator's uninstall (the CRDs, the gateways' namespace and the
# gateways' identity there): Helm, Argo CD and Flux each keep an object so annotated when
# they remove the release or application that installed it. Deleting a CRD deletes every
# custom resource of its kind; deleting the gateways' namespace cuts every tenant off.
KEPT_ON_UNINSTALL: Final = {
    "helm.sh/resource-policy": "keep",
    "argocd.argoproj.io/sync-options": "Prune=false,Delete=false",
    "kustomize.toolkit.fluxcd.io/prune": "disabled",
}
