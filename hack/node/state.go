package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// machineState is what the node changes on this machine, one fact a line,
// for a before/after comparison (`node state`; .ci/run compares around
// make test): mount points, network links, routes and namespaces, the rule
// sets and nftables tables, the sysctls it touches, its cgroups and paths,
// and processes of a node (containerd and its shims, any process whose
// command line names a cluster's state directory).
func machineState() ([]string, error) {
	var lines []string
	add := func(section string, items ...string) {
		for _, it := range items {
			if it = strings.TrimSpace(it); it != "" {
				lines = append(lines, section+": "+it)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			add("mount", unescapeMountPath(f[4]))
		}
	}
	commands := []struct {
		section string
		args    []string
	}{
		{"link", []string{"ip", "-o", "link", "show"}},
		{"route", []string{"ip", "route", "show", "table", "all"}},
		{"netns", []string{"ip", "netns", "list"}},
		{"iptables", []string{"iptables-save"}},
		{"ip6tables", []string{"ip6tables-save"}},
		{"nft", []string{"nft", "list", "tables"}},
	}
	for _, c := range commands {
		out, err := output(c.args[0], c.args[1:]...)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(out), "\n") {
			switch c.section {
			case "link":
				// "3: name: <FLAGS> ... state UP ...": the name only
				if f := strings.SplitN(l, ": ", 3); len(f) > 1 {
					l = strings.SplitN(f[1], "@", 2)[0]
				}
			case "iptables", "ip6tables":
				if strings.HasPrefix(l, "#") {
					continue
				}
				// chain lines carry packet counters: ":INPUT ACCEPT [12:345]"
				if i := strings.LastIndex(l, " ["); strings.HasPrefix(l, ":") && i > 0 {
					l = l[:i]
				}
			}
			add(c.section, l)
		}
	}
	for _, key := range sysctlsTouched {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			add("sysctl", key+"="+strings.TrimSpace(string(v)))
		}
	}
	if mode, err := detectCgroupMode(cgroupFS); err == nil && mode == cgroupUnified {
		// v2: our cgroup, and the controllers the top gives its children
		if _, err := os.Stat(filepath.Join(cgroupFS, cgroupRoot)); err == nil {
			add("cgroup", cgroupRoot)
		}
		if v, err := os.ReadFile(filepath.Join(cgroupFS, "cgroup.subtree_control")); err == nil {
			add("cgroup", "subtree_control: "+strings.TrimSpace(string(v)))
		}
	}
	for _, c := range cgroupControllers {
		if _, err := os.Stat(filepath.Join(cgroupFS, c, cgroupRoot)); err == nil {
			add("cgroup", filepath.Join(c, cgroupRoot))
		}
	}
	for _, p := range machinePaths {
		if _, err := os.Lstat(p); err == nil {
			add("path", p)
		}
	}
	pids, err := process.Find(func(pid int) bool {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && (bytes.Contains(cmdline, []byte("containerd")) || bytes.Contains(cmdline, []byte("/.cluster/")))
	})
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		add("process", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	sort.Strings(lines)
	return lines, nil
}
