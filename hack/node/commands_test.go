package main

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command has a name of its own, says what it does and runs
// something; usage lists each with its arguments.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands() {
		assert.False(t, seen[c.name], "two commands are named %q", c.name)
		seen[c.name] = true
		assert.NotEmpty(t, c.help, c.name)
		assert.NotNil(t, c.run, c.name)
	}
	// what hack/cluster.sh, hack/run.sh, .ci/run and tests/framework call
	for _, name := range []string{"up", "down", "release", "status", "healthy", "kubeconfig-sa", "restart", "load", "manager-env", "insecure-registry", "setting", "settings", "state", "recycle-volumes"} {
		assert.True(t, seen[name], "no command %q", name)
	}
	var out strings.Builder
	usage(&out, commands(), flag.NewFlagSet("node", flag.ContinueOnError))
	assert.Contains(t, out.String(), "  kubeconfig-sa NS SA\n")
	assert.Contains(t, out.String(), "  restart COMPONENT\n")
}

func TestParse(t *testing.T) {
	var ran []string
	fake := func(name string, args ...string) command {
		return command{name: name, args: args, help: name, run: func(context.Context, *actionContext, invocation) error {
			ran = append(ran, name)
			return nil
		}}
	}
	cmds := []command{fake("up"), fake("setting", "NAME"), fake("kubeconfig-sa", "NS", "SA")}
	tests := []struct {
		name     string
		argv     []string
		wantCmd  string
		wantArgs []string
		wantErr  string
		// wantState and wantUser are the flags parsed
		wantState string
		wantUser  int
	}{
		{name: "a command without arguments", argv: []string{"up"}, wantCmd: "up", wantArgs: []string{}},
		{name: "flags follow the command", argv: []string{"up", "--user", "42", "-state", "/s"}, wantCmd: "up", wantArgs: []string{}, wantState: "/s", wantUser: 42},
		{name: "positional arguments come before the flags", argv: []string{"kubeconfig-sa", "ns", "sa", "-state", "/s"}, wantCmd: "kubeconfig-sa", wantArgs: []string{"ns", "sa"}, wantState: "/s"},
		{name: "one argument", argv: []string{"setting", "NODE_IP"}, wantCmd: "setting", wantArgs: []string{"NODE_IP"}},
		{name: "no command", argv: nil, wantErr: "no command"},
		{name: "an unknown command", argv: []string{"start"}, wantErr: `unknown command "start"`},
		{name: "a missing argument", argv: []string{"kubeconfig-sa", "ns"}, wantErr: "kubeconfig-sa needs NS SA"},
		{name: "a flag where an argument belongs", argv: []string{"setting", "-state", "/s"}, wantErr: "setting needs NAME"},
		{name: "an argument too many", argv: []string{"setting", "A", "B"}, wantErr: `setting takes 1 arguments, got also ["B"]`},
		{name: "an unknown flag", argv: []string{"up", "-nope"}, wantErr: "flag provided but not defined: -nope"},
		{name: "help", argv: []string{"-h"}, wantErr: flag.ErrHelp.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("node", flag.ContinueOnError)
			fs.SetOutput(&strings.Builder{})
			state := fs.String("state", "", "")
			user := fs.Int("user", 0, "")
			cmd, args, err := parse(cmds, tt.argv, fs)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, errUsage)
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantCmd, cmd.name)
			assert.Equal(t, tt.wantArgs, args)
			assert.Equal(t, tt.wantState, *state)
			assert.Equal(t, tt.wantUser, *user)
			ran = nil
			require.NoError(t, cmd.run(t.Context(), nil, invocation{args: args}))
			assert.Equal(t, []string{tt.wantCmd}, ran, "the command found is the one that runs")
		})
	}
}

// runCommand runs the command name of the real table in ac.
func runCommand(t *testing.T, ac *actionContext, name string, inv invocation) error {
	t.Helper()
	for _, c := range commands() {
		if c.name == name {
			return c.run(t.Context(), ac, inv)
		}
	}
	t.Fatalf("no command %q", name)
	return nil
}

