//go:build e2e

package e2e

import "testing"

// TestFunctionsSideBySide runs the tests that only create Functions, each in
// namespaces of its own, side by side against one install of the module
// (the small-cluster sample in build mode, its Pods on the real node), as
// a cluster's users share one module. Tests that change the module, restart
// its parts or count its controller's work run alone, each with its own
// install.
func TestFunctionsSideBySide(t *testing.T) {
	f := startFunctionController(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *fnEnv)
	}{
		{"CloudEventsReachTheHandler", testCloudEventsReachTheHandler},
		{"ServiceSelectsOnlyTheFunctionsPods", testServiceSelectsOnlyTheFunctionsPods},
		{"FailingDependencyInstallKeepsThePreviousVersion", testFailingDependencyInstallKeepsThePreviousVersion},
		{"GitFunctions", testGitFunctions},
		{"FunctionSeesItsSecrets", testFunctionSeesItsSecrets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, f.in(t))
		})
	}
}

// in is f for a subtest: its failures, waits and cleanups are t's; the
// module, the clients and the Job log stay the parent's.
func (f *fnEnv) in(t *testing.T) *fnEnv {
	e := *f.env
	e.t = t
	return &fnEnv{env: &e, fcs: f.fcs, jobs: f.jobs}
}
