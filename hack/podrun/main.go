// Command podrun runs a container of a Deployment on this machine with the
// configuration its Pod would get (see tests/framework/podrun): the local
// cluster only simulates Pods, so `make run` starts the Function controller
// this way. It stays in the foreground, keeps the ConfigMap volumes in sync,
// restarts the process from the new configuration when the Deployment's Pod
// template changes (as a rollout replaces the Pod, e.g. for a new log
// format), passes SIGINT/SIGTERM on and exits with the process's exit code.
//
//	go run ./hack/podrun [-namespace kyma-system] [-deployment serverless-ctrl-mngr]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/podrun"
)

func main() {
	if err := run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "podrun:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	namespace := flag.String("namespace", module.DefaultNamespace, "namespace of the Deployment")
	deployment := flag.String("deployment", framework.FunctionControllerDeployment, "the Deployment whose container to run")
	container := flag.String("container", "", "the container (default: the first)")
	dir := flag.String("dir", "", "where the volumes go (default: .cluster/podrun/<deployment>)")
	var extraEnv envFlags
	flag.Var(&extraEnv, "env", "NAME=value added to the container's environment, as the node would (repeatable; e.g. the HTTP_PROXY of hack/localnode)")
	flag.Parse()
	if *dir == "" {
		*dir = filepath.Join(root, ".cluster", "podrun", *deployment)
	}
	c, err := framework.AdminClient(root)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for {
		rolled, err := runPod(ctx, c, root, podrun.Spec{
			Namespace: *namespace, Deployment: *deployment, Container: *container, BinDir: filepath.Join(root, "bin"), Dir: *dir,
		}, extraEnv)
		if !rolled {
			return err
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "podrun: stopping the previous process:", err)
		}
		fmt.Fprintf(os.Stderr, "podrun: the Pod template of %s changed: starting again as its new Pod\n", *deployment)
	}
}

// rolloutCheck is how often the Deployment's Pod template is compared.
const rolloutCheck = time.Second

// runPod runs the container as one Pod of the Deployment would, until the
// process exits, ctx ends or the Pod template changes (rolled is true: the
// process was stopped and a new Pod is due).
func runPod(ctx context.Context, c client.Client, root string, spec podrun.Spec, extraEnv []string) (rolled bool, err error) {
	if err := os.RemoveAll(spec.Dir); err != nil {
		return false, err
	}
	plan, err := podrun.Prepare(ctx, c, spec)
	if err != nil {
		return false, err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster.sh"), "kubeconfig-sa", plan.Namespace, plan.ServiceAccount).Output()
	if err != nil {
		return false, fmt.Errorf("kubeconfig of ServiceAccount %s/%s: %w", plan.Namespace, plan.ServiceAccount, err)
	}
	for name, addr := range plan.Addresses {
		fmt.Fprintf(os.Stderr, "podrun: port %s of %s listens on %s\n", name, spec.Deployment, addr)
	}
	fmt.Fprintf(os.Stderr, "podrun: %s as ServiceAccount %s/%s, volumes under %s\n", plan.Path, plan.Namespace, plan.ServiceAccount, spec.Dir)

	// A Pod gets only its container's environment.
	cmd := exec.Command(plan.Path, plan.Args...)
	cmd.Env = append(append(append([]string{}, plan.Env...), "KUBECONFIG="+strings.TrimSpace(string(out))), extraEnv...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	syncCtx, stopSync := context.WithCancel(context.Background())
	defer stopSync()
	go plan.Keep(syncCtx, c, time.Second, func(err error) { fmt.Fprintln(os.Stderr, "podrun: volume sync:", err) })

	tick := time.NewTicker(rolloutCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return false, err
		case <-ctx.Done():
			return false, terminate(cmd, done)
		case <-tick.C:
			changed, err := plan.Rolled(ctx, c)
			if err != nil {
				// e.g. the API server restarting: the Pod would stay.
				fmt.Fprintln(os.Stderr, "podrun: rollout check:", err)
				continue
			}
			if changed {
				return true, terminate(cmd, done)
			}
		}
	}
}

// terminate stops the process as kubelet stops a Pod: SIGTERM, then SIGKILL
// after the grace period.
func terminate(cmd *exec.Cmd, done <-chan error) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return ignoreSignalled(err)
	case <-time.After(10 * time.Second): // the Pod's terminationGracePeriodSeconds
		_ = cmd.Process.Kill()
		return <-done
	}
}

// ignoreSignalled treats an exit caused by our own SIGTERM as success.
func ignoreSignalled(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return err
}

// envFlags collects repeated -env NAME=value flags.
type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, ",") }

func (e *envFlags) Set(v string) error {
	if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
		return fmt.Errorf("%q: want NAME=value", v)
	}
	*e = append(*e, v)
	return nil
}
