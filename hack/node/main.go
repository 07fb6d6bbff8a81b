// Command node brings up, and tears down, the local cluster: its control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
// with its simulated nodes) and its real node: a bridge for Pods, containerd
// with runc and the CNI plugins, kubelet, kube-proxy, cluster DNS (CoreDNS)
// and the registry the node pulls the images built here from.
// hack/cluster.sh calls it under its lock; it needs root.
//
// Each part is an action, a type with an up and a down (actions.go). down undoes
// what up did and is safe after an up that never ran or was killed half-way,
// so `down` always runs every action's down, in reverse order: the machine
// is left as it was (processes, mounts, network namespaces, the bridge,
// iptables rules, cgroups, sysctls), also after a killed run.
//
// usage:
//
//	node start     the whole cluster (write-config, network, control-plane, up), unless it runs healthy; prints "running" or "started"; a failed start is undone, its logs kept
//	node network   the bridge, routes, iptables rules and sysctls (before the API server, which listens on the bridge)
//	node control-plane  the certificates and kubeconfigs, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the bootstrap objects; waits until the simulated nodes are Ready
//	node up        the image registry, containerd, kubelet, kube-proxy, CoreDNS and metrics-server; waits until the node is Ready
//	node down      every action's down, in reverse order
//	node load      pushes the images of bin/image/ into the node's registry
//	node manager-env  prints the manager's IMAGE_<KEY>=... that point the chart at the local images
//	node insecure-registry HOST:PORT  lets the node pull from that registry over plain HTTP
//	node restart kubelet|containerd|kube-proxy|coredns|metrics-server   stops it (SIGTERM, as a service restart does) and starts it again; Pods keep running
//	node restart kube-apiserver  kills it (SIGKILL, as a crash would) and starts it again, with kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS
//	node recycle-volumes KUBECONFIG  hands released volumes of the pool back, scrubbed (the volume-recycler daemon runs this)
//	node state     prints what the node changes on this machine, one fact a line (to compare before and after)
//	node kubeconfig-sa NS SA  writes a kubeconfig of ServiceAccount NS/SA, prints its path
//	node status    every daemon's state, the API server's readiness, the nodes; fails when unhealthy
//	node healthy   fails (quietly but for the reason) unless a completed start runs as it should
//	node write-config  checks the control plane's ports are free, records the settings (localcluster.Config, from the environment) in the state directory, once
//	node settings  prints every setting as NAME=value (the recorded ones, else the environment's)
//	node setting NAME  prints one of them
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kyma-project/serverless-manager/operator/pkg/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

func main() {
	var c config
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	c.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: node start|kubeconfig-sa NS SA|status|healthy|write-config|settings|setting NAME|network|control-plane|up|down|load|manager-env|insecure-registry HOST:PORT|restart kube-apiserver|kubelet|containerd|kube-proxy|coredns|metrics-server|recycle-volumes KUBECONFIG [flags]")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var arg string
	var arg2 string
	if (cmd == "insecure-registry" || cmd == "restart" || cmd == "setting" || cmd == "kubeconfig-sa" || cmd == "recycle-volumes") && len(args) > 0 {
		arg, args = args[0], args[1:]
	}
	if cmd == "kubeconfig-sa" && len(args) > 0 {
		arg2, args = args[0], args[1:]
	}
	_ = fs.Parse(args)
	if err := c.complete(os.Getenv); err != nil {
		fail(err)
	}
	process.KeepInheritedFilesToOurselves()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ac := newActionContext(c)
	var err error
	switch cmd {
	case "start":
		var result string
		if result, err = ac.startCluster(ctx); err == nil {
			fmt.Println(result)
		}
	case "network":
		err = ac.up(ctx, networkActions())
	case "control-plane":
		err = ac.up(ctx, controlPlaneActions())
	case "up":
		err = ac.up(ctx, nodeActions())
	case "down":
		err = ac.down(context.Background(), allActions())
	case "load":
		err = ac.load(ctx)
	case "insecure-registry":
		err = ac.trustRegistry(arg)
	case "restart":
		err = ac.restart(ctx, arg)
	case "recycle-volumes":
		err = ac.recycleVolumes(ctx, arg)
	case "state":
		var lines []string
		if lines, err = machineState(); err == nil {
			fmt.Println(strings.Join(lines, "\n"))
		}
	case "kubeconfig-sa":
		var file string
		if file, err = ac.kubeconfigSA(arg, arg2); err == nil {
			fmt.Println(file)
		}
	case "status":
		err = ac.status(os.Stdout)
	case "healthy":
		err = ac.healthy()
	case "write-config":
		if err = ac.portsFree(); err == nil {
			err = ac.writeConfig()
		}
	case "settings":
		ac.warnEnvDiffers()
		for _, kv := range settingLines(ac.cluster) {
			fmt.Println(kv)
		}
	case "setting":
		if v, ok := ac.cluster.Settings()[arg]; ok {
			fmt.Println(v)
		} else {
			err = fmt.Errorf("no setting %q", arg)
		}
	case "manager-env":
		for _, kv := range localimage.ManagerEnv(ac.registry()) {
			fmt.Println(kv)
		}
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "node:", err)
	os.Exit(1)
}
