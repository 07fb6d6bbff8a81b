// Command node brings up, and tears down, the local cluster: its control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
// with its simulated nodes) and its real node: a bridge for Pods, containerd
// with runc and the CNI plugins, kubelet, kube-proxy, cluster DNS (CoreDNS)
// and the registry the node pulls the images built here from. It needs
// root. hack/cluster.sh builds it into bin/node and calls it, holding the
// cluster's lock for up, down, release and restart.
//
// Each part is an action, a type with a name, an up and a down behind one
// interface (actions.go), in the order allActions lists them. down undoes
// what up did and is safe after an up that never ran or was killed
// half-way, so `down` always runs every action's down, in reverse order:
// the machine is left as it was (processes, mounts, network namespaces,
// the bridge, iptables rules, cgroups, sysctls), also after a killed run.
//
// The subcommands are a table (commands.go); `node` alone lists them:
//
//	node COMMAND [ARGUMENTS] [-state DIR -assets DIR -images DIR -repo DIR ...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

func main() {
	var c config
	var inv invocation
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // main prints the usage, once
	fs.Usage = func() {}
	c.flags(fs)
	fs.IntVar(&inv.user, "user", 0, "up: the PID of the test process that uses the cluster (release PID when done)")
	cmds := commands()
	cmd, args, err := parse(cmds, os.Args[1:], fs)
	if errors.Is(err, flag.ErrHelp) {
		usage(os.Stdout, cmds, fs)
		return
	}
	if len(os.Args) < 2 {
		usage(os.Stderr, cmds, fs)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: %v (node help lists the commands)\n", err)
		os.Exit(2)
	}
	inv.args = args
	if err := c.complete(os.Getenv); err != nil {
		fail(err)
	}
	process.KeepInheritedFilesToOurselves()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, newActionContext(c), inv); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "node:", err)
	os.Exit(1)
}
