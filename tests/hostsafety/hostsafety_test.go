//go:build e2e

// Package hostsafety checks that the local cluster leaves the machine it
// ran on as it found it: `make cluster-down` removes what the cluster's
// parts added and nothing another program added meanwhile. It brings its
// own cluster up and down, so it runs only when no cluster is running (in
// make test, after the e2e package has released the one it used).
package hostsafety

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// What another program adds while the cluster runs. 192.0.2.0/24 is a
// documentation range: no traffic of this machine matches the rules.
var (
	foreignRules = []struct{ table, rule string }{
		{"filter", "-A INPUT -s 192.0.2.1/32 -m comment --comment serverless-hostsafety -j DROP"},
		{"nat", "-A POSTROUTING -s 192.0.2.0/24 -d 192.0.2.0/24 -m comment --comment serverless-hostsafety -j RETURN"},
		{"filter", "-A HOSTSAFETY-FOREIGN -j RETURN"},
	}
	foreignChain = "HOSTSAFETY-FOREIGN"
	foreignNFT   = []string{"inet", "hostsafety_foreign"}
	// sysctls the node's kubelet sets; another program's later change of
	// the first one the cluster changed must stay
	foreignSysctlCandidates = []string{"kernel/panic", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}
)

func TestClusterDownLeavesOtherProgramsRulesTablesAndSysctls(t *testing.T) {
	root, err := repo.Root()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, ".cluster")); err == nil {
		t.Skip("a cluster is running (make cluster-up, or kept by E2E_KEEP_CLUSTER=1): this test brings its own up and down")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	before := machineState(t, root)
	sysctlsBefore := readSysctls(t)

	c, err := framework.EnsureCluster(ctx)
	require.NoError(t, err, "bringing up the local cluster")
	released := false
	t.Cleanup(func() {
		if !released {
			assert.NoError(t, c.Release())
		}
	})
	_, err = os.Stat(filepath.Join(root, ".cluster", "owned-by-tests"))
	require.NoError(t, err, "the cluster was started by this test, so that its release stops it")

	// While the cluster runs: another program's chain, rules, nftables
	// table and a changed sysctl.
	run(t, "iptables", "-w", "-N", foreignChain)
	for _, r := range foreignRules {
		run(t, "iptables", append([]string{"-w", "-t", r.table}, strings.Fields(r.rule)...)...)
	}
	run(t, "nft", "add", "table", foreignNFT[0], foreignNFT[1])
	run(t, "nft", "add", "chain", foreignNFT[0], foreignNFT[1], "hostsafety")
	sysctlsUp := readSysctls(t)
	changedKey := ""
	for _, k := range foreignSysctlCandidates {
		if sysctlsUp[k] != sysctlsBefore[k] {
			changedKey = k
			break
		}
	}
	require.NotEmpty(t, changedKey, "kubelet changed none of %v (before %v, with the cluster %v)", foreignSysctlCandidates, sysctlsBefore, sysctlsUp)
	v, err := strconv.Atoi(sysctlsUp[changedKey])
	require.NoError(t, err)
	foreignValue := strconv.Itoa(v + 1)
	writeSysctl(t, changedKey, foreignValue)
	t.Cleanup(func() { removeForeign(t, before, changedKey, sysctlsBefore[changedKey]) })

	require.NoError(t, c.Release(), "stopping the cluster")
	released = true
	_, err = os.Stat(filepath.Join(root, ".cluster"))
	require.True(t, os.IsNotExist(err), "the release stopped the cluster and removed .cluster: %v", err)

	for _, r := range foreignRules {
		check := append([]string{"-w", "-t", r.table, "-C"}, strings.Fields(r.rule)[1:]...)
		assert.NoError(t, exec.Command("iptables", check...).Run(), "the foreign rule %q of table %s survived", r.rule, r.table)
	}
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "table "+strings.Join(foreignNFT, " "), "the foreign nftables table survived")
	assert.Equal(t, foreignValue, readSysctls(t)[changedKey], "%s, changed by another program while the cluster ran, keeps that value", changedKey)

	// Everything else is as before: the differences are the foreign
	// things, and the headers of the tables that hold them.
	after := machineState(t, root)
	added, removed := diff(before, after)
	assert.Equal(t, []string{"sysctl: " + changedKey + "=" + sysctlsBefore[changedKey]}, removed, "lines of the machine's state that went")
	want := []string{
		"iptables: :" + foreignChain + " -", // machineState drops a chain's counters
		"nft: table " + strings.Join(foreignNFT, " "),
		"sysctl: " + changedKey + "=" + foreignValue,
	}
	for _, r := range foreignRules {
		want = append(want, "iptables: "+r.rule)
	}
	for _, line := range added {
		if slices.Contains(want, line) || tableHeader(line) {
			continue
		}
		assert.Fail(t, "the cluster left something behind", "new line of the machine's state: %q", line)
	}
	for _, w := range want {
		assert.Contains(t, added, w)
	}
}

// tableHeader tells lines that come with a table holding a foreign rule:
// the table itself, its built-in chains and its end.
func tableHeader(line string) bool {
	section, item, _ := strings.Cut(line, ": ")
	switch section {
	case "iptables", "ip6tables":
		if strings.HasPrefix(item, "*") || item == "COMMIT" {
			return true
		}
		f := strings.Fields(strings.TrimPrefix(item, ":"))
		return strings.HasPrefix(item, ":") && len(f) == 2 && f[1] != "-"
	case "nft":
		return strings.HasPrefix(item, "table ip ") || strings.HasPrefix(item, "table ip6 ")
	}
	return false
}

// removeForeign takes away what the test added, and the iptables tables
// its rules kept (iptables-nft makes a table on first use; the cluster's
// down deletes it only when nothing else is in it) when they were not
// there before the test and hold nothing else.
func removeForeign(t *testing.T, before []string, key, value string) {
	for _, r := range foreignRules {
		args := append([]string{"-w", "-t", r.table, "-D"}, strings.Fields(r.rule)[1:]...)
		_ = exec.Command("iptables", args...).Run()
	}
	_ = exec.Command("iptables", "-w", "-X", foreignChain).Run()
	_ = exec.Command("nft", "delete", "table", foreignNFT[0], foreignNFT[1]).Run()
	for _, table := range []string{"filter", "nat"} {
		if slices.Contains(before, "nft: table ip "+table) {
			continue
		}
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		empty := true
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			empty = empty && strings.HasPrefix(l, "-P ")
		}
		if empty {
			_ = exec.Command("nft", "delete", "table", "ip", table).Run()
		}
	}
	writeSysctl(t, key, value)
}

func machineState(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "state")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "hack/cluster.sh state")
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func diff(before, after []string) (added, removed []string) {
	for _, l := range after {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	for _, l := range before {
		if !slices.Contains(after, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range foreignSysctlCandidates {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		require.NoError(t, err)
		m[k] = strings.TrimSpace(string(v))
	}
	return m
}

func writeSysctl(t *testing.T, key, value string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644))
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}
