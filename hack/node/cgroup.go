package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// errCgroupV2 is what a user on a unified host reads (README's "What They
// Need" says the same).
var errCgroupV2 = errors.New("the local cluster's real node needs cgroup v1 (legacy or hybrid mode); this host mounts cgroup v2 only (unified mode). " +
	"Boot it with systemd.unified_cgroup_hierarchy=0, or use a machine with cgroup v1")

// requireCgroupV1 fails at once on a host the node cannot run on: kubelet
// and runc are set up for v1 hierarchies (cgroupControllers, the cgroupfs
// driver).
func requireCgroupV1(root string) (cgroupMode, error) {
	mode, err := detectCgroupMode(root)
	if err != nil {
		return "", err
	}
	if mode == cgroupUnified {
		return mode, fmt.Errorf("cgroup mode %s: %w", mode, errCgroupV2)
	}
	return mode, nil
}
