package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"time"
)

// action is one part of the node. up brings it up; down removes whatever
// of it exists, so it is safe when up never ran, failed or was killed, and
// when it runs twice.
type action struct {
	name string
	up   func(ctx context.Context) error
	down func(ctx context.Context) error
}

// node is this machine acting as the cluster's real node.
type node struct {
	config
	log *log.Logger
}

func newNode(c config) *node {
	return &node{config: c, log: log.New(os.Stderr, "[node] ", log.Ltime)}
}

// networkActions come before the control plane: the API server listens on
// the bridge's address, where Pods reach it.
func (n *node) networkActions() []action {
	return []action{
		n.preflight(),
		n.sysctls(),
		n.iptables(),
		n.bridgeAction(),
	}
}

// nodeActions come after the control plane.
func (n *node) nodeActions() []action {
	return []action{
		n.imageRegistry(),
		n.containerd(),
		n.kubelet(),
		n.kubeProxy(),
		n.coreDNS(),
		n.metricsServer(),
		n.sysctlRecord(),
		n.nodeReady(),
	}
}

// allActions in order: down runs them in reverse, so the node's daemons
// stop before the API server they talk to, and the bridge it listens on
// goes last.
func (n *node) allActions() []action {
	return slices.Concat(n.networkActions(), n.controlPlaneActions(), n.nodeActions())
}

// up runs the actions in order; when one fails, the downs of those that
// ran (the failed one included) run in reverse.
func (n *node) up(ctx context.Context, actions []action) error {
	start := time.Now()
	for i, a := range actions {
		if a.up == nil {
			continue
		}
		t := time.Now()
		if err := a.up(ctx); err != nil {
			err = fmt.Errorf("%s: %w", a.name, err)
			n.log.Printf("%v; undoing what was done", err)
			return errors.Join(err, n.down(context.Background(), actions[:i+1]))
		}
		n.log.Printf("%s up (%.1fs)", a.name, time.Since(t).Seconds())
	}
	n.log.Printf("done after %.1fs", time.Since(start).Seconds())
	return nil
}

// down runs every action's down in reverse order and goes on after an
// error, so one stuck part does not leave the others behind.
func (n *node) down(ctx context.Context, actions []action) error {
	var errs []error
	for i := len(actions) - 1; i >= 0; i-- {
		a := actions[i]
		if a.down == nil {
			continue
		}
		if err := a.down(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s down: %w", a.name, err))
			n.log.Printf("%s down: %v", a.name, err)
		}
	}
	return errors.Join(errs...)
}
