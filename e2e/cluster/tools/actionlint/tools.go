//go:build tools

// Package tools pins actionlint, which the unit tests run over .github/workflows/ (it
// also runs shellcheck over run: blocks when shellcheck is on PATH).
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
