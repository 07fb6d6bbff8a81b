package main

// Helpers for what runs as real Pods on the local cluster's real node: the
// Function controller's Pod (found by its Deployment's labels, restarted by
// deleting it), its container's process on this machine (memory and CPU
// from /proc and its cgroup), the precise start and end of a finished
// container (containerd's own record), and Pod logs from a moment on.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// controllerLabels select the Function controller's Pods (the chart's
// Deployment serverless-ctrl-mngr).
var controllerLabels = map[string]string{"app.kubernetes.io/name": "serverless", "app": "serverless"}

// controllerContainer is the controller's container in its Pod.
const controllerContainer = "manager"

// controllerPod waits for the one Ready Pod of the Function controller
// (not terminating, alone: a rollout is over) for which ok holds, e.g. a
// Pod other than the one before a restart.
func (b *bench) controllerPod(ctx context.Context, what string, ok func(*corev1.Pod) (bool, string)) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := framework.Poll(ctx, 3*time.Minute, "one Ready Pod of the Function controller "+what, func(ctx context.Context) (bool, string, error) {
		p, err := b.cluster.ReadyPod(ctx, framework.ManagerNamespace, controllerLabels)
		if err != nil {
			return false, err.Error(), nil
		}
		if ok != nil {
			if good, why := ok(p); !good {
				return false, p.Name + ": " + why, nil
			}
		}
		pod = p
		return true, "", nil
	}, framework.DumpPods(b.c, framework.ManagerNamespace), framework.DumpEvents(b.c, framework.ManagerNamespace),
		b.cluster.DumpPodLogs(framework.ManagerNamespace, controllerLabels, 20))
	return pod, err
}

// otherThan accepts a Pod other than old (nil: any).
func otherThan(old *corev1.Pod) func(*corev1.Pod) (bool, string) {
	return func(p *corev1.Pod) (bool, string) {
		if old != nil && p.UID == old.UID {
			return false, "still the Pod from before"
		}
		return true, ""
	}
}

// restartController deletes the controller's Pod (SIGTERM, the chart's 10 s
// grace) and waits for the Pod its ReplicaSet starts instead to be Ready:
// the same configuration in a new process.
func (b *bench) restartController(ctx context.Context, old *corev1.Pod) (*corev1.Pod, error) {
	if err := b.c.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the controller's Pod %s: %w", old.Name, err)
	}
	return b.controllerPod(ctx, "after the restart", otherThan(old))
}

// controllerAlive fails when the controller's Pod went away or its
// container restarted since it was found: the run would then measure two
// processes.
func (b *bench) controllerAlive(ctx context.Context, pod *corev1.Pod) error {
	cur := &corev1.Pod{}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the controller's Pod %s is gone", pod.Name)
		}
		return err
	}
	if cur.UID != pod.UID || cur.DeletionTimestamp != nil {
		return fmt.Errorf("the controller's Pod %s was replaced or is terminating", pod.Name)
	}
	for _, s := range cur.Status.ContainerStatuses {
		if s.RestartCount > restarts(pod, s.Name) {
			return fmt.Errorf("the controller's container restarted (%d restarts; last: %+v)", s.RestartCount, s.LastTerminationState.Terminated)
		}
	}
	return nil
}

func restarts(p *corev1.Pod, container string) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.RestartCount
		}
	}
	return 0
}

// controllerLog is the log of the controller's container in pod.
func (b *bench) controllerLog(pod *corev1.Pod) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		log, err := b.cluster.PodLog(ctx, pod.Namespace, pod.Name, controllerContainer)
		if err != nil {
			return err.Error()
		}
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		return fmt.Sprintf("--- last 30 lines of the controller's Pod %s\n%s", pod.Name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}

// portURL is http://<Pod IP>:<the container port named name><path>: this
// machine reaches the real node's Pods on its bridge.
func portURL(pod *corev1.Pod, name, path string) (string, error) {
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("Pod %s has no IP", pod.Name)
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return fmt.Sprintf("http://%s:%d%s", pod.Status.PodIP, p.ContainerPort, path), nil
			}
		}
	}
	return "", fmt.Errorf("Pod %s has no port %s", pod.Name, name)
}

// controllerMetrics is the controller Pod's metrics endpoint.
func controllerMetrics(pod *corev1.Pod) (string, error) {
	return portURL(pod, "http-metrics", "/metrics")
}

// containerID is the runtime's ID of a container of the Pod ("" before it
// started).
func containerID(pod *corev1.Pod, container string) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if s.Name == container {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return id
		}
	}
	return ""
}

