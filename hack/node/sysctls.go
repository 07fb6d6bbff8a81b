package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sysctlsTouched are every kernel setting the node's parts change: the
// bridge's forwarding and filtering, kube-proxy's localhost NodePorts and
// kubelet's own (it sets panic, overcommit and key limits at start).
var sysctlsTouched = []string{
	"net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/ipv4/conf/all/route_localnet",
	"kernel/panic",
	"kernel/panic_on_oops",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// ownSysctls are the settings the node sets itself, before kubelet and
// kube-proxy would.
var ownSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// knownSysctls are the values the node's parts are known to set: ours,
// kubelet's kernel tunables (overcommit always, reboot 10 s after a panic,
// panic on oops, key limits) and kube-proxy's route_localnet (its
// localhost NodePorts). kube-proxy sets it a moment after it starts, so
// sysctlRecord may miss it, and a down whose up ended early has no record.
var knownSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
	"net/ipv4/conf/all/route_localnet":    "1",
	"vm/overcommit_memory":                "1",
	"vm/panic_on_oom":                     "0",
	"kernel/panic":                        "10",
	"kernel/panic_on_oops":                "1",
	"kernel/keys/root_maxkeys":            "1000000",
	"kernel/keys/root_maxbytes":           "25000000",
}

// sysctls records the settings before anything changes them (once: a
// record left by a killed run holds the machine's own values) and sets
// ownSysctls. Down puts back only what the node changed and what still
// holds a value of the node's (knownSysctls, or what sysctlRecord found
// once the node was up): another program's change made since stays.
type sysctls struct{}

func (sysctls) Name() string { return "sysctls" }

// saved is the record of the machine's values before the node.
func (sysctls) saved(ac *actionContext) string { return ac.path("saved", "sysctls.json") }

func (s sysctls) Up(_ context.Context, ac *actionContext) error {
	if _, err := os.Stat(s.saved(ac)); errors.Is(err, os.ErrNotExist) {
		if err := writeJSON(s.saved(ac), readSysctls()); err != nil {
			return err
		}
	}
	for key, value := range ownSysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", key, err)
		}
	}
	return nil
}

func (s sysctls) Down(_ context.Context, ac *actionContext) error {
	saved, ours := s.saved(ac), sysctlRecord{}.file(ac)
	before := map[string]string{}
	if err := readJSON(saved, &before); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	recorded := map[string]string{}
	if err := readJSON(ours, &recorded); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
	for key, value := range sysctlsToRestore(before, readSysctls(), knownSysctls, recorded) {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", key, value, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return errors.Join(os.Remove(saved), removeIfExists(ours))
}

// sysctlRecord records the settings once the node's parts have set theirs
// (kubelet and kube-proxy set some at start): what sysctls' down may put
// back. Its own down has nothing to do: sysctls' removes the record.
type sysctlRecord struct{}

func (sysctlRecord) Name() string { return "sysctl-record" }

func (sysctlRecord) file(ac *actionContext) string { return ac.path("saved", "sysctls-ours.json") }

func (r sysctlRecord) Up(_ context.Context, ac *actionContext) error {
	return writeJSON(r.file(ac), readSysctls())
}

func (sysctlRecord) Down(context.Context, *actionContext) error { return nil }

// sysctlsToRestore are the settings to put back: those that differ from
// the value before and hold a value of the node's (any of ours).
func sysctlsToRestore(before, now map[string]string, ours ...map[string]string) map[string]string {
	restore := map[string]string{}
	for key, was := range before {
		v, ok := now[key]
		if !ok || v == was {
			continue
		}
		for _, o := range ours {
			if o[key] == v {
				restore[key] = was
				break
			}
		}
	}
	return restore
}

// readSysctls reads sysctlsTouched (those this kernel has).
func readSysctls() map[string]string {
	values := map[string]string{}
	for _, key := range sysctlsTouched {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			values[key] = strings.TrimSpace(string(v))
		}
	}
	return values
}
