package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// kubectlCommand is kubectl as the cluster's admin.
func (ac *actionContext) kubectlCommand(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(ac.assets, "kubectl"),
		append([]string{"--kubeconfig=" + filepath.Join(ac.state, "kubeconfig"), "--request-timeout=10s"}, args...)...)
}

func (ac *actionContext) kubectl(args ...string) ([]byte, error) {
	cmd := ac.kubectlCommand(args...)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(exit.Stderr)))
		}
		return out, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// simulatedNodesReady counts the simulated nodes that are Ready and carry
// no taint (the node-lifecycle controller lifts node.kubernetes.io/not-ready
// once kwok reports Ready).
func (ac *actionContext) simulatedNodesReady() error {
	out, err := ac.kubectl("get", "nodes", "-l", labelType+"=kwok", "-o", "json")
	if err != nil {
		return err
	}
	var list struct {
		Items []struct {
			Spec struct {
				Taints []struct{ Key string } `json:"taints"`
			} `json:"spec"`
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return fmt.Errorf("reading the node list: %w", err)
	}
	ready := 0
	for _, item := range list.Items {
		for _, c := range item.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" && len(item.Spec.Taints) == 0 {
				ready++
			}
		}
	}
	if ready < ac.nodes {
		return fmt.Errorf("%d of %d Ready and untainted", ready, ac.nodes)
	}
	return nil
}
