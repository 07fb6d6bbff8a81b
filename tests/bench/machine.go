package main

// Where this machine's CPU went during a measurement: the cluster's
// processes (their PID files under .cluster/pids), the containerd shims,
// processes of ours (e.g. the Function controller's container) and
// everything else, from /proc. On 2
// cores shared with the control plane and the real node, a time figure
// means little without it: other work on the machine (a compiler, another
// test) shows as "outside the cluster".

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// cpuSnapshot is the machine's and some processes' CPU time so far.
type cpuSnapshot struct {
	at        time.Time
	busy, all time.Duration // the whole machine, all cores
	// processes: name → PID → its CPU time (processCPU).
	processes  map[string]map[int]time.Duration
	unreadable []string
}

// Names of process groups in a snapshot besides the cluster's PID files.
const (
	cpuShims      = "containerd shims" // one per Pod, found by their command
	cpuController = "function-controller"
)

// snapshotCPU reads /proc/stat and the CPU time of the cluster's processes,
// the containerd shims and extra (name → PIDs).
func (b *bench) snapshotCPU(extra map[string][]int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), processes: map[string]map[int]time.Duration{}}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			d := time.Duration(n) * time.Second / userHZ
			s.all += d
			// user nice system idle iowait irq softirq steal …
			if i != 3 && i != 4 && i < 8 {
				s.busy += d
			}
		}
	}
	pids := map[string][]int{cpuShims: processesNamed("containerd-shim-runc-v2")}
	files, _ := filepath.Glob(filepath.Join(b.cluster.Root(), ".cluster", "pids", "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = []int{pid}
		}
	}
	for name, ps := range extra {
		pids[name] = ps
	}
	for name, ps := range pids {
		s.processes[name] = map[int]time.Duration{}
		for _, pid := range ps {
			d, err := processCPU(pid)
			if err != nil {
				s.unreadable = append(s.unreadable, fmt.Sprintf("%s (%d)", name, pid))
				continue
			}
			s.processes[name][pid] = d
		}
	}
	return s
}

// processesNamed are the processes whose command's file name is name.
func processesNamed(name string) []int {
	var out []int
	for _, pid := range allPIDs() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); filepath.Base(argv0) == name {
			out = append(out, pid)
		}
	}
	return out
}

// allPIDs are this machine's processes.
func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// processCPU is a process's user and system time: its threads' and that of
// the children it reaped (e.g. containerd's CNI plugins, a shim's runc,
// kube-proxy's iptables-restore).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	d, err := parseStat(string(data))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// parseStat sums utime, stime, cutime and cstime of a /proc/<pid>/stat line.
func parseStat(stat string) (time.Duration, error) {
	// The command may hold spaces and parentheses: the fields start after
	// its last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("%d fields after the command", len(f))
	}
	var ticks int64
	for _, v := range f[11:15] { // fields 14–17: utime stime cutime cstime
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuSpent is what happened between two snapshots.
type cpuSpent struct {
	wall, busy, all time.Duration
	processes       map[string]time.Duration
}

func (after cpuSnapshot) since(before cpuSnapshot) cpuSpent {
	s := cpuSpent{wall: after.at.Sub(before.at), busy: after.busy - before.busy, all: after.all - before.all,
		processes: map[string]time.Duration{}}
	// A process the first snapshot did not list started since (a new
	// Pod's shim and runtime): all its time counts.
	for name, pids := range after.processes {
		for pid, d := range pids {
			s.processes[name] += d - before.processes[name][pid]
		}
	}
	return s
}

// String: cores busy on average, then each process's share, largest
// first, and what no process listed used ("outside", the bench itself
// included).
func (s cpuSpent) String() string {
	if s.wall <= 0 || s.all <= 0 {
		return "unknown"
	}
	cores := float64(s.all) / float64(s.wall)
	names := make([]string, 0, len(s.processes))
	var listed time.Duration
	for n, d := range s.processes {
		names = append(names, n)
		listed += d
	}
	sort.Slice(names, func(i, j int) bool { return s.processes[names[i]] > s.processes[names[j]] })
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		if d := s.processes[n]; d >= 50*time.Millisecond {
			parts = append(parts, fmt.Sprintf("%s %.1fs", n, d.Seconds()))
		}
	}
	parts = append(parts, fmt.Sprintf("everything else (the bench, Pods' other containers, work outside the cluster) %.1fs", max(0, s.busy-listed).Seconds()))
	return fmt.Sprintf("%.2f of %.0f cores busy on average over %.1fs (%.1f CPU-s): %s",
		float64(s.busy)/float64(s.wall), cores, s.wall.Seconds(), s.busy.Seconds(), strings.Join(parts, ", "))
}
