//go:build tools

// Package tools pins KWOK, which simulates the cluster's (GPU) nodes and makes
// their scheduled pods Running without a container runtime.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
