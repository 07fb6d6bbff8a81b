//go:build tools

// Package tools pins metrics-server, the local cluster's resource metrics
// API (kubectl top, HorizontalPodAutoscalers), built by hack/tools.sh.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
