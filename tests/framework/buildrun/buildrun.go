// Package buildrun does for build Pods what kubelet would: on the local
// cluster Pods are simulated, so a build Pod labelled for it (kwok leaves
// it Running, hack/cluster/stages.yaml) has its containers run here as
// processes, in order, with the configuration the Pod gives them (package
// podrun: command, env, ConfigMap, Secret and emptyDir volumes), and its
// status written back as kubelet writes it: each container's exit code and
// termination message, the phase. Our steps run from bin/; the dependency
// step, which runs in the runtime image in a cluster, runs with this
// machine's /bin/sh and its node/npm (or python/pip) on PATH.
package buildrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/tests/framework/podrun"
)

// Label on a Function (copied to its build Pods) that hands its builds to
// a Runner instead of kwok's simulation.
const (
	Label = "local.serverless.kyma-project.io/build"
	Value = "process"
)

// kubelet's limits for a termination message read from the log.
const (
	logMessageLines = 80
	logMessageBytes = 2048
)

// Runner runs the build Pods labelled Label=Value.
type Runner struct {
	// Client reads the Pods and what their volumes hold, and writes their
	// status (an admin client: kubelet's rights).
	Client client.Client
	// BinDir holds function-controller.
	BinDir string
	// Dir is where each Pod gets a directory for its volumes and logs.
	Dir string
	// PATH is the dependency step's PATH (its node/npm or python/pip).
	PATH string
	// StepEnv is added to the environment of our steps (not the
	// dependency step's), e.g. the proxy that resolves Service names.
	StepEnv []string

	mu      sync.Mutex
	started map[types.UID]bool
	results map[string]Result // by Pod name
}

// Result is what one build Pod did.
type Result struct {
	Pod   string
	Steps []Step
	Phase corev1.PodPhase
}

// Step is one container's run.
type Step struct {
	Name     string
	ExitCode int
	Message  string // its termination message
	Output   string // stdout and stderr
	Duration time.Duration
}

// Step returns the run of the named container.
func (r Result) Step(name string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// Run runs every labelled Running build Pod once, polling until ctx ends.
func (r *Runner) Run(ctx context.Context, report func(error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.MatchingLabels{Label: Value}); err != nil && ctx.Err() == nil {
			report(fmt.Errorf("listing build Pods: %w", err))
		}
		for i := range pods.Items {
			pod := pods.Items[i]
			if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil || !r.claim(pod.UID) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.RunPod(ctx, &pod); err != nil && ctx.Err() == nil {
					report(err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *Runner) claim(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[types.UID]bool{}
	}
	if r.started[uid] {
		return false
	}
	r.started[uid] = true
	return true
}

// Results are the Pods run so far, by Pod name.
func (r *Runner) Results() map[string]Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Result, len(r.results))
	for k, v := range r.results {
		out[k] = v
	}
	return out
}

// RunPod runs the Pod's init containers, then its containers, stopping at
// the first failure, and writes the Pod's status.
func (r *Runner) RunPod(ctx context.Context, pod *corev1.Pod) (Result, error) {
	dir := filepath.Join(r.Dir, pod.Namespace+"-"+pod.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	res := Result{Pod: pod.Name, Phase: corev1.PodSucceeded}
	var initStatuses, statuses []corev1.ContainerStatus
	failed := false
	for i, ctr := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		isInit := i < len(pod.Spec.InitContainers)
		status := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image}
		if failed {
			status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		} else {
			step, err := r.runContainer(ctx, pod, ctr, dir)
			if err != nil {
				return res, fmt.Errorf("Pod %s/%s container %s: %w", pod.Namespace, pod.Name, ctr.Name, err)
			}
			res.Steps = append(res.Steps, step)
			reason := "Completed"
			if step.ExitCode != 0 {
				reason, failed, res.Phase = "Error", true, corev1.PodFailed
			}
			now := metav1.Now()
			status.State.Terminated = &corev1.ContainerStateTerminated{
				ExitCode: int32(step.ExitCode), Reason: reason, Message: step.Message,
				StartedAt: metav1.NewTime(now.Add(-step.Duration)), FinishedAt: now,
			}
		}
		if isInit {
			initStatuses = append(initStatuses, status)
		} else {
			statuses = append(statuses, status)
		}
	}
	r.mu.Lock()
	if r.results == nil {
		r.results = map[string]Result{}
	}
	r.results[pod.Name] = res
	r.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &corev1.Pod{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
			return err
		}
		live.Status.Phase = res.Phase
		live.Status.InitContainerStatuses = initStatuses
		live.Status.ContainerStatuses = statuses
		for i := range live.Status.Conditions {
			if c := &live.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status = corev1.ConditionFalse
			}
		}
		return r.Client.Status().Update(ctx, live)
	})
	if err != nil {
		return res, fmt.Errorf("writing the status of Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return res, nil
}

// runContainer runs one container as a process; a non-zero exit is a
// result, not an error.
func (r *Runner) runContainer(ctx context.Context, pod *corev1.Pod, ctr corev1.Container, dir string) (Step, error) {
	plan, err := podrun.PreparePod(ctx, r.Client, pod, podrun.Spec{Container: ctr.Name, BinDir: r.BinDir, Dir: dir})
	if err != nil {
		return Step{}, err
	}
	path := plan.Path
	if len(ctr.Command) > 0 && ctr.Command[0] == "/bin/sh" {
		path = "/bin/sh" // the runtime image's shell is this machine's
	}
	termLog := filepath.Join(dir, "termination-"+ctr.Name)
	_ = os.Remove(termLog)
	cmd := exec.CommandContext(ctx, path, plan.Args...)
	cmd.Env = append(append([]string{}, plan.Env...), "PATH="+r.PATH, build.EnvTerminationLog+"="+termLog)
	if path != "/bin/sh" {
		cmd.Env = append(cmd.Env, r.StepEnv...)
	}
	if ctr.WorkingDir != "" {
		cmd.Dir = filepath.Join(dir, strings.TrimPrefix(ctr.WorkingDir, "/"))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	step := Step{Name: ctr.Name, Output: out.String(), Duration: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		step.ExitCode = exit.ExitCode()
	case runErr != nil:
		return step, runErr
	}
	if msg, err := os.ReadFile(termLog); err == nil {
		step.Message = string(msg)
	}
	if step.Message == "" && step.ExitCode != 0 && ctr.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		step.Message = tail(step.Output, logMessageLines, logMessageBytes)
	}
	if err := os.WriteFile(filepath.Join(dir, ctr.Name+".log"), out.Bytes(), 0o644); err != nil {
		return step, err
	}
	return step, nil
}

// tail is the last lines of s within max bytes, as kubelet cuts a log.
func tail(s string, lines, maxBytes int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	out := strings.Join(parts, "\n")
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return out
}
