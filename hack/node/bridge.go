package main

import (
	"bytes"
	"context"
	"errors"
	"net"
)

// podBridge makes the Pods' bridge with the node's address and its own
// hardware address (config.bridgeMAC) before the API server binds to it
// (the CNI bridge plugin takes it over as it is) and
// keeps the cluster's addresses on this machine: traffic to kwok's
// simulated Pods (Services whose endpoints are simulated Pods) is refused
// here, and Service addresses kube-proxy has no rule for go to the bridge,
// where nothing answers, instead of following the default route out.
type podBridge struct{}

func (podBridge) Name() string { return "bridge" }

func (podBridge) Up(_ context.Context, ac *actionContext) error {
	gw := &net.IPNet{IP: ac.gateway(), Mask: ac.podCIDR.Mask}
	for _, cmd := range [][]string{
		{"link", "add", ac.bridge, "address", ac.bridgeMAC().String(), "type", "bridge"},
		{"addr", "add", gw.String(), "dev", ac.bridge},
		{"link", "set", ac.bridge, "up"},
		{"route", "add", "unreachable", ac.fakePodCIDR.String()},
		{"route", "add", ac.serviceCIDR.String(), "dev", ac.bridge, "src", ac.gateway().String()},
	} {
		if err := run("ip", cmd...); err != nil {
			return err
		}
	}
	return nil
}

func (podBridge) Down(_ context.Context, ac *actionContext) error {
	var errs []error
	if _, err := net.InterfaceByName(ac.bridge); err == nil {
		errs = append(errs, run("ip", "link", "del", ac.bridge))
	}
	if out, _ := output("ip", "route", "show", "type", "unreachable", ac.fakePodCIDR.String()); len(bytes.TrimSpace(out)) > 0 {
		errs = append(errs, run("ip", "route", "del", "unreachable", ac.fakePodCIDR.String()))
	}
	return errors.Join(errs...)
}
