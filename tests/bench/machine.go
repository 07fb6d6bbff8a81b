package main

// Where this machine's CPU went during a measurement: the cluster's
// processes (their PID files under .cluster/pids), a process of ours (the
// Function controller's container) and everything else, from /proc. On 2
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
	at         time.Time
	busy, all  time.Duration // the whole machine, all cores
	processes  map[string]time.Duration
	unreadable []string
}

// snapshotCPU reads /proc/stat and the CPU time of the cluster's processes
// and of extra (name → pid).
func (b *bench) snapshotCPU(extra map[string]int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), processes: map[string]time.Duration{}}
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
	pids := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(b.cluster.Root(), ".cluster", "pids", "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	for name, pid := range extra {
		pids[name] = pid
	}
	for name, pid := range pids {
		d, err := processCPU(pid)
		if err != nil {
			s.unreadable = append(s.unreadable, name)
			continue
		}
		s.processes[name] = d
	}
	return s
}

// processCPU is a process's user and system time (its threads'; not its
// children's).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may hold spaces: the fields start after its ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, data)
	}
	f := strings.Fields(string(data)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// cpuSpent is what happened between two snapshots.
type cpuSpent struct {
	wall, busy, all time.Duration
	processes       map[string]time.Duration
}

func (after cpuSnapshot) since(before cpuSnapshot) cpuSpent {
	s := cpuSpent{wall: after.at.Sub(before.at), busy: after.busy - before.busy, all: after.all - before.all,
		processes: map[string]time.Duration{}}
	for name, d := range after.processes {
		if b, ok := before.processes[name]; ok {
			s.processes[name] = d - b
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
