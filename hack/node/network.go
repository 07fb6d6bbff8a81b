package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// Our own iptables chains (kube-proxy and the CNI plugins add theirs).
const (
	chainMasquerade = "SERVERLESS-NODE-MASQ"
	chainForward    = "SERVERLESS-NODE-FORWARD"
)

// iptables records the rule sets before anything changes them (once, like
// the sysctls) and restores them on down, which removes every chain
// kube-proxy, kubelet, the CNI plugins and we added. up adds ours: Pods'
// traffic to the package registries leaves masqueraded as this machine, and
// the bridge's traffic is forwarded whatever the FORWARD policy.
func (n *node) iptables() action {
	families := []struct{ save, restore, nftFamily, file string }{
		{"iptables-save", "iptables-restore", "ip", n.path("saved", "iptables")},
		{"ip6tables-save", "ip6tables-restore", "ip6", n.path("saved", "ip6tables")},
	}
	return action{
		name: "iptables",
		up: func(context.Context) error {
			for _, f := range families {
				if _, err := os.Stat(f.file); err == nil {
					continue
				}
				rules, err := output(f.save)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(n.path("saved"), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(f.file, rules, 0o600); err != nil {
					return err
				}
			}
			pods := n.podCIDR.String()
			for _, rule := range [][]string{
				{"-t", "nat", "-N", chainMasquerade},
				{"-t", "nat", "-A", chainMasquerade, "-s", pods, "-d", pods, "-j", "RETURN"},
				{"-t", "nat", "-A", chainMasquerade, "-s", pods, "-j", "MASQUERADE"},
				{"-t", "nat", "-A", "POSTROUTING", "-j", chainMasquerade},
				{"-N", chainForward},
				{"-A", chainForward, "-i", n.bridge, "-j", "ACCEPT"},
				{"-A", chainForward, "-o", n.bridge, "-j", "ACCEPT"},
				{"-A", "FORWARD", "-j", chainForward},
			} {
				if err := run("iptables", append([]string{"-w"}, rule...)...); err != nil {
					return err
				}
			}
			return nil
		},
		down: func(context.Context) error {
			var errs []error
			for _, f := range families {
				saved, err := os.ReadFile(f.file)
				if errors.Is(err, os.ErrNotExist) {
					continue
				} else if err != nil {
					errs = append(errs, err)
					continue
				}
				if err := restoreRules(f.save, f.restore, f.nftFamily, saved); err != nil {
					errs = append(errs, err)
					continue
				}
				if err := os.Remove(f.file); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
}

// restoreRules puts the saved rule set back: tables in it are replaced
// whole, tables that appeared since are deleted (iptables-nft keeps them as
// nftables tables of family ip or ip6).
func restoreRules(save, restore, family string, saved []byte) error {
	now, err := output(save)
	if err != nil {
		return err
	}
	had := tables(saved)
	for table := range tables(now) {
		if had[table] {
			continue
		}
		if err := run("nft", "delete", "table", family, table); err != nil {
			return err
		}
	}
	if len(had) == 0 {
		return nil
	}
	c := exec.Command(restore, "-w")
	c.Stdin = bytes.NewReader(saved)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", restore, err, bytes.TrimSpace(out))
	}
	return nil
}

// tables are the names of the tables in iptables-save output ("*nat").
func tables(rules []byte) map[string]bool {
	t := map[string]bool{}
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(line, "*") {
			t[strings.TrimSpace(line[1:])] = true
		}
	}
	return t
}

// bridgeAction makes the Pods' bridge with the node's address and its own
// hardware address (config.bridgeMAC) before the API server binds to it
// (the CNI bridge plugin takes it over as it is) and
// keeps the cluster's addresses on this machine: traffic to kwok's
// simulated Pods (Services whose endpoints are simulated Pods) is refused
// here, and Service addresses kube-proxy has no rule for go to the bridge,
// where nothing answers, instead of following the default route out.
func (n *node) bridgeAction() action {
	gw := &net.IPNet{IP: n.gateway(), Mask: n.podCIDR.Mask}
	return action{
		name: "bridge",
		up: func(context.Context) error {
			for _, cmd := range [][]string{
				{"link", "add", n.bridge, "address", n.bridgeMAC().String(), "type", "bridge"},
				{"addr", "add", gw.String(), "dev", n.bridge},
				{"link", "set", n.bridge, "up"},
				{"route", "add", "unreachable", n.fakePodCIDR.String()},
				{"route", "add", n.serviceCIDR.String(), "dev", n.bridge, "src", n.gateway().String()},
			} {
				if err := run("ip", cmd...); err != nil {
					return err
				}
			}
			return nil
		},
		down: func(context.Context) error {
			var errs []error
			if _, err := net.InterfaceByName(n.bridge); err == nil {
				errs = append(errs, run("ip", "link", "del", n.bridge))
			}
			if out, _ := output("ip", "route", "show", "type", "unreachable", n.fakePodCIDR.String()); len(bytes.TrimSpace(out)) > 0 {
				errs = append(errs, run("ip", "route", "del", "unreachable", n.fakePodCIDR.String()))
			}
			return errors.Join(errs...)
		},
	}
}
