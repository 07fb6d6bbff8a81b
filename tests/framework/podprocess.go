package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework/podrun"
)

// FunctionControllerDeployment is the chart's Deployment of the Function
// controller, whose Pod the local cluster only simulates.
const FunctionControllerDeployment = "serverless-ctrl-mngr"

// volumeSyncInterval is how often a PodProcess's ConfigMap volumes are
// compared with the cluster (kubelet takes up to a minute; tests wait less).
const volumeSyncInterval = time.Second

// PodProcess is a container of a Deployment running as a process on this
// machine with its Pod's configuration (see podrun). Restart and Kill9 act
// on the process; the volumes stay in sync until Stop.
type PodProcess struct {
	*Process
	// Plan is how it runs: env, binary, local addresses of its ports.
	Plan *podrun.Plan
	// Dir holds its materialised volumes.
	Dir string

	stopSync context.CancelFunc
	syncDone chan struct{}
}

// RunLikeDeployment reads the live Deployment namespace/deployment and runs
// its first container's command from bin/ with the container's env and
// volumes (ConfigMaps kept in sync while it runs), its listen addresses on
// free loopback ports and a kubeconfig of the Pod's ServiceAccount, logging
// to <name>.log. extraEnv is added, as what the Pod's node would give it
// (e.g. the proxy that resolves Service names here).
func (c *Cluster) RunLikeDeployment(ctx context.Context, name, namespace, deployment string, extraEnv ...string) (*PodProcess, error) {
	dir, err := os.MkdirTemp("", "podrun-"+name+"-")
	if err != nil {
		return nil, err
	}
	plan, err := podrun.Prepare(ctx, c.client, podrun.Spec{
		Namespace: namespace, Deployment: deployment, BinDir: filepath.Join(c.root, "bin"), Dir: dir,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, plan.Namespace, plan.ServiceAccount)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("kubeconfig of ServiceAccount %s/%s: %w", plan.Namespace, plan.ServiceAccount, err)
	}
	proc, err := StartProcess(ProcessSpec{
		Name:    name,
		Path:    plan.Path,
		Args:    plan.Args,
		Env:     append(append(append([]string{}, plan.Env...), "KUBECONFIG="+kubeconfig), extraEnv...),
		OnlyEnv: true,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	syncCtx, cancel := context.WithCancel(context.Background())
	p := &PodProcess{Process: proc, Plan: plan, Dir: dir, stopSync: cancel, syncDone: make(chan struct{})}
	go func() {
		defer close(p.syncDone)
		plan.Keep(syncCtx, c.client, volumeSyncInterval, p.note)
	}()
	return p, nil
}

// StartFunctionController runs the Function controller as the chart's
// Deployment configures it (the module must be installed).
func (c *Cluster) StartFunctionController(ctx context.Context, name string, extraEnv ...string) (*PodProcess, error) {
	p, err := c.RunLikeDeployment(ctx, name, ManagerNamespace, FunctionControllerDeployment, extraEnv...)
	if err != nil {
		return nil, err
	}
	if want := filepath.Join(c.root, "bin", module.FunctionController().Binary); p.Plan.Path != want {
		return nil, errors.Join(fmt.Errorf("the Deployment runs %s, not the Function controller %s", p.Plan.Path, want), p.Stop())
	}
	return p, nil
}

// Stop stops the process (see Process.Stop) and the volume sync, and
// removes the volumes.
func (p *PodProcess) Stop() error {
	err := p.Process.Stop()
	p.stopSync()
	<-p.syncDone
	return errors.Join(err, os.RemoveAll(p.Dir))
}

// note records a volume sync failure in the process's log.
func (p *PodProcess) note(err error) {
	f, ferr := os.OpenFile(p.LogPath(), os.O_WRONLY|os.O_APPEND, 0o644)
	if ferr != nil {
		return
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintf(f, "=== %s volume sync: %v\n", p.spec.Name, err)
}
