#!/usr/bin/env bash
# Builds the local cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, prometheus-adapter, helm) from the pinned Go modules under tools/, into a cache
# directory outside the repository keyed by version. A second run finds them and
# returns at once. Prints the binary directory on its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/cluster/build_lib.sh
source "$here/build_lib.sh"

k8s_version="$(module_version kubernetes k8s.io/kubernetes)"
etcd_version="$(module_version etcd go.etcd.io/etcd/server/v3)"
kwok_version="$(module_version kwok sigs.k8s.io/kwok)"
adapter_version="$(module_version prometheus-adapter sigs.k8s.io/prometheus-adapter)"
helm_version="$(module_version helm helm.sh/helm/v3)"
bin_dir="$cache_root/bin/k8s-$k8s_version-etcd-$etcd_version-kwok-$kwok_version"
bin_dir+="-adapter-$adapter_version-helm-$helm_version"
mkdir -p "$bin_dir"

k8s_ldflags="$(k8s_version_ldflags "$k8s_version")"

build etcd etcd go.etcd.io/etcd/server/v3 ""
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build kubernetes "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$k8s_ldflags"
done
build kwok kwok sigs.k8s.io/kwok/cmd/kwok ""
build prometheus-adapter prometheus-adapter sigs.k8s.io/prometheus-adapter/cmd/adapter ""
# As Helm's own release build does: the Kubernetes version `helm template` and `helm
# lint` assume, from the client-go it is built with.
client_go="$(cd "$here/tools/helm" && go list -m -f '{{.Version}}' k8s.io/client-go)"
client_go_minor="$(echo "$client_go" | cut -d. -f2)"
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_go_minor"
done
build helm helm helm.sh/helm/v3/cmd/helm "$helm_ldflags"

# KWOK's binary has no built-in behaviour: it plays the Stage objects it is given. Use
# the stages its own module ships at the pinned version (what kwokctl uses too):
# nodes become Ready and renew their leases; scheduled pods become Running; deleted
# pods go away.
stages="$bin_dir/kwok-stages.yaml"
if [[ ! -s "$stages" ]]; then
  kwok_dir="$(cd "$here/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    printf -- '---\n'; cat "$kwok_dir/kustomize/stage/$f"
  done > "$stages.tmp"
  mv "$stages.tmp" "$stages"
fi

echo "$bin_dir"
