//go:build tools

// Package tools pins the upstream Kubernetes node commands (the kubelet and
// kube-proxy) of the local cluster's real node. The requirements and replace
// directives are the control plane's (../kubernetes); this module exists because
// the control plane's go.sum lacks the kubelet's own dependencies, and tidying
// them in here keeps the control plane's build untouched.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
