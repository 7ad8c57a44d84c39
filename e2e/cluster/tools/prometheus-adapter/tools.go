//go:build tools

// Package tools pins prometheus-adapter, which serves the custom metrics API the HPA
// controller reads (queue depth, P95 latency) from Prometheus.
package tools

import _ "sigs.k8s.io/prometheus-adapter/cmd/adapter"
