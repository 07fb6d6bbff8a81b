//go:build e2e

package e2e

import (
	"slices"
	"testing"
)

// TestFunctionsSideBySide runs the tests that only create Functions, each in
// namespaces of its own, and the tutorials that do (tutorialTests) side by
// side against one install of the module (the small-cluster sample in build
// mode, its Pods on the real node), as a cluster's users share one module;
// one of them also changes the log level, which reaches the running
// controller without a restart. Then, on the same install and one at a
// time, come 25 Functions applied at once and the tutorials that change the
// Serverless CR and restore it.
// Tests that otherwise change the module, restart its parts or count its
// controller's work run alone, each with its own install.
func TestFunctionsSideBySide(t *testing.T) {
	f := startFunctionController(t)
	tutorials, alone := tutorialTests(f)
	// Longest first (about two minutes down to ten seconds), so that no
	// long one starts last and runs alone at the end.
	sideBySide(t, slices.Concat([]subtest{
		{"CPUAutoscalingScalesOutAndBackIn", func(t *testing.T) { testCPUAutoscalingScalesOutAndBackIn(t, f.in(t)) }},
		{"GitFunctions", func(t *testing.T) { testGitFunctions(t, f.in(t)) }},
		{"FunctionsBuildRunAndGo", func(t *testing.T) { testFunctionsBuildRunAndGo(t, f.in(t)) }},
		{"FunctionScalesToZeroAndWakes", func(t *testing.T) { testFunctionScalesToZeroAndWakes(t, f.in(t)) }},
		{"FunctionThatCannotStartAnswers503", func(t *testing.T) { testFunctionThatCannotStartAnswers503(t, f.in(t)) }},
		// Deletes an activator Pod: the other scale-to-zero tests' parked
		// Functions must keep answering meanwhile.
		{"ActivatorPodDeletedWhileHolding", func(t *testing.T) { testActivatorPodDeletedWhileHolding(t, f.in(t)) }},
		{"ReplicaThatCannotBePlacedSaysWhy", func(t *testing.T) { testReplicaThatCannotBePlacedSaysWhy(t, f.in(t)) }},
	}, tutorials, []subtest{
		{"FailingDependencyInstallKeepsThePreviousVersion", func(t *testing.T) { testFailingDependencyInstallKeepsThePreviousVersion(t, f.in(t)) }},
		{"FunctionSeesItsSecrets", func(t *testing.T) { testFunctionSeesItsSecrets(t, f.in(t)) }},
		{"ServiceSelectsOnlyTheFunctionsPods", func(t *testing.T) { testServiceSelectsOnlyTheFunctionsPods(t, f.in(t)) }},
		{"CloudEventsReachTheHandler", func(t *testing.T) { testCloudEventsReachTheHandler(t, f.in(t)) }},
	})...)
	// Fills the node with Functions and builds: alone, before the CR
	// changes.
	t.Run("ManyFunctionsAtOnce", func(t *testing.T) { testManyFunctionsAtOnce(t, f.in(t)) })
	for _, s := range alone {
		t.Run(s.name, s.run)
	}
}

// subtest is a named part of a test.
type subtest struct {
	name string
	run  func(*testing.T)
}

// sideBySide runs the subtests in parallel, in a group named "side by
// side", and returns when all of them have ended (-parallel bounds how many
// run at once).
func sideBySide(t *testing.T, subtests ...subtest) {
	t.Helper()
	t.Run("side by side", func(t *testing.T) {
		for _, s := range subtests {
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				s.run(t)
			})
		}
	})
}

// in is f for a subtest: its failures, waits and cleanups are t's; the
// module, the clients and the Job log stay the parent's.
func (f *fnEnv) in(t *testing.T) *fnEnv {
	e := *f.env
	e.t = t
	return &fnEnv{env: &e, fcs: f.fcs, jobs: f.jobs}
}
