package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// kwok plays the kubelet of the simulated nodes (those annotated
// kwok.x-k8s.io/node=fake), with kwok's stock stages: nodes become Ready,
// Pods Running and Ready, Job Pods Succeed. Its down stops it.
type kwok struct{}

func (kwok) Name() string { return "kwok" }

// daemon is kwok as stop and status know it: its stages do not tell its
// process (the kubeconfig does).
func (k kwok) daemon(ac *actionContext) daemon { return k.withStages(ac, "") }

func (kwok) withStages(ac *actionContext, stages string) daemon {
	kubeconfig := ac.kubeconfig("kwok")
	return daemon{name: "kwok", path: filepath.Join(ac.assets, "kwok"), config: kubeconfig, grace: 5 * time.Second, args: []string{
		"--config=" + stages,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40", "--cidr=" + ac.fakePodCIDR.String(),
		"--server-address=127.0.0.1:" + strconv.Itoa(ac.kwokPort),
		"--kubeconfig=" + kubeconfig, // last: stop tells its process by it
	}}
}

func (k kwok) Up(_ context.Context, ac *actionContext) error {
	stages, err := k.stages(ac)
	if err != nil {
		return err
	}
	return ac.start(k.withStages(ac, stages))
}

func (k kwok) Down(_ context.Context, ac *actionContext) error { return ac.stop(k.daemon(ac)) }

// stages are the stock stages shipped in the kwok Go module that
// hack/tools.sh built kwok from; `go mod download` finds it in the module
// cache (or fetches it).
func (kwok) stages(ac *actionContext) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(ac.repo, "hack", "tools", "kwok")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the kwok module (go mod download sigs.k8s.io/kwok in %s): %w", cmd.Dir, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("reading go mod download's answer: %w", err)
	}
	s := filepath.Join(mod.Dir, "kustomize", "stage")
	if _, err := os.Stat(s); err != nil {
		return "", fmt.Errorf("kwok's stages: %w", err)
	}
	return strings.Join([]string{
		filepath.Join(s, "node", "fast", "node-initialize.yaml"),
		filepath.Join(s, "node", "heartbeat-with-lease", "node-heartbeat-with-lease.yaml"),
		filepath.Join(s, "pod", "fast", "pod-ready.yaml"),
		filepath.Join(s, "pod", "fast", "pod-complete.yaml"),
		filepath.Join(s, "pod", "fast", "pod-delete.yaml"),
	}, ","), nil
}
