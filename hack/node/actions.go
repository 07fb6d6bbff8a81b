package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"time"
)

// action is one part of the cluster, in the shape of kind's actions: a
// type with a name, an Up that brings the part up and a Down that removes
// whatever of it exists. Down is safe when Up never ran, failed or was
// killed, and when it runs twice; an action with nothing to undo returns
// nil. Both get everything they work with from the actionContext.
type action interface {
	Name() string
	Up(ctx context.Context, ac *actionContext) error
	Down(ctx context.Context, ac *actionContext) error
}

// actionContext is what every action and command works with: the settings
// and paths (config), where to log and print, the environment, and what
// earlier actions of the same run produced.
type actionContext struct {
	config
	log *log.Logger
	// out is where commands print their answer (stdout).
	out io.Writer
	// getenv reads the caller's environment (settings not recorded yet).
	getenv func(string) string
	// all are every action, in order: allActions (tests put fakes here).
	all []action

	// caCert is the cluster CA's certificate, once the certificates
	// action made it; the bootstrap objects' APIService carries it.
	caCert []byte
}

func newActionContext(c config) *actionContext {
	return &actionContext{config: c, log: log.New(os.Stderr, "[node] ", log.Ltime), out: os.Stdout, getenv: os.Getenv, all: allActions()}
}

// networkActions come before the control plane: the API server listens on
// the bridge's address, where Pods reach it.
func networkActions() []action {
	return []action{preflight{}, sysctls{}, iptablesChains{}, podBridge{}}
}

// controlPlaneActions run after the network and before the node's own
// daemons, which talk to the API server.
func controlPlaneActions() []action {
	return []action{
		certificates{}, etcd{}, apiServer{}, controllerManager{}, scheduler{},
		kwok{}, bootstrapObjects{}, volumeRecycler{},
	}
}

// nodeActions come after the control plane.
func nodeActions() []action {
	return []action{
		imageRegistry{}, containerd{}, kubelet{}, kubeProxy{}, coreDNS{},
		metricsServer{}, sysctlRecord{}, nodeReady{},
	}
}

// allActions in order: down runs them in reverse, so the node's daemons
// stop before the API server they talk to, and the bridge it listens on
// goes last.
func allActions() []action {
	return slices.Concat(networkActions(), controlPlaneActions(), nodeActions())
}

// up runs the actions in order; when one fails, the downs of those that
// went up and of the failed one (it may have gone half-way) run in
// reverse.
func (ac *actionContext) up(ctx context.Context, actions []action) error {
	start := time.Now()
	for i, a := range actions {
		t := time.Now()
		if err := a.Up(ctx, ac); err != nil {
			err = fmt.Errorf("%s: %w", a.Name(), err)
			ac.log.Printf("%v; undoing what was done", err)
			return errors.Join(err, ac.down(context.Background(), actions[:i+1]))
		}
		ac.log.Printf("%s up (%.1fs)", a.Name(), time.Since(t).Seconds())
	}
	ac.log.Printf("done after %.1fs", time.Since(start).Seconds())
	return nil
}

// down runs every action's down in reverse order and goes on after an
// error, so one stuck part does not leave the others behind.
func (ac *actionContext) down(ctx context.Context, actions []action) error {
	var errs []error
	for _, a := range slices.Backward(actions) {
		if err := a.Down(ctx, ac); err != nil {
			errs = append(errs, fmt.Errorf("%s down: %w", a.Name(), err))
			ac.log.Printf("%s down: %v", a.Name(), err)
		}
	}
	return errors.Join(errs...)
}
