//go:build tools

// Package tools pins Helm, which the chart's tests install, upgrade and uninstall with.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
