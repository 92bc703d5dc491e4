//go:build tools

// Package tools pins the promtool built by hack/build-promtool.sh, which
// runs the alert rules' unit tests (manifests/alerts).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
