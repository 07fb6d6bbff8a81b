package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
)

// command is one subcommand of node: its name, the names of its positional
// arguments (they come before the flags), what it does, and how.
type command struct {
	name string
	args []string
	help string
	run  func(ctx context.Context, ac *actionContext, inv invocation) error
}

// invocation is one call of a command: its positional arguments and the
// flags that are no settings.
type invocation struct {
	args []string
	// user is the test process that asks for the cluster (up -user PID).
	user int
}

// errUsage makes main print the usage and exit with 2.
var errUsage = errors.New("usage")

// commands is node's table of subcommands, in the order usage lists them.
func commands() []command {
	return []command{
		{name: "up", help: "start the cluster unless it runs healthy (hack/cluster.sh up builds the tools first); -user PID: a test process uses it (release)",
			run: func(ctx context.Context, ac *actionContext, inv invocation) error { return ac.upCommand(ctx, inv.user) }},
		{name: "down", help: "every action's down, in reverse order; removes the state directory",
			run: func(_ context.Context, ac *actionContext, _ invocation) error { return ac.downCommand() }},
		{name: "release", args: []string{"PID"}, help: "the test process PID is done with the cluster: the last one stops a cluster tests started (unless E2E_KEEP_CLUSTER=1)",
			run: func(_ context.Context, ac *actionContext, inv invocation) error { return ac.release(inv.args[0]) }},
		{name: "status", help: "every daemon's state, the API server's readiness, the nodes; fails when unhealthy",
			run: func(_ context.Context, ac *actionContext, _ invocation) error { return ac.statusCommand() }},
		{name: "healthy", help: "fails (quietly but for the reason) unless a completed start runs as it should",
			run: func(_ context.Context, ac *actionContext, _ invocation) error { return ac.healthy() }},
		{name: "kubeconfig-sa", args: []string{"NS", "SA"}, help: "writes a kubeconfig of ServiceAccount NS/SA, prints its path",
			run: func(_ context.Context, ac *actionContext, inv invocation) error {
				return ac.kubeconfigSACommand(inv.args[0], inv.args[1])
			}},
		{name: "restart", args: []string{"COMPONENT"}, help: "kube-apiserver: kills it (SIGKILL, as a crash would) and starts it again, with kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS; kubelet|containerd|kube-proxy|coredns|metrics-server: stops it (SIGTERM, as a service restart does) and starts it again, Pods keep running",
			run: func(ctx context.Context, ac *actionContext, inv invocation) error {
				return ac.restartCommand(ctx, inv.args[0])
			}},
		{name: "load", help: "pushes the images of bin/image (make image) into the node's registry",
			run: func(ctx context.Context, ac *actionContext, _ invocation) error { return ac.loadCommand(ctx) }},
		{name: "manager-env", help: "prints the manager's IMAGE_<KEY>=... that point the chart at the local images",
			run: func(_ context.Context, ac *actionContext, _ invocation) error {
				return ac.println(localimage.ManagerEnv(ac.registry())...)
			}},
		{name: "insecure-registry", args: []string{"HOST:PORT"}, help: "lets the node pull from that registry over plain HTTP",
			run: func(_ context.Context, ac *actionContext, inv invocation) error { return ac.trustRegistry(inv.args[0]) }},
		{name: "setting", args: []string{"NAME"}, help: "prints a setting of the cluster (NODE_REGISTRY, APISERVER_PORT, ...)",
			run: func(_ context.Context, ac *actionContext, inv invocation) error {
				v, ok := ac.cluster.Settings()[inv.args[0]]
				if !ok {
					return fmt.Errorf("no setting %q", inv.args[0])
				}
				return ac.println(v)
			}},
		{name: "settings", help: "prints every setting as NAME=value (the recorded ones, else the environment's)",
			run: func(_ context.Context, ac *actionContext, _ invocation) error {
				ac.warnEnvDiffers()
				return ac.println(settingLines(ac.cluster)...)
			}},
		{name: "write-config", help: "checks the control plane's ports are free, records the settings (localcluster.Config, from the environment) in the state directory, once",
			run: func(_ context.Context, ac *actionContext, _ invocation) error {
				if err := ac.portsFree(); err != nil {
					return err
				}
				return ac.writeConfig()
			}},
		{name: "state", help: "prints what the node changes on this machine, one fact a line (to compare before and after)",
			run: func(_ context.Context, ac *actionContext, _ invocation) error {
				lines, err := machineState()
				if err != nil {
					return err
				}
				return ac.println(lines...)
			}},
		{name: "up-network", help: "only the network's actions: the bridge, routes, iptables rules and sysctls",
			run: func(ctx context.Context, ac *actionContext, _ invocation) error { return ac.up(ctx, networkActions()) }},
		{name: "up-control-plane", help: "only the control plane's actions: certificates, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the bootstrap objects, the volume recycler",
			run: func(ctx context.Context, ac *actionContext, _ invocation) error {
				return ac.up(ctx, controlPlaneActions())
			}},
		{name: "up-node", help: "only the node's actions: the image registry, containerd, kubelet, kube-proxy, CoreDNS, metrics-server; waits until the node is Ready",
			run: func(ctx context.Context, ac *actionContext, _ invocation) error { return ac.up(ctx, nodeActions()) }},
		{name: "recycle-volumes", args: []string{"KUBECONFIG"}, help: "hands released volumes of the pool back, scrubbed (the volume-recycler daemon runs this)",
			run: func(ctx context.Context, ac *actionContext, inv invocation) error {
				return ac.recycleVolumes(ctx, inv.args[0])
			}},
	}
}

// parse finds the command argv[0] names in cmds and parses the rest: its
// positional arguments, then the flags, into fs. A missing or unknown
// command, a missing argument or one too many is errUsage.
func parse(cmds []command, argv []string, fs *flag.FlagSet) (command, []string, error) {
	if len(argv) == 0 {
		return command{}, nil, fmt.Errorf("%w: no command", errUsage)
	}
	switch argv[0] {
	case "help", "-h", "-help", "--help":
		return command{}, nil, fmt.Errorf("%w: %w", errUsage, flag.ErrHelp)
	}
	var cmd command
	for _, c := range cmds {
		if c.name == argv[0] {
			cmd = c
		}
	}
	if cmd.run == nil {
		return command{}, nil, fmt.Errorf("%w: unknown command %q", errUsage, argv[0])
	}
	rest := argv[1:]
	for i := range cmd.args {
		if i >= len(rest) || strings.HasPrefix(rest[i], "-") {
			return command{}, nil, fmt.Errorf("%w: %s needs %s", errUsage, cmd.name, strings.Join(cmd.args, " "))
		}
	}
	args := rest[:len(cmd.args)]
	if err := fs.Parse(rest[len(cmd.args):]); err != nil {
		return command{}, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return command{}, nil, fmt.Errorf("%w: %s takes %d arguments, got also %q", errUsage, cmd.name, len(cmd.args), fs.Args())
	}
	return cmd, args, nil
}

// usage lists the commands of cmds and the flags of fs.
func usage(w io.Writer, cmds []command, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: node COMMAND [ARGUMENTS] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.Join(append([]string{c.name}, c.args...), " "), c.help)
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// println prints lines to the command's output.
func (ac *actionContext) println(lines ...string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(ac.out, l); err != nil {
			return err
		}
	}
	return nil
}
