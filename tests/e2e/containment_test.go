//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failOnPurposeEnv names a test and a point in it, "TestName/point", where
// failHere fails that test: TestFailureDoesNotCascade uses it to show that
// a failed test leaves the cluster usable for the next one.
const failOnPurposeEnv = "E2E_FAIL_ON_PURPOSE"

// failHere fails the test at point when failOnPurposeEnv says so.
func failHere(t *testing.T, point string) {
	t.Helper()
	if os.Getenv(failOnPurposeEnv) == t.Name()+"/"+point {
		t.Fatalf("failing on purpose at %q (%s)", point, failOnPurposeEnv)
	}
}

// One failed test is reported once and never cascades. This test binary
// runs two tests in a child process on the same cluster: the first fails
// where it leaves the most behind (its manager stopped, the Serverless CRD
// being deleted, its CR held by the manager's finalizer, a Function and
// the module's objects in place), the second installs the module afresh
// and must pass.
func TestFailureDoesNotCascade(t *testing.T) {
	if os.Getenv(failOnPurposeEnv) != "" {
		t.Skip("this is the child run")
	}
	const failing, next = "TestManifestDeletedUnderTheCR", "TestRenderedInstallReachesReady"
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^("+failing+"|"+next+")$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), failOnPurposeEnv+"="+failing+"/manifest deleted")
	out, err := cmd.CombinedOutput()
	log := string(out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the child run:\n%s", log)
		}
	})
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child run fails (its first test does)")

	results := regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\S+)`).FindAllStringSubmatch(log, -1)
	got := map[string]string{}
	for _, r := range results {
		got[r[2]] = r[1]
	}
	assert.Equal(t, map[string]string{failing: "FAIL", next: "PASS"}, got, "the test results of the child run")
	assert.Contains(t, log, "failing on purpose", "the first test failed where it was told to, not elsewhere")
	assert.Equal(t, 1, strings.Count(log, "failing on purpose at"), "one failure, reported once")
	assert.NotContains(t, log, "Error Trace:", "no assertion failed besides")
	assert.NotContains(t, log, "the next test would find the module", "the cleanup cleaned up")
}
