//go:build tools

// Package tools pins containerd (the daemon, its runc shim and the ctr client), the
// container runtime of the local cluster's real node; build_node.sh compiles them
// from this module's dependency graph.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
