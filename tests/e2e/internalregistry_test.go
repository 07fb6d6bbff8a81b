//go:build e2e

package e2e

// The chart's internal registry as the module installs it: its Deployment
// runs here as a process (tests/framework/localnode: distribution with the
// htpasswd its init container writes from the registry Secret, its volume
// the claim's host path), build steps reach it by its Service name, and
// runtime base images are stand-ins in it, as `make run` sets it up.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
	"github.com/kyma-project/serverless-manager/tests/framework/localnode"
)

func TestBuildsWithTheInternalRegistry(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	require.NoError(t, e.cluster.InstallManagerPrerequisites(ctx))
	pushAddress := module.RegistryServiceName + "." + ns + ".svc.cluster.local:5000"
	e.mgr = e.runManager("manager-"+t.Name(), []string{
		"IMAGE_FUNCTION_RUNTIME_NODEJS22=" + pushAddress + "/stand-in/function-runtime-nodejs22:e2e"})
	require.NoError(t, e.c.Create(ctx, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)}}}))
	e.waitState("default", v1alpha1.StateReady)

	network, err := localnode.StartNetwork()
	require.NoError(t, err)
	root := e.cluster.Root()
	node := &localnode.Node{Client: e.c, BinDir: filepath.Join(root, "bin"), AssetsDir: filepath.Join(root, "bin", "assets"),
		Dir: t.TempDir(), LogDir: e.cluster.LogDir(), Network: network,
		Report: func(err error) { t.Logf("local node: %v", err) }}
	runner := node.BuildRunner(os.Getenv("PATH"))
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); node.RunDeployment(runCtx, ns, module.RegistryServiceName) }()
	go func() {
		defer wg.Done()
		runner.Run(runCtx, func(err error) { t.Errorf("running a build Pod: %v", err) })
	}()
	// Registered after newEnv's, so it runs first: the registry and builds
	// stop before the module is uninstalled.
	t.Cleanup(func() { stop(); wg.Wait(); assert.NoError(t, network.Close()) })

	// The registry answers by its Service name with the chart's credentials
	// once its init step wrote them: the stand-in goes in.
	var pushed []string
	deadline := time.Now().Add(time.Minute)
	for len(pushed) == 0 {
		pushed, err = node.PushStandIns(ctx, ns)
		require.True(t, time.Now().Before(deadline), "the internal registry took no stand-in within a minute; last: %v", err)
		if len(pushed) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.Equal(t, []string{pushAddress + "/stand-in/function-runtime-nodejs22:e2e"}, pushed)

	b := &realBuilds{fnEnv: runFunctionController(t, e), runner: runner}
	fnNS := b.cluster.Namespace(t, "internalreg")
	fn := inline(fnNS, "hello", v1alpha2.RuntimeNodejs22, "hello")
	fn.Labels = map[string]string{buildrun.Label: buildrun.Value}
	fn.Spec.Source.Inline.Dependencies = `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(t, b.fcs.Create(ctx, fn))
	image := b.runningDigest(fnNS, "hello", "")
	res := b.buildOf(fnNS, "hello")
	install, _ := res.Step("dependencies")
	assert.Contains(t, install.Output, "added 1 package")
	t.Logf("build: %s; runs %s", stepTimes(res), image)

	// Nodes pull it by the pull address; it is in the registry behind the
	// Service, with the credentials of the registry Secret.
	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, secret))
	pull := string(secret.Data["pullRegAddr"])
	require.True(t, strings.HasPrefix(image, pull+"/"), "the Deployment pulls %s from the pull address %s", image, pull)
	ref, err := name.ParseReference(pushAddress+strings.TrimPrefix(image, pull), name.Insecure)
	require.NoError(t, err)
	_, err = remote.Get(ref, remote.WithTransport(network.Transport()),
		remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])}))
	require.NoError(t, err, "the built image is in the internal registry")
	_, err = remote.Get(ref, remote.WithTransport(network.Transport()))
	require.Error(t, err, "the internal registry refuses anonymous pulls")

	// The registry-agent sidecar runs beside it on the same volume: it sees
	// the stand-in, the Function's image and its kept dependency layer, and
	// its GC, with nothing deleted, keeps every blob.
	agent := &registryagent.Client{URL: "http://" + module.RegistryAgentServiceName + "." + ns + ".svc.cluster.local:5002",
		Username: string(secret.Data["username"]), Password: string(secret.Data["password"]),
		HTTP: &http.Client{Transport: network.Transport()}}
	usage, err := agent.Usage(ctx)
	require.NoError(t, err)
	t.Logf("registry usage: %+v", usage)
	assert.Equal(t, 3, usage.TaggedImages, "stand-in, Function image, dependency layer")
	assert.Positive(t, usage.UsedBytes)
	gc, err := agent.GC(ctx)
	require.NoError(t, err)
	t.Logf("registry GC: %+v", gc)
	assert.Zero(t, gc.BlobsDeleted, "every blob belongs to a tagged image")
	_, err = remote.Get(ref, remote.WithTransport(network.Transport()),
		remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])}))
	require.NoError(t, err, "the built image still pulls after the GC")
}
