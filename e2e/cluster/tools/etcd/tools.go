//go:build tools

// Package tools pins the etcd server the local test cluster stores its state in.
package tools

import _ "go.etcd.io/etcd/server/v3"
