// Command localnode makes this machine the node of the local cluster for
// what `make run` must really run (see tests/framework/localnode): the
// chart's internal registry Deployment as a process (distribution from
// bin/assets, its htpasswd written from the registry Secret as its init
// container does, its volume the claim's host path, and its registry-agent
// sidecar from bin/registry-agent), its Service names reachable from
// build steps, build Pods of Functions labelled
// local.serverless.kyma-project.io/build=process run step by step, and
// stand-ins for the runtime base images that the manager was pointed at in
// the internal registry. It stays in the foreground until SIGINT/SIGTERM.
//
//	go run ./hack/localnode [-namespace kyma-system]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
	"github.com/kyma-project/serverless-manager/tests/framework/localnode"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localnode:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	namespace := flag.String("namespace", module.DefaultNamespace, "namespace of the module")
	flag.Parse()
	c, err := framework.AdminClient(root)
	if err != nil {
		return err
	}
	network, err := localnode.StartNetwork()
	if err != nil {
		return err
	}
	defer func() { _ = network.Close() }()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "localnode %s: "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	node := &localnode.Node{
		Client: c, BinDir: filepath.Join(root, "bin"), AssetsDir: filepath.Join(root, "bin", "assets"),
		Dir: filepath.Join(root, ".cluster", "localnode"), LogDir: filepath.Join(root, ".cluster", "logs"),
		Network: network, Report: func(err error) { logf("%v", err) },
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		node.RunDeployment(ctx, *namespace, module.RegistryServiceName)
	}()
	runner := node.BuildRunner(os.Getenv("PATH"))
	go func() {
		defer wg.Done()
		runner.Run(ctx, node.Report)
	}()
	go func() {
		defer wg.Done()
		keepStandIns(ctx, node, *namespace, logf)
	}()
	logPrefix := filepath.Join(node.LogDir, *namespace+"-"+module.RegistryServiceName)
	logf("Service names resolve through the proxy %s", network.URL())
	logf("running %s/%s and build Pods labelled for it; registry log: %s.log, its agent's: %s-registry-agent.log",
		*namespace, module.RegistryServiceName, logPrefix, logPrefix)
	go reportBuilds(ctx, runner.Results, logf)
	wg.Wait()
	return nil
}

// keepStandIns pushes the runtime stand-ins whenever one is missing (a new
// registry volume starts empty).
func keepStandIns(ctx context.Context, node *localnode.Node, namespace string, logf func(string, ...any)) {
	last := ""
	for {
		pushed, err := node.PushStandIns(ctx, namespace)
		if len(pushed) > 0 {
			logf("pushed runtime stand-ins %s", strings.Join(pushed, ", "))
		}
		if err != nil && err.Error() != last && ctx.Err() == nil {
			logf("runtime stand-ins: %v", err) // retried: the registry may still be starting
		}
		last = fmt.Sprint(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// reportBuilds logs every build Pod once it has run.
func reportBuilds(ctx context.Context, results func() map[string]buildrun.Result, logf func(string, ...any)) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		names := []string{}
		all := results()
		for name := range all {
			if !seen[name] {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			seen[name] = true
			res := all[name]
			var steps []string
			for _, s := range res.Steps {
				steps = append(steps, fmt.Sprintf("%s %.2fs exit %d", s.Name, s.Duration.Seconds(), s.ExitCode))
			}
			logf("build Pod %s %s: %s", name, res.Phase, strings.Join(steps, ", "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
