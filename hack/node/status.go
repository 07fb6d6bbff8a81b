package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

// allDaemons are every daemon of the cluster, in the order status lists
// them.
func (n *node) allDaemons() []daemon {
	return []daemon{
		n.etcdDaemon(), n.apiServerDaemon(), n.controllerManagerDaemon(), n.schedulerDaemon(), n.kwokDaemon(""), n.volumeRecyclerDaemon(),
		n.registryDaemon(), n.containerdDaemon(), n.kubeletDaemon(), n.kubeProxyDaemon(), n.coreDNSDaemon(), n.metricsServerDaemon(),
	}
}

// readyMarker is written once a start has completed (start, cluster.go).
func (c config) readyMarker() string { return filepath.Join(c.state, "ready") }

func (n *node) apiServerReady() error {
	out, err := n.kubectl("get", "--raw=/readyz")
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "ok" {
		return fmt.Errorf("/readyz says %q", s)
	}
	return nil
}

func (n *node) realNodeReady() error {
	out, err := n.kubectl("get", "node", n.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "True" {
		return fmt.Errorf("node %s is not Ready (Ready=%q)", n.name, s)
	}
	return nil
}

// waitRealNodeReady waits until the real node is Ready, failing at once
// when kubelet has exited.
func (n *node) waitRealNodeReady(ctx context.Context) error {
	return waitFor(ctx, 60*time.Second, "node "+n.name+" Ready", func() error {
		if err := n.checkAlive("kubelet"); err != nil {
			return process.StopWaiting{Err: err}
		}
		return n.realNodeReady()
	})
}

// nodeReady is the node's last action: the real node is Ready and the
// default ServiceAccount exists (Pods of the default namespace need it).
func (n *node) nodeReady() action {
	return action{name: "node ready", up: func(ctx context.Context) error {
		if err := n.waitRealNodeReady(ctx); err != nil {
			return err
		}
		return waitFor(ctx, 60*time.Second, "the default ServiceAccount", func() error {
			_, err := n.kubectl("get", "serviceaccount", "default", "-n", "default")
			return err
		})
	}}
}

// status writes every daemon's state, the API server's readiness and the
// nodes to w; the error says what is unhealthy.
func (n *node) status(w io.Writer) error {
	var errs []error
	for _, d := range n.allDaemons() {
		if pid, ok := n.daemonPID(d.name); ok {
			fmt.Fprintf(w, "%-24s running (pid %d)\n", d.name, pid)
		} else {
			fmt.Fprintf(w, "%-24s NOT running\n", d.name)
			errs = append(errs, fmt.Errorf("%s is not running", d.name))
		}
	}
	if err := n.apiServerReady(); err != nil {
		fmt.Fprintln(w, "kube-apiserver /readyz   NOT ok")
		return errors.Join(append(errs, err)...)
	}
	fmt.Fprintf(w, "kube-apiserver /readyz   ok (https://%s:%d)\n", n.gateway(), n.apiServerPort)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cmd := n.kubectlCommand("get", "nodes", "-o", "wide")
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Run(); err != nil {
		errs = append(errs, fmt.Errorf("kubectl get nodes: %w", err))
	}
	if err := n.simulatedNodesReady(); err != nil {
		fmt.Fprintf(w, "fewer than %d simulated nodes are Ready\n", n.nodes)
		errs = append(errs, err)
	}
	if err := n.realNodeReady(); err != nil {
		fmt.Fprintf(w, "node %s is not Ready\n", n.name)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// healthy says whether a completed start runs as it should: no output.
func (n *node) healthy() error {
	if _, err := os.Stat(n.readyMarker()); err != nil {
		return fmt.Errorf("no completed start: %w", err)
	}
	return n.status(io.Discard)
}
