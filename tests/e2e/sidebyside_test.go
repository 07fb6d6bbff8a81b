//go:build e2e

package e2e

import (
	"flag"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// TestFunctionsSideBySide runs the tests that only create Functions, each in
// namespaces of its own, and the tutorials that do (tutorialTests) side by
// side against one install of the module (the small-cluster sample in build
// mode, its Pods on the real node), as a cluster's users share one module;
// one of them also changes the log level, which reaches the running
// controller without a restart. Then, on the same install and one at a
// time, come the switches of the Function mode (their Functions were
// created before the side-by-side tests, so they are built by then), 25
// Functions applied at once, and the tutorials that change the Serverless
// CR and restore it.
// Tests that otherwise change the module, restart its parts or count its
// controller's work run alone, each with its own install.
func TestFunctionsSideBySide(t *testing.T) {
	f := startFunctionController(t)
	switchFx := f.createSwitchFunctions()
	tutorials, alone := tutorialTests(f)
	// Longest first (about 80 seconds down to ten, as they took side by
	// side in a run of make test), so that no long one starts last and runs
	// alone at the end.
	sideBySide(t, longestFirst(slices.Concat([]subtest{
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
	}), "CPUAutoscalingScalesOutAndBackIn", "FunctionScalesToZeroAndWakes", "01-51-scale-function-to-zero.md",
		"GitFunctions", "FunctionsBuildRunAndGo", "FunctionThatCannotStartAnswers503", "ActivatorPodDeletedWhileHolding",
		"01-95-manage-functions-with-kyma-cli.md", "FailingDependencyInstallKeepsThePreviousVersion",
		"ReplicaThatCannotBePlacedSaysWhy", "01-93-override-runtime-image.md")...)
	// Leaves the module as the sample has it, and deletes its Functions.
	t.Run("SwitchFunctionMode", func(t *testing.T) { testSwitchFunctionMode(t, f.in(t), switchFx) })
	// Fills the node with Functions and builds: alone, before the
	// tutorials' CR changes.
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

// longestFirst is subtests with the named ones first, in the order named,
// and the others after them in their order; a name that is no subtest's
// panics (a renamed test).
func longestFirst(subtests []subtest, names ...string) []subtest {
	out := make([]subtest, 0, len(subtests))
	for _, n := range names {
		i := slices.IndexFunc(subtests, func(s subtest) bool { return s.name == n })
		if i < 0 {
			panic("longestFirst: no subtest " + n)
		}
		out = append(out, subtests[i])
	}
	for _, s := range subtests {
		if !slices.Contains(names, s.name) {
			out = append(out, s)
		}
	}
	return out
}

// sideBySide runs the subtests in parallel, in a group named "side by
// side", and returns when all of them have ended. At most -parallel run at
// once, and they start in the order given: the next when one has ended.
// (Parallel subtests of the testing package start in no particular order
// once their parent returns: seen, the last ones first.) A group in a
// subtest of a group has its own -parallel.
func sideBySide(t *testing.T, subtests ...subtest) {
	t.Helper()
	t.Run("side by side", func(t *testing.T) {
		slots := make(chan struct{}, parallel())
		var wg sync.WaitGroup
		for _, s := range subtests {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				t.Run(s.name, s.run)
			}()
		}
		wg.Wait()
	})
}

// parallel is the -parallel flag of go test (by default GOMAXPROCS).
func parallel() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return runtime.GOMAXPROCS(0)
}

// in is f for a subtest: its failures, waits and cleanups are t's; the
// module, the clients and the Job log stay the parent's.
func (f *fnEnv) in(t *testing.T) *fnEnv {
	e := *f.env
	e.t = t
	return &fnEnv{env: &e, fcs: f.fcs, jobs: f.jobs}
}
