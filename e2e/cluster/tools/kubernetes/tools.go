//go:build tools

// Package tools pins the upstream Kubernetes commands that make up the local
// test cluster; build.sh compiles them from this module's dependency graph.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
