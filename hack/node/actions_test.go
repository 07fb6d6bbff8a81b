package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAction records its up and down in trace and fails as told.
type fakeAction struct {
	name           string
	upErr, downErr error
	trace          *[]string
}

func (f fakeAction) Name() string { return f.name }

func (f fakeAction) Up(context.Context, *actionContext) error {
	*f.trace = append(*f.trace, "up "+f.name)
	return f.upErr
}

func (f fakeAction) Down(context.Context, *actionContext) error {
	*f.trace = append(*f.trace, "down "+f.name)
	return f.downErr
}

// quietContext is an actionContext in a fresh state directory that logs
// nowhere, with no actions: a test never runs the real ones, whose downs
// would stop the cluster this machine may run.
func quietContext(t *testing.T) *actionContext {
	t.Helper()
	ac := newActionContext(testConfig(t))
	ac.log.SetOutput(&strings.Builder{})
	ac.out = &strings.Builder{}
	ac.getenv = func(string) string { return "" }
	ac.all = nil
	return ac
}

// The cluster comes up in this order, and down undoes it in reverse: the
// node's daemons stop before the API server they talk to, the bridge it
// listens on goes last (docs/contributor/local-cluster.md lists the same).
func TestActionList(t *testing.T) {
	names := func(actions []action) []string {
		var n []string
		for _, a := range actions {
			n = append(n, a.Name())
		}
		return n
	}
	tests := []struct {
		name    string
		actions []action
		want    []string
	}{
		{"network", networkActions(), []string{"preflight", "sysctls", "iptables", "bridge"}},
		{"control plane", controlPlaneActions(), []string{"certificates", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "bootstrap objects", "volume-recycler"}},
		{"node", nodeActions(), []string{"image registry", "containerd", "kubelet", "kube-proxy", "coredns", "metrics-server", "sysctl-record", "node ready"}},
		{"all", allActions(), []string{
			"preflight", "sysctls", "iptables", "bridge",
			"certificates", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "bootstrap objects", "volume-recycler",
			"image registry", "containerd", "kubelet", "kube-proxy", "coredns", "metrics-server", "sysctl-record", "node ready",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(tt.actions))
		})
	}
	seen := map[string]bool{}
	for _, n := range names(allActions()) {
		assert.False(t, seen[n], "two actions are named %q", n)
		seen[n] = true
	}

	// status lists the daemons in the order their actions start them
	var daemons []string
	for _, d := range quietContext(t).allDaemons() {
		daemons = append(daemons, d.name)
	}
	assert.Equal(t, []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "volume-recycler",
		"image-registry", "containerd", "kubelet", "kube-proxy", "coredns", "metrics-server"}, daemons)
}

// up runs actions in order and, when one fails, the downs of those that
// went up and of the failed one, in reverse; down runs every down in
// reverse and goes on after an error. Every error is returned.
func TestUpAndDown(t *testing.T) {
	broken, stuck := errors.New("broken"), errors.New("stuck")
	type step struct {
		name           string
		upErr, downErr error
	}
	tests := []struct {
		name      string
		steps     []step
		down      bool // run down instead of up
		wantTrace []string
		wantErrs  []string
	}{
		{name: "up runs every action in order and undoes nothing",
			steps:     []step{{name: "a"}, {name: "b"}, {name: "c"}},
			wantTrace: []string{"up a", "up b", "up c"}},
		{name: "a failed up undoes those that went up and itself, in reverse; later ones never run",
			steps:     []step{{name: "a"}, {name: "b"}, {name: "c", upErr: broken}, {name: "d"}},
			wantTrace: []string{"up a", "up b", "up c", "down c", "down b", "down a"},
			wantErrs:  []string{"c: broken"}},
		{name: "the first action failing undoes only itself",
			steps:     []step{{name: "a", upErr: broken}, {name: "b"}},
			wantTrace: []string{"up a", "down a"},
			wantErrs:  []string{"a: broken"}},
		{name: "an undo that fails does not stop the others, and both errors are returned",
			steps:     []step{{name: "a"}, {name: "b", downErr: stuck}, {name: "c", upErr: broken}},
			wantTrace: []string{"up a", "up b", "up c", "down c", "down b", "down a"},
			wantErrs:  []string{"c: broken", "b down: stuck"}},
		{name: "down runs every down in reverse",
			steps:     []step{{name: "a"}, {name: "b"}, {name: "c"}},
			down:      true,
			wantTrace: []string{"down c", "down b", "down a"}},
		{name: "down goes on after errors and returns each of them",
			steps:     []step{{name: "a", downErr: stuck}, {name: "b"}, {name: "c", downErr: broken}},
			down:      true,
			wantTrace: []string{"down c", "down b", "down a"},
			wantErrs:  []string{"c down: broken", "a down: stuck"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trace []string
			var actions []action
			for _, s := range tt.steps {
				actions = append(actions, fakeAction{name: s.name, upErr: s.upErr, downErr: s.downErr, trace: &trace})
			}
			ac := quietContext(t)
			var err error
			if tt.down {
				err = ac.down(t.Context(), actions)
			} else {
				err = ac.up(t.Context(), actions)
			}
			assert.Equal(t, tt.wantTrace, trace)
			if len(tt.wantErrs) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErrs {
				assert.ErrorContains(t, err, want)
			}
			for _, s := range tt.steps {
				if s.upErr != nil {
					assert.ErrorIs(t, err, s.upErr, "the cause stays reachable")
				}
			}
		})
	}
}
