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
cache_root="${SHOAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal}"

module_version() { # module directory, module path -> pinned version from its go.mod
  (cd "$here/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

k8s_version="$(module_version node k8s.io/kubernetes)"
containerd_version="$(module_version containerd github.com/containerd/containerd/v2)"
bin_dir="$cache_root/node-bin/k8s-$k8s_version-containerd-$containerd_version"
mkdir -p "$bin_dir"

build() { # module directory, output name, package, ldflags, build tags
  local out="$bin_dir/$2"
  if [[ -x "$out" ]]; then return 0; fi
  echo "building $2 from $3" >&2
  (cd "$here/tools/$1" &&
    CGO_ENABLED=0 go build -trimpath -tags "$5" -ldflags "-s -w $4" -o "$out.tmp" "$3")
  mv "$out.tmp" "$out"
}

# The version stamps of the upstream release builds, as build.sh sets them.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
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
