// Package localnode runs, on this machine, the Pods of the local cluster
// that have to act for real (its kwok nodes only simulate Pods): a
// Deployment's containers as processes with their Pod's configuration
// (package podrun), its Services reachable by name through a Network, and
// build Pods (package buildrun) whose steps reach those Services. Tests and
// `make run` (hack/localnode) share it.
package localnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
	"github.com/kyma-project/serverless-manager/tests/framework/podrun"
)

// Node is this machine acting as a node for chosen Pods.
type Node struct {
	// Client reads what Pods mount and writes build Pods' status
	// (an admin client: kubelet's rights).
	Client client.Client
	// BinDir holds our binaries (bin/), AssetsDir the tools hack/tools.sh
	// builds (bin/assets), among them the chart's registry software.
	BinDir, AssetsDir string
	// Dir holds the Pods' volumes; LogDir their processes' logs.
	Dir, LogDir string
	// Network resolves Service names for the processes started here.
	Network *Network
	// Report receives what goes wrong while running (a crashed process, an
	// unreadable object); running goes on, as kubelet's does.
	Report func(error)
}

// images says what runs here for the chart's images that are not ours and
// whose containers give no command.
func (n *Node) images() map[string]podrun.Image {
	return map[string]podrun.Image{
		// distribution's image: its entrypoint runs `registry <args>`; the
		// listen addresses in its config file are overridden by env.
		"registry": {
			Entrypoint: []string{filepath.Join(n.AssetsDir, "registry")},
			ListenEnv:  map[int32]string{5000: "REGISTRY_HTTP_ADDR", 5001: "REGISTRY_HTTP_DEBUG_ADDR"},
		},
		// writes the htpasswd file from the mounted credentials.
		"registry-init": {InProcess: writeHtpasswd},
	}
}

// Paths inside the chart's registry Pod that registry-init works on.
const (
	regcredDir  = "/regcred"
	htpasswdDir = "/data"
)

func writeHtpasswd(_ context.Context, p *podrun.Plan) error {
	creds, data := p.Mounts[regcredDir], p.Mounts[htpasswdDir]
	if creds == "" || data == "" {
		return fmt.Errorf("registry-init needs %s and %s mounted", regcredDir, htpasswdDir)
	}
	user, err := os.ReadFile(filepath.Join(creds, "username.txt"))
	if err != nil {
		return err
	}
	password, err := os.ReadFile(filepath.Join(creds, "password.txt"))
	if err != nil {
		return err
	}
	line, err := framework.HtpasswdLine(string(user), string(password))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, "htpasswd"), line, 0o600)
}

// rerouteTicks is how many seconds a running Pod's Services are listed again after.
const rerouteTicks = 10

// restartDelay is how long a crashed or unstartable Pod waits before the
// next try (kubelet's back-off starts at 10 s; shorter here for tests).
const restartDelay = time.Second

// RunDeployment runs the Deployment's Pod here until ctx ends: its init
// containers in order, then every container as a process (see podrun; they
// get no ServiceAccount token, so it is for Pods that do not talk to the API
// server), each Service port routed to the container that serves its target
// port, its ConfigMap and Secret volumes kept in sync. A Deployment that
// does not exist yet is waited for; a changed Pod template starts a new Pod,
// as a rollout would; a crashed container stops the others and the Pod
// starts again (kubelet would restart that container alone).
//
// The containers share volumes by mount path (one directory per path under
// the Pod's directory), which is right for Pods that mount a volume at the
// same path wherever they share it, as the chart's do.
func (n *Node) RunDeployment(ctx context.Context, namespace, name string) {
	for ctx.Err() == nil {
		rolled, err := n.runPod(ctx, namespace, name)
		if err != nil && ctx.Err() == nil {
			n.report(fmt.Errorf("Deployment %s/%s: %w", namespace, name, err))
		}
		if !rolled {
			select {
			case <-ctx.Done():
			case <-time.After(restartDelay):
			}
		}
	}
}

func (n *Node) report(err error) {
	if n.Report != nil {
		n.Report(err)
	}
}

// container is a container of the Pod running as a process.
type container struct {
	name string
	plan *podrun.Plan
	proc *framework.Process
}

