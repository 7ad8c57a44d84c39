# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # cache_root is for the caller; here and bin_dir are its
# Sourced by build.sh and build_node.sh: where the binaries are cached, how a pinned
# module's version is read, how one binary is built (once: a second run finds it), and
# the version stamps the upstream Kubernetes release build sets (hack/lib/version.sh),
# so /version and `kubectl version` report the real release. The caller sets $here
# (its own directory) and, before calling build, $bin_dir.
cache_root="${SHOAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal}"

module_version() { # module directory, module path -> pinned version from its go.mod
  (cd "$here/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

build() { # module directory, output name, package, ldflags[, build tags]
  local out="$bin_dir/$2"
  if [[ -x "$out" ]]; then return 0; fi
  echo "building $2 from $3" >&2
  (cd "$here/tools/$1" &&
    CGO_ENABLED=0 go build -trimpath -tags "${5:-}" -ldflags "-s -w $4" -o "$out.tmp" "$3")
  mv "$out.tmp" "$out"
}

k8s_version_ldflags() { # Kubernetes version (v1.N.P) -> the -X flags of its release build
  local minor="${1#v1.}" flags="" pkg
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$1 -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}
