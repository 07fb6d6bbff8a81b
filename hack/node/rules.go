package main

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// clusterChainPrefixes name the iptables chains the cluster's parts add:
// ours, kube-proxy's and kubelet's (KUBE-), the CNI plugins' (CNI-). A
// chain with such a name that was already there before the node came up is
// someone else's and stays.
var clusterChainPrefixes = []string{chainPrefix, "KUBE-", "CNI-"}

// builtinChains are the chains iptables tables come with.
var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// ruleSet is one family's iptables-save output, by table.
type ruleSet map[string]*ruleTable

type ruleTable struct {
	chains []string // in the order iptables-save lists them
	rules  []rule
}

type rule struct {
	chain  string
	spec   string // everything after "-A CHAIN ", as iptables-save prints it
	target string // the chain or target of -j/-g ("" for none)
}

// parseRuleSet reads iptables-save output. Comments with blanks are quoted
// there, so a rule's target is found among its quoted-aware words.
func parseRuleSet(save []byte) ruleSet {
	rs := ruleSet{}
	var cur *ruleTable
	for _, line := range strings.Split(string(save), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			cur = &ruleTable{}
			rs[strings.TrimSpace(line[1:])] = cur
		case cur == nil:
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 {
				cur.chains = append(cur.chains, f[0])
			}
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[len("-A "):], " ")
			r := rule{chain: chain, spec: spec}
			words := splitWords(spec)
			for i := 0; i+1 < len(words); i++ {
				if words[i] == "-j" || words[i] == "-g" {
					r.target = words[i+1]
				}
			}
			cur.rules = append(cur.rules, r)
		}
	}
	return rs
}

// splitWords splits a rule as iptables-restore does: on blanks outside
// double quotes, with backslash escaping the next character.
func splitWords(s string) []string {
	var words []string
	var w strings.Builder
	inQuote, escaped, inWord := false, false, false
	for _, r := range s {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped, inWord = false, true
		case r == '\\':
			escaped, inWord = true, true
		case r == '"':
			inQuote, inWord = !inQuote, true
		case r == ' ' && !inQuote:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// chainIDs are the "table/chain" names of a rule set, for the record taken
// before the node comes up.
func (rs ruleSet) chainIDs() []string {
	var ids []string
	for t, tbl := range rs {
		for _, c := range tbl.chains {
			ids = append(ids, t+"/"+c)
		}
	}
	sort.Strings(ids)
	return ids
}

// empty tells whether a table holds nothing but its built-in chains.
func (t *ruleTable) empty() bool {
	if len(t.rules) > 0 {
		return false
	}
	for _, c := range t.chains {
		if !builtinChains[c] {
			return false
		}
	}
	return true
}

// clusterChain tells whether a chain is one the cluster's parts added: its
// name has one of prefixes and it was not there before (before holds
// "table/chain").
func clusterChain(table, chain string, prefixes []string, before map[string]bool) bool {
	if before[table+"/"+chain] {
		return false
	}
	for _, p := range prefixes {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// removalScript is the iptables-restore --noflush input that removes the
// cluster's chains from rs and nothing else: first the rules in other
// chains that jump to them, then their own rules, then the chains. Rules
// another program added to any chain, and its chains, stay. "" when there
// is nothing to remove.
func removalScript(rs ruleSet, prefixes []string, before map[string]bool) string {
	var b strings.Builder
	for _, t := range rs.tableNames() {
		tbl := rs[t]
		var ours []string
		for _, c := range tbl.chains {
			if clusterChain(t, c, prefixes, before) {
				ours = append(ours, c)
			}
		}
		if len(ours) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		for _, r := range tbl.rules {
			if slices.Contains(ours, r.target) && !slices.Contains(ours, r.chain) {
				fmt.Fprintf(&b, "-D %s %s\n", r.chain, r.spec)
			}
		}
		for _, c := range ours {
			fmt.Fprintf(&b, "-F %s\n", c)
		}
		for _, c := range ours {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// appearedEmptyTables are the tables of rs that were not there before and
// hold nothing now: the cluster's parts made them (iptables-nft creates a
// table on first use) and nobody else uses them.
func appearedEmptyTables(rs ruleSet, tablesBefore []string) []string {
	var out []string
	for t, tbl := range rs {
		if !slices.Contains(tablesBefore, t) && tbl.empty() {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// tableNames lists the tables of a rule set.
func (rs ruleSet) tableNames() []string {
	names := make([]string, 0, len(rs))
	for t := range rs {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// nftTables are the lines of `nft list tables` ("table ip nat").
func nftTables(out []byte) []string {
	var t []string
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			t = append(t, l)
		}
	}
	return t
}
