//go:build tools

// Package tools pins kube-router, whose network policy controller (alone: no routing,
// no service proxy) enforces NetworkPolicies on the local cluster's real node with
// iptables and ipsets (e2e/cluster/netpol.py runs it for the real-node tier).
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
