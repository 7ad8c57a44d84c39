#!/usr/bin/env bash
# Builds one test tool (a linter, a checker) from the pinned Go module under tools/<dir>/,
# into a cache directory keyed by that module's go.sum, apart from the cluster's
# binaries (so adding a tool never rebuilds Kubernetes). A second run finds it and
# returns at once. Prints the binary's path on its last line.
# Usage: build_tool.sh <tools dir> <package> [binary name]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${SHOAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal}"
dir="$1"; package="$2"; name="${3:-$(basename "$package")}"
module="$here/tools/$dir"
key="$(cat "$module/go.mod" "$module/go.sum" "$module"/*.go 2>/dev/null | sha256sum | cut -c1-16)"
out="$cache_root/tools/$dir-$key/$name"
if [[ ! -x "$out" ]]; then
  echo "building $name from $package" >&2
  mkdir -p "$(dirname "$out")"
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$package")
  mv "$out.tmp" "$out"
fi
echo "$out"
