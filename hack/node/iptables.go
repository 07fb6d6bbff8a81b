package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Our own iptables chains (kube-proxy and the CNI plugins add theirs).
const (
	chainMasquerade = chainPrefix + "MASQ"
	chainForward    = chainPrefix + "FORWARD"
)

// iptablesChains adds our chains: Pods' traffic to the package registries
// leaves masqueraded as this machine, and the bridge's traffic is forwarded
// whatever the FORWARD policy. Before anything changes the rule sets (once:
// a record left by a killed run holds the machine's own state) it records
// which tables and chains exist; down removes the chains the cluster's
// parts added since (ours, kube-proxy's, kubelet's, the CNI plugins') with
// the rules that jump to them, and the tables they made, and leaves every
// other program's rules, chains, sets and tables as they are now.
type iptablesChains struct{}

func (iptablesChains) Name() string { return "iptables" }

func (iptablesChains) record(ac *actionContext) string { return ac.path("saved", "iptables.json") }

func (t iptablesChains) Up(_ context.Context, ac *actionContext) error {
	record := t.record(ac)
	if _, err := os.Stat(record); errors.Is(err, os.ErrNotExist) {
		before, err := recordRules()
		if err != nil {
			return err
		}
		if err := writeJSON(record, before); err != nil {
			return err
		}
	}
	var before rulesRecord
	if err := readJSON(record, &before); err != nil {
		return err
	}
	// a killed run's chains of ours would make -N fail
	if err := removeChains(ipFamilies[0], []string{chainPrefix}, before.Families[ipFamilies[0].save]); err != nil {
		return err
	}
	pods := ac.podCIDR.String()
	for _, rule := range [][]string{
		{"-t", "nat", "-N", chainMasquerade},
		{"-t", "nat", "-A", chainMasquerade, "-s", pods, "-d", pods, "-j", "RETURN"},
		{"-t", "nat", "-A", chainMasquerade, "-s", pods, "-j", "MASQUERADE"},
		{"-t", "nat", "-A", "POSTROUTING", "-j", chainMasquerade},
		{"-N", chainForward},
		{"-A", chainForward, "-i", ac.bridge, "-j", "ACCEPT"},
		{"-A", chainForward, "-o", ac.bridge, "-j", "ACCEPT"},
		{"-A", "FORWARD", "-j", chainForward},
	} {
		if err := run("iptables", append([]string{"-w"}, rule...)...); err != nil {
			return err
		}
	}
	return nil
}

func (t iptablesChains) Down(_ context.Context, ac *actionContext) error {
	record := t.record(ac)
	var before rulesRecord
	if err := readJSON(record, &before); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, f := range ipFamilies {
		errs = append(errs, removeChains(f, clusterChainPrefixes, before.Families[f.save]))
	}
	errs = append(errs, removeKubeProxyTables(before.NFT))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(record)
}

// chainPrefix names our own chains (one of clusterChainPrefixes).
const chainPrefix = "SERVERLESS-NODE-"

// ipFamily is iptables or ip6tables, and the nftables family iptables-nft
// keeps its tables in.
type ipFamily struct{ save, restore, nft string }

var ipFamilies = []ipFamily{
	{"iptables-save", "iptables-restore", "ip"},
	{"ip6tables-save", "ip6tables-restore", "ip6"},
}

// rulesRecord is what existed before the node came up.
type rulesRecord struct {
	// Families holds, by save command, the tables and "table/chain"s.
	Families map[string]familyRecord `json:"families"`
	// NFT is `nft list tables` ("table ip nat"); empty without nft.
	NFT []string `json:"nft,omitempty"`
}

type familyRecord struct {
	Tables []string `json:"tables"`
	Chains []string `json:"chains"`
}

func recordRules() (rulesRecord, error) {
	r := rulesRecord{Families: map[string]familyRecord{}}
	for _, f := range ipFamilies {
		save, err := output(f.save)
		if err != nil {
			return r, err
		}
		rs := parseRuleSet(save)
		r.Families[f.save] = familyRecord{Tables: rs.tableNames(), Chains: rs.chainIDs()}
	}
	if _, err := exec.LookPath("nft"); err == nil {
		out, err := output("nft", "list", "tables")
		if err != nil {
			return r, err
		}
		r.NFT = nftTables(out)
	}
	return r, nil
}

// removeChains removes from one family the chains named with prefixes that
// were not there before, with the rules jumping to them, then the tables
// that appeared since and hold nothing now (iptables-nft keeps them as
// nftables tables of the family's name).
func removeChains(f ipFamily, prefixes []string, before familyRecord) error {
	save, err := output(f.save)
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, id := range before.Chains {
		had[id] = true
	}
	if script := removalScript(parseRuleSet(save), prefixes, had); script != "" {
		c := exec.Command(f.restore, "-w", "--noflush")
		c.Stdin = strings.NewReader(script)
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", f.restore, err, bytes.TrimSpace(out))
		}
		if save, err = output(f.save); err != nil {
			return err
		}
	}
	if !iptablesNFT(f.save) {
		return nil
	}
	for _, t := range appearedEmptyTables(parseRuleSet(save), before.Tables) {
		if err := run("nft", "delete", "table", f.nft, t); err != nil {
			return err
		}
	}
	return nil
}

// iptablesNFT tells whether the iptables commands are the nftables variant
// (their tables are nftables tables that can be deleted).
func iptablesNFT(save string) bool {
	out, err := output(save, "--version")
	return err == nil && bytes.Contains(out, []byte("nf_tables"))
}

// removeKubeProxyTables deletes the nftables tables kube-proxy's nftables
// mode makes, when they appeared with the cluster.
func removeKubeProxyTables(before []string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	out, err := output("nft", "list", "tables")
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range nftTables(out) {
		f := strings.Fields(t) // table FAMILY NAME
		if len(f) == 3 && f[2] == "kube-proxy" && !slices.Contains(before, t) {
			errs = append(errs, run("nft", "delete", "table", f[1], f[2]))
		}
	}
	return errors.Join(errs...)
}
