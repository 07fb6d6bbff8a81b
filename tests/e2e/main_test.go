//go:build e2e

// Package e2e holds the end-to-end tests. They run against the local control
// plane of hack/cluster.sh, which TestMain brings up (or reuses) and releases;
// run them with `make test-e2e`. Tests reach the cluster with
// framework.ClusterFor(t).
package e2e

import (
	"os"
	"testing"

	"github.com/kyma-project/serverless-manager/tests/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }
