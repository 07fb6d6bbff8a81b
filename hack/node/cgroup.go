package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// cgroupMode is how a host mounts its cgroups.
type cgroupMode string

const (
	// cgroupLegacy: one v1 hierarchy per controller.
	cgroupLegacy cgroupMode = "legacy (cgroup v1)"
	// cgroupHybrid: v1 hierarchies for the controllers, and a v2 one
	// without controllers at unified/ (systemd's hybrid mode).
	cgroupHybrid cgroupMode = "hybrid (cgroup v1 controllers, v2 at unified/)"
	// cgroupUnified: one v2 hierarchy holds every controller.
	cgroupUnified cgroupMode = "unified (cgroup v2)"
)

// cgroupFS is where the host mounts its cgroups: the v1 hierarchies below
// it, or the v2 hierarchy at it.
const cgroupFS = "/sys/fs/cgroup"

// cgroupControllers are the v1 hierarchies kubelet and runc use.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio", "systemd"}

// unifiedControllers are the v2 controllers the node's cgroup gets, those
// of them the kernel has: kubelet's cgroup manager wants cpu, cpuset,
// memory, hugetlb and pids at its cgroup root (it counts one the kernel
// lacks as not needed), runc sets block I/O through io.
var unifiedControllers = []string{"cpu", "cpuset", "memory", "hugetlb", "pids", "io"}

// unifiedRequired are the v2 controllers without which Pods get no limits:
// the node refuses a host that lacks one.
var unifiedRequired = []string{"cpu", "cpuset", "memory", "pids"}

// detectCgroupMode tells the mode from the files at the cgroup mount point
// root: a v2 hierarchy has cgroup.controllers at its top. This is the one
// place that tells the modes apart.
func detectCgroupMode(root string) (cgroupMode, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return cgroupUnified, nil
	}
	if _, err := os.Stat(filepath.Join(root, "cpu")); err != nil {
		return "", fmt.Errorf("no cgroup hierarchy found at %s: %w", root, err)
	}
	if _, err := os.Stat(filepath.Join(root, "unified", "cgroup.controllers")); err == nil {
		return cgroupHybrid, nil
	}
	return cgroupLegacy, nil
}

// checkCgroupHost tells the mode and fails at once on a host the node
// cannot run on. v1 (legacy, hybrid): the hierarchies are checked with the
// other requirements (preflight). v2: the controllers the node needs must
// be there, and the node must be able to give them to a cgroup of its own
// (checkUnified).
func checkCgroupHost(root string) (cgroupMode, error) {
	mode, err := detectCgroupMode(root)
	if err != nil {
		return "", err
	}
	if mode == cgroupUnified {
		if err := checkUnified(root); err != nil {
			return mode, fmt.Errorf("cgroup mode %s: %w", mode, err)
		}
	}
	return mode, nil
}

// checkUnified checks a v2 hierarchy's top: it has the required
// controllers, is writable, and either gives its children the controllers
// already or can: a cgroup that is not the root (a container's cgroup
// namespace) and holds processes cannot (cgroup v2's rule: a cgroup gives
// controllers to its children only while it holds no processes itself).
func checkUnified(root string) error {
	available, err := readControllers(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var missing []string
	for _, c := range unifiedRequired {
		if !slices.Contains(available, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the controllers %s are not available at %s (cgroup.controllers: %q): kubelet limits the Pods' CPU, memory and processes with them; "+
			"the kernel lacks them or a v1 hierarchy holds them", strings.Join(missing, ", "), root, strings.Join(available, " "))
	}
	subtree := filepath.Join(root, "cgroup.subtree_control")
	if err := syscall.Access(subtree, 2 /* W_OK */); err != nil {
		return fmt.Errorf("%s is not writable (%w): the node creates its cgroup there and gives it its controllers; a container needs a writable cgroup mount", subtree, err)
	}
	enabled, err := readControllers(subtree)
	if err != nil {
		return err
	}
	if len(controllersToEnable(available, enabled)) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.type")); err != nil {
		return nil // the root cgroup: processes in it do not keep it from delegating
	}
	procs, err := os.ReadFile(filepath.Join(root, "cgroup.procs"))
	if err != nil {
		return err
	}
	if n := len(strings.Fields(string(procs))); n > 0 {
		return fmt.Errorf("%s is not the host's root cgroup (a container's cgroup namespace) and holds %d processes: cgroup v2 lets a cgroup with processes give no controllers to its children, "+
			"so the node's cgroup would have none; run the node in the host's cgroup namespace, or move this cgroup's processes into a child cgroup first", root, n)
	}
	return nil
}

// controllersToEnable are the unifiedControllers the kernel has that the
// top does not give its children yet.
func controllersToEnable(available, enabled []string) []string {
	var want []string
	for _, c := range unifiedControllers {
		if slices.Contains(available, c) && !slices.Contains(enabled, c) {
			want = append(want, c)
		}
	}
	return want
}

// readControllers reads a cgroup.controllers or cgroup.subtree_control file.
func readControllers(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

// nodeCgroups are the node's cgroup in every hierarchy: one per v1
// controller, or the one v2 cgroup.
func nodeCgroups(root string, mode cgroupMode) []string {
	if mode == cgroupUnified {
		return []string{filepath.Join(root, cgroupRoot)}
	}
	dirs := make([]string, 0, len(cgroupControllers))
	for _, c := range cgroupControllers {
		dirs = append(dirs, filepath.Join(root, c, cgroupRoot))
	}
	return dirs
}

// makeCgroupRoot creates our cgroup in every hierarchy; kubelet refuses a
// cgroup root that does not exist. v1: a new cpuset is empty: it gets the
// machine's CPUs and memory nodes, or no process could join it. v2: the
// top gives its children the controllers the node needs (delegateUnified),
// and our cgroup gives them on to kubelet's.
func makeCgroupRoot(root string, mode cgroupMode, record string) error {
	if mode == cgroupUnified {
		return delegateUnified(root, record)
	}
	for _, c := range cgroupControllers {
		dir := filepath.Join(root, c, cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if c != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(root, c, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// delegateUnified records the controllers the v2 top does not give its
// children yet (once: a record a killed run left holds what the machine
// had), enables those the node needs, creates our cgroup and enables them
// in it for kubelet's cgroups below. A host without systemd enables none at
// its root; systemd enables cpu, io, memory and pids. runc enables every
// controller the kernel has along a container's cgroup path, the top's
// included: the record holds all the top lacked, not only ours.
func delegateUnified(root, record string) error {
	available, err := readControllers(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return err
	}
	top := filepath.Join(root, "cgroup.subtree_control")
	enabled, err := readControllers(top)
	if err != nil {
		return err
	}
	if _, err := os.Stat(record); errors.Is(err, os.ErrNotExist) {
		var lacked []string
		for _, c := range available {
			if !slices.Contains(enabled, c) {
				lacked = append(lacked, c)
			}
		}
		if err := writeJSON(record, lacked); err != nil {
			return err
		}
	}
	if err := writeControllers(top, "+", controllersToEnable(available, enabled)); err != nil {
		return err
	}
	dir := filepath.Join(root, cgroupRoot)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ours, err := readControllers(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var give []string
	for _, c := range unifiedControllers {
		if slices.Contains(ours, c) {
			give = append(give, c)
		}
	}
	return writeControllers(filepath.Join(dir, "cgroup.subtree_control"), "+", give)
}

// undelegateUnified disables at the v2 top the controllers it did not give
// before the node (its record) and gives now. One a cgroup of another
// program's uses by now stays: the kernel refuses to take it (EBUSY), and
// it is that program's now. The record goes once it is done.
func undelegateUnified(root, record string) (kept []string, err error) {
	var lacked []string
	if err := readJSON(record, &lacked); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	top := filepath.Join(root, "cgroup.subtree_control")
	enabled, err := readControllers(top)
	if err != nil {
		return nil, err
	}
	// the reverse order: a controller another depends on goes last
	for _, c := range slices.Backward(lacked) {
		if !slices.Contains(enabled, c) {
			continue
		}
		if err := writeControllers(top, "-", []string{c}); errors.Is(err, syscall.EBUSY) {
			kept = append(kept, c)
		} else if err != nil {
			return kept, err
		}
	}
	return kept, os.Remove(record)
}

// writeControllers enables (+) or disables (-) controllers in a
// cgroup.subtree_control, one write each: an error names the one refused.
func writeControllers(path, sign string, controllers []string) error {
	for _, c := range controllers {
		if err := os.WriteFile(path, []byte(sign+c), 0o644); err != nil {
			return fmt.Errorf("writing %s%s to %s: %w", sign, c, path, err)
		}
	}
	return nil
}

// killCgroupTree kills every process in our cgroup: the Pods' containers.
// A process's cgroup line is "N:controllers:/path" in v1 and "0::/path" in
// v2: both contain ":/serverless-local/".
func killCgroupTree() error {
	pids, err := process.Find(func(pid int) bool {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		return err == nil && bytes.Contains(data, []byte(":/"+cgroupRoot+"/"))
	})
	if err != nil {
		return err
	}
	return process.KillAndWait(pids)
}

// removeCgroupRoot removes our cgroup and everything below it, deepest
// first (a cgroup goes only once it has no children and no processes). A
// cgroup whose killed processes are still being reaped is busy for a moment:
// it is tried again for a while.
func removeCgroupRoot(root string, mode cgroupMode) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := removeCgroups(nodeCgroups(root, mode))
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroups(roots []string) error {
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