// freePort is a port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// up, down and release on fake actions: who asked for the cluster decides
// who may stop it, and stopping runs every down in reverse and removes the
// state directory.
func TestLifecycleCommands(t *testing.T) {
	// deadPID is above the kernel's largest PID (pid_max is at most 2^22).
	const deadPID = "4194305"
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name string
		// user asks for the cluster with up -user; 0: a person (make cluster-up).
		user      int
		otherUser string // another registered test process
		keep      string // E2E_KEEP_CLUSTER
		release   string
		wantTrace []string
		wantGone  bool
	}{
		{name: "the last test process stops the cluster tests started",
			user: 7, release: "7", wantGone: true,
			wantTrace: []string{"up a", "up b", "down b", "down a"}},
		{name: "a test process that ended no longer counts",
			user: 7, otherUser: deadPID, release: "7", wantGone: true,
			wantTrace: []string{"up a", "up b", "down b", "down a"}},
		{name: "a live test process keeps it",
			user: 7, otherUser: self, release: "7",
			wantTrace: []string{"up a", "up b"}},
		{name: "E2E_KEEP_CLUSTER=1 keeps it",
			user: 7, keep: "1", release: "7",
			wantTrace: []string{"up a", "up b"}},
		{name: "a cluster a person started is never stopped by tests",
			user: 0, release: "7",
			wantTrace: []string{"up a", "up b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ac := quietContext(t)
			var trace []string
			ac.all = []action{fakeAction{name: "a", trace: &trace}, fakeAction{name: "b", trace: &trace}}
			// the settings start asks for, once it has cleaned up the recorded ones: ports no other cluster holds
			env := map[string]string{"E2E_KEEP_CLUSTER": tt.keep}
			for _, p := range []string{"APISERVER_PORT", "ETCD_PORT", "ETCD_PEER_PORT", "KCM_PORT", "SCHEDULER_PORT", "KWOK_PORT"} {
				env[p] = freePort(t)
			}
			ac.getenv = func(k string) string { return env[k] }
			require.NoError(t, os.RemoveAll(ac.state))
			require.NoError(t, ac.complete(ac.getenv))

			require.NoError(t, runCommand(t, ac, "up", invocation{user: tt.user}))
			assert.Contains(t, ac.out.(*strings.Builder).String(), "KUBECONFIG="+filepath.Join(ac.state, "kubeconfig"))
			_, err := os.Stat(ac.ownedByTests())
			assert.Equal(t, tt.user > 0, err == nil, "owned by tests")
			if tt.otherUser != "" {
				require.NoError(t, os.WriteFile(filepath.Join(ac.usersDir(), tt.otherUser), nil, 0o644))
			}

			require.NoError(t, runCommand(t, ac, "release", invocation{args: []string{tt.release}}))
			assert.Equal(t, tt.wantTrace, trace)
			_, err = os.Stat(ac.state)
			assert.Equal(t, tt.wantGone, os.IsNotExist(err), "state directory removed")
			if !tt.wantGone {
				_, err = os.Stat(filepath.Join(ac.usersDir(), tt.release))
				assert.True(t, os.IsNotExist(err), "the released process is no user any more")
				_, err = os.Stat(filepath.Join(ac.usersDir(), deadPID))
				assert.True(t, os.IsNotExist(err), "a process that ended is forgotten")
			}
		})
	}

	t.Run("down stops and removes a cluster, and then has nothing to do", func(t *testing.T) {
		ac := quietContext(t)
		var trace []string
		ac.all = []action{fakeAction{name: "a", trace: &trace}, fakeAction{name: "b", trace: &trace}}
		require.NoError(t, runCommand(t, ac, "down", invocation{}))
		assert.Equal(t, []string{"down b", "down a"}, trace)
		assert.NoDirExists(t, ac.state)
		require.NoError(t, runCommand(t, ac, "down", invocation{}))
		assert.Equal(t, []string{"down b", "down a"}, trace)
	})
	t.Run("release refuses what is no process ID", func(t *testing.T) {
		assert.ErrorContains(t, runCommand(t, quietContext(t), "release", invocation{args: []string{"../x"}}), "no process ID")
	})
}