// runPod runs one Pod of the Deployment; rolled says its template changed.
func (n *Node) runPod(ctx context.Context, namespace, name string) (rolled bool, err error) {
	d := &appsv1.Deployment{}
	if err := n.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	dir := filepath.Join(n.Dir, namespace+"-"+name)
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	spec := podrun.Spec{Namespace: namespace, Deployment: name, BinDir: n.BinDir, Dir: dir, Images: n.images()}
	for _, init := range d.Spec.Template.Spec.InitContainers {
		spec.Container = init.Name
		if err := n.runToCompletion(ctx, spec); err != nil {
			return false, fmt.Errorf("init container %s: %w", init.Name, err)
		}
	}
	var running []container
	defer func() {
		for _, c := range running {
			for _, addr := range c.plan.Ports {
				n.Network.Forget(addr)
			}
			err = errors.Join(err, c.proc.Stop())
		}
	}()
	// The Pod's ports, whichever container listens on them (one network
	// namespace: no two containers share a port).
	byNumber, byName := map[int32]string{}, map[string]string{}
	for i, ctr := range d.Spec.Template.Spec.Containers {
		spec.Container = ctr.Name
		plan, err := podrun.Prepare(ctx, n.Client, spec)
		if err != nil {
			return false, fmt.Errorf("container %s: %w", ctr.Name, err)
		}
		if plan.InProcess != nil {
			return false, fmt.Errorf("container %s: its image runs only as an init container here", ctr.Name)
		}
		// The first container's log keeps the Deployment's name.
		procName := namespace + "-" + name
		if i > 0 {
			procName += "-" + ctr.Name
		}
		proc, err := framework.StartProcess(framework.ProcessSpec{Name: procName, Path: plan.Path, Args: plan.Args,
			Env: plan.Env, OnlyEnv: true, LogDir: n.LogDir})
		if err != nil {
			return false, fmt.Errorf("container %s: %w", ctr.Name, err)
		}
		running = append(running, container{name: ctr.Name, plan: plan, proc: proc})
		maps.Copy(byNumber, plan.Ports)
		maps.Copy(byName, plan.Addresses)
	}
	syncCtx, stopSync := context.WithCancel(ctx)
	defer stopSync()
	go n.keepVolumes(syncCtx, running)

	routed := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ticks := 0; ; ticks++ {
		// Services are routed once they exist (a chart may apply them later),
		// and looked at again now and then for one that came later still.
		if !routed || ticks%rerouteTicks == 0 {
			routed, err = n.route(ctx, d, byNumber, byName)
			if err != nil {
				n.report(err)
			}
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-tick.C:
		}
		for _, c := range running {
			if exited, exitErr := c.proc.Exited(); exited {
				return false, fmt.Errorf("container %s (%s) exited (%v); its log's end:\n%s", c.name, c.plan.Path, exitErr, c.proc.Tail(20))
			}
		}
		changed, err := running[0].plan.Rolled(ctx, n.Client)
		if err != nil {
			n.report(err) // e.g. the API server restarting: the Pod stays
			continue
		}
		if changed {
			return true, nil
		}
	}
}

// keepVolumes syncs the containers' ConfigMap and Secret volumes every
// second, one container after the other: containers that mount the same
// volume write the same directory, never at the same time.
func (n *Node) keepVolumes(ctx context.Context, running []container) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, c := range running {
			if _, err := c.plan.Sync(ctx, n.Client); err != nil && ctx.Err() == nil {
				n.report(err)
			}
		}
	}
}

// runToCompletion runs an init container.
func (n *Node) runToCompletion(ctx context.Context, spec podrun.Spec) error {
	plan, err := podrun.Prepare(ctx, n.Client, spec)
	if err != nil {
		return err
	}
	if plan.InProcess != nil {
		return plan.InProcess(ctx, plan)
	}
	proc, err := framework.StartProcess(framework.ProcessSpec{Name: spec.Namespace + "-" + spec.Deployment + "-" + spec.Container,
		Path: plan.Path, Args: plan.Args, Env: plan.Env, OnlyEnv: true, LogDir: n.LogDir})
	if err != nil {
		return err
	}
	for {
		if exited, err := proc.Exited(); exited {
			if err != nil {
				return fmt.Errorf("%w; its log's end:\n%s", err, proc.Tail(20))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), proc.Stop())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// route sends the namespace's Services that select the Pod to the
// processes serving their target ports.
func (n *Node) route(ctx context.Context, d *appsv1.Deployment, byNumber map[int32]string, byName map[string]string) (bool, error) {
	var services corev1.ServiceList
	if err := n.Client.List(ctx, &services, client.InNamespace(d.Namespace)); err != nil {
		return false, fmt.Errorf("listing Services in %s: %w", d.Namespace, err)
	}
	routed := false
	for i := range services.Items {
		if n.Network.RouteService(&services.Items[i], d.Spec.Template.Labels, byNumber, byName) {
			routed = true
		}
	}
	return routed, nil
}

// BuildRunner runs the build Pods handed to this machine (buildrun.Label)
// when its Run is called; our steps resolve Service names through the
// Network, the dependency step finds its tools on path.
func (n *Node) BuildRunner(path string) *buildrun.Runner {
	return &buildrun.Runner{Client: n.Client, BinDir: n.BinDir, Dir: filepath.Join(n.Dir, "builds"), PATH: path, StepEnv: n.Network.Env()}
}
