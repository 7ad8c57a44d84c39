//go:build tools

// Package tools pins gofakes3, an S3-compatible object store in one process. The
// real-node tier serves model repositories from it, on the node's bridge address, so
// that a model's fetch container downloads over S3 exactly as from MinIO or Ceph RGW
// (e2e/object_store.py runs it).
package tools

import _ "github.com/johannesboyne/gofakes3/cmd/gofakes3"
