#!/usr/bin/env bash
# Builds the binaries of the local cluster's real node (see node.py): the kubelet and
# kube-proxy from the pinned Kubernetes module under tools/node/ (the control plane's
# version and replace directives), and containerd, its runc shim and ctr from the
# pinned containerd module under tools/containerd/. Into a cache directory outside the
# repository keyed by version, apart from the control plane's binaries, so the tiers
# that need no real node never build these. A second run finds them and returns at
# once. Prints the binary directory on its last line.
# runc and the CNI plugins come from Debian packages (`make system-deps`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/cluster/build_lib.sh
source "$here/build_lib.sh"

k8s_version="$(module_version node k8s.io/kubernetes)"
containerd_version="$(module_version containerd github.com/containerd/containerd/v2)"
bin_dir="$cache_root/node-bin/k8s-$k8s_version-containerd-$containerd_version"
mkdir -p "$bin_dir"

# The version stamps of the upstream release builds, as build.sh sets them.
k8s_ldflags="$(k8s_version_ldflags "$k8s_version")"
for cmd in kubelet kube-proxy; do
  build node "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$k8s_ldflags" ""
done

# Static binaries without the snapshotters that need C libraries (as containerd's own
# static release builds leave them out); overlayfs and native remain.
ctd_pkg=github.com/containerd/containerd/v2
ctd_ldflags="-X $ctd_pkg/version.Version=${containerd_version#v} -X $ctd_pkg/version.Package=$ctd_pkg"
for cmd in containerd containerd-shim-runc-v2 ctr; do
  build containerd "$cmd" "$ctd_pkg/cmd/$cmd" "$ctd_ldflags" "no_btrfs no_devmapper no_zfs"
done

echo "$bin_dir"
