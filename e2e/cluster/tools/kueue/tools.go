//go:build tools

// Package tools pins Kueue, whose controller and webhooks govern the elastic capacity
// of TenantPools in the tests (e2e/kueue.py runs it against the local cluster).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
