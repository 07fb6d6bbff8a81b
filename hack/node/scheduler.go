package main

import (
	"context"
	"path/filepath"
	"time"
)

// scheduler runs kube-scheduler; its down stops it.
type scheduler struct{}

func (scheduler) Name() string { return "kube-scheduler" }

func (scheduler) daemon(ac *actionContext) daemon {
	kubeconfig := ac.kubeconfig("kube-scheduler")
	args := append(componentArgs(kubeconfig, ac.schedulerPort),
		"--kubeconfig="+kubeconfig) // last: stop tells its process by it
	return daemon{name: "kube-scheduler", path: filepath.Join(ac.assets, "kube-scheduler"), config: kubeconfig, grace: 5 * time.Second, args: args}
}

func (s scheduler) Up(_ context.Context, ac *actionContext) error { return ac.start(s.daemon(ac)) }

func (s scheduler) Down(_ context.Context, ac *actionContext) error { return ac.stop(s.daemon(ac)) }