// containerProcess finds, on this machine, the process of a container of
// a Pod on the real node whose command line starts with cmd.
func containerProcess(pod *corev1.Pod, container, cmd string) (int, error) {
	all, err := containerProcesses(pod, container)
	if err != nil {
		return 0, err
	}
	var found []int
	for _, pid := range all {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 == cmd {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return 0, fmt.Errorf("no process %s in the cgroup of container %s of Pod %s on this machine (%d others)", cmd, container, pod.Name, len(all))
	default:
		return 0, fmt.Errorf("%d processes %s in container %s of Pod %s: %v", len(found), cmd, container, pod.Name, found)
	}
}

// containerProcesses are, on this machine, the processes of a container of
// a Pod on the real node: those whose cgroup names the Pod's UID and the
// container's ID.
func containerProcesses(pod *corev1.Pod, container string) ([]int, error) {
	id := containerID(pod, container)
	if id == "" {
		return nil, fmt.Errorf("container %s of Pod %s has not started", container, pod.Name)
	}
	// The cgroupfs driver spells the UID as is, the systemd driver with
	// underscores.
	uids := []string{string(pod.UID), strings.ReplaceAll(string(pod.UID), "-", "_")}
	var found []int
	for _, pid := range allPIDs() {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(cg), id) && (strings.Contains(string(cg), uids[0]) || strings.Contains(string(cg), uids[1])) {
			found = append(found, pid)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no process in the cgroup of container %s (%.12s) of Pod %s on this machine", container, id, pod.Name)
	}
	return found, nil
}

// controllerProcess is the process of the controller's container.
func controllerProcess(pod *corev1.Pod) (int, error) {
	return containerProcess(pod, controllerContainer, "/"+module.FunctionController().Binary)
}

// cpuUsage is what a process's cgroup (its container's) says of its CPU:
// the time used and the time the CFS quota (the container's CPU limit)
// held it back.
type cpuUsage struct {
	used, throttled        time.Duration
	periods, throttledRuns int64
}

func (u cpuUsage) sub(before cpuUsage) cpuUsage {
	return cpuUsage{used: u.used - before.used, throttled: u.throttled - before.throttled,
		periods: u.periods - before.periods, throttledRuns: u.throttledRuns - before.throttledRuns}
}

// cgroupCPU reads the cpu and cpuacct controllers (cgroup v1) of pid's
// cgroup.
func cgroupCPU(pid int) (cpuUsage, error) {
	var u cpuUsage
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return u, err
	}
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			paths[ctrl] = parts[2]
		}
	}
	cpuDir, acctDir := paths["cpu"], paths["cpuacct"]
	if cpuDir == "" || acctDir == "" {
		return u, fmt.Errorf("no cgroup v1 cpu/cpuacct controller for process %d", pid)
	}
	// The cpu and cpuacct hierarchies may be mounted together.
	mount := func(ctrl string) string {
		for _, dir := range []string{ctrl, "cpu,cpuacct", "cpuacct,cpu"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", dir)); err == nil {
				return filepath.Join("/sys/fs/cgroup", dir)
			}
		}
		return filepath.Join("/sys/fs/cgroup", ctrl)
	}
	usage, err := os.ReadFile(filepath.Join(mount("cpuacct"), acctDir, "cpuacct.usage"))
	if err != nil {
		return u, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	if err != nil {
		return u, err
	}
	u.used = time.Duration(ns)
	stat, err := os.ReadFile(filepath.Join(mount("cpu"), cpuDir, "cpu.stat"))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_periods":
			u.periods = v
		case "nr_throttled":
			u.throttledRuns = v
		case "throttled_time":
			u.throttled = time.Duration(v)
		}
	}
	return u, nil
}

// limits names a container's CPU and memory limits, as its Pod spec has them.
func limits(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != container {
			continue
		}
		cpu, mem := "none", "none"
		if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			cpu = q.String()
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			mem = q.String()
		}
		return fmt.Sprintf("CPU %s, memory %s", cpu, mem)
	}
	return "unknown"
}

// containerRun is when a finished container ran.
type containerRun struct {
	start, end time.Time
	// precise: from containerd's record (nanoseconds); otherwise from the
	// Pod's status, which kubelet writes in whole seconds.
	precise bool
}

func (r containerRun) duration() time.Duration { return r.end.Sub(r.start) }

// criStatus is what containerd's CRI plugin keeps of a container
// (io.containerd.grpc.v1.cri/containers/<id>/status): the times kubelet
// reports, in nanoseconds.
type criStatus struct {
	StartedAt, FinishedAt int64
}

// containerdRoot is the real node's containerd root directory (its
// configuration's root).
func (b *bench) containerdRoot() string {
	root := filepath.Join(b.cluster.Root(), ".cluster", "node", "containerd", "root")
	f, err := os.Open(filepath.Join(b.cluster.Root(), ".cluster", "node", "containerd.toml"))
	if err != nil {
		return root
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "root" {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return root
}

// containerRuns says when each finished container (init containers
// included) of a Pod on the real node started and ended: containerd's
// record of it where it has one, else the Pod's status.
func (b *bench) containerRuns(pod *corev1.Pod) map[string]containerRun {
	out := map[string]containerRun{}
	root := b.containerdRoot()
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		term := s.State.Terminated
		if term == nil {
			continue
		}
		run := containerRun{start: term.StartedAt.Time, end: term.FinishedAt.Time}
		if _, id, ok := strings.Cut(s.ContainerID, "://"); ok {
			var st criStatus
			if data, err := os.ReadFile(filepath.Join(root, "io.containerd.grpc.v1.cri", "containers", id, "status")); err == nil &&
				json.Unmarshal(data, &st) == nil && st.StartedAt > 0 && st.FinishedAt >= st.StartedAt {
				run = containerRun{start: time.Unix(0, st.StartedAt), end: time.Unix(0, st.FinishedAt), precise: true}
			}
		}
		out[s.Name] = run
	}
	return out
}

// logLine is a line of a container's log and when the runtime took it.
type logLine struct {
	at   time.Time
	text string
}

// logLines is a container's log, each line with kubelet's timestamp
// (nanoseconds), from since on.
func (b *bench) logLines(ctx context.Context, ns, pod, container string, since time.Time) ([]logLine, error) {
	cs, err := b.cluster.Clientset()
	if err != nil {
		return nil, err
	}
	data, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of %s/%s %s: %w", ns, pod, container, err)
	}
	var out []logLine
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		ts, text, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(since) {
			continue
		}
		out = append(out, logLine{at: at, text: text})
	}
	return out, nil
}

// podOf reads a Pod again.
func (b *bench) podOf(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, b.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)
}
