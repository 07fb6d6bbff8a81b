//go:build e2e

package e2e

// What a user of the module sees on a cluster whose Pods really run: the
// module installed as Kyma installs it (the manager's own Deployment, from
// its image) with every Pod Ready by its real probes, and Functions that
// answer HTTP requests with what their code, dependencies and Secrets give
// them.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// `make run`'s path: the rendered manifest installs the manager, whose Pod
// brings the CR for a small cluster to Ready with the Function controller and the
// internal registry as Pods; every container of the three passed its own
// readiness probe and none restarted. The sample Function of
// config/samples builds with its npm dependency in a real build Pod, is
// pulled by the node through the registry's NodePort and answers.
func TestModuleRunsOnTheRealNode(t *testing.T) {
	e, _ := startManagerInCluster(t)
	ctx := t.Context()
	e.applySample("small-cluster-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)

	node := e.cluster.Setting("NODE_NAME")
	for _, d := range []string{"serverless-manager", controllerName, registryName} {
		var pods corev1.PodList
		require.NoError(t, e.c.List(ctx, &pods, client.InNamespace(ns)))
		var ours []corev1.Pod
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, d+"-") && p.DeletionTimestamp == nil {
				ours = append(ours, p)
			}
		}
		require.Len(t, ours, 1, "one Pod of Deployment %s", d)
		p := ours[0]
		assert.Equal(t, node, p.Spec.NodeName, "%s runs on the real node", p.Name)
		for _, c := range p.Spec.Containers {
			assert.NotNil(t, c.ReadinessProbe, "%s/%s has a readiness probe", p.Name, c.Name)
		}
		require.Len(t, p.Status.ContainerStatuses, len(p.Spec.Containers))
		for _, cs := range p.Status.ContainerStatuses {
			assert.True(t, cs.Ready, "%s/%s passed its readiness probe", p.Name, cs.Name)
			assert.NotNil(t, cs.State.Running, "%s/%s runs", p.Name, cs.Name)
			assert.Zero(t, cs.RestartCount, "%s/%s never restarted", p.Name, cs.Name)
			assert.NotEmpty(t, cs.ImageID, "%s/%s: the node pulled its image", p.Name, cs.Name)
		}
	}

	f := newFnEnv(t, e)
	fnNS := f.cluster.Namespace(t, "sample")
	data, err := os.ReadFile(filepath.Join(e.cluster.Root(), "config", "samples", "function-sample.yaml"))
	require.NoError(t, err)
	fn := &v1alpha2.Function{}
	require.NoError(t, yaml.Unmarshal(data, fn))
	fn.Namespace = fnNS
	require.NoError(t, f.fcs.Create(ctx, fn))
	f.waitRunning(fnNS, fn.Name)
	answer := f.cluster.WaitForAnswer(t, time.Minute, fnNS, fn.Name, "/", func(body string) bool {
		return strings.Contains(body, "is-number(42) is true")
	}, f.dumpsFor(fnNS, fn.Name)...)
	t.Logf("the sample answers %q", answer.Body)
}

// A Function's handler sees env taken from a Secret and a Secret mounted
// as files (secretMounts), in both runtimes; the values stay out of the
// Function's image, status and events.
func testFunctionSeesItsSecrets(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "secrets")
	const (
		envValue  = "from-the-secret-env-4711"
		fileValue = "from-the-mounted-file-0815"
	)
	require.NoError(t, f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: "creds"},
		StringData: map[string]string{"api-key": envValue, "token": fileValue}}))

	sources := map[v1alpha2.Runtime]string{
		v1alpha2.RuntimeNodejs22: `const fs = require("fs");
module.exports = { main: function () {
  return process.env.API_KEY + " " + fs.readFileSync("/etc/creds/token", "utf8");
} };
`,
		v1alpha2.RuntimePython312: `import os

def main(event, context):
    with open("/etc/creds/token") as f:
        return os.environ["API_KEY"] + " " + f.read()
`,
	}
	for rt, source := range sources {
		fn := inline(fnNS, "secrets-"+string(rt), rt, "")
		fn.Spec.Source.Inline.Source = source
		fn.Spec.Env = []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "api-key"}}}}
		fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: "creds", MountPath: "/etc/creds"}}
		require.NoError(t, f.fcs.Create(ctx, fn))
	}
	for rt := range sources {
		name := "secrets-" + string(rt)
		running := f.waitRunning(fnNS, name)
		f.cluster.WaitForAnswer(t, time.Minute, fnNS, name, "/", func(body string) bool {
			return body == envValue+" "+fileValue
		}, f.dumpsFor(fnNS, name)...)
		status, err := yaml.Marshal(running.Status)
		require.NoError(t, err)
		assert.NotContains(t, string(status), envValue, "%s: no Secret value in the status", name)
		assert.NotContains(t, string(status), fileValue, "%s: no Secret value in the status", name)
	}
	var events corev1.EventList
	require.NoError(t, f.c.List(ctx, &events, client.InNamespace(fnNS)))
	for _, ev := range events.Items {
		assert.NotContains(t, ev.Message, envValue, "event %s", ev.Name)
		assert.NotContains(t, ev.Message, fileValue, "event %s", ev.Name)
	}
	// A changed Secret reaches the mounted file without a rebuild or a
	// restart (kubelet refreshes Secret volumes).
	name := "secrets-" + string(v1alpha2.RuntimeNodejs22)
	before := f.functionPods(name, fnNS)
	secret := &corev1.Secret{}
	require.NoError(t, f.c.Get(ctx, client.ObjectKey{Namespace: fnNS, Name: "creds"}, secret))
	secret.Data["token"] = []byte("rotated")
	require.NoError(t, f.c.Update(ctx, secret))
	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, name, "/", func(body string) bool {
		return body == envValue+" rotated"
	}, f.dumpsFor(fnNS, name)...)
	f.requireJobsStay(fnNS, name, 1, "a Secret change builds nothing")
	assert.Equal(t, before, f.functionPods(name, fnNS), "the same Pod, not restarted")
}

// functionPods are the UIDs and restart counts of the Function's Pods that
// are not being deleted.
func (f *fnEnv) functionPods(name, ns string) map[string]int32 {
	f.t.Helper()
	var pods corev1.PodList
	require.NoError(f.t, f.c.List(f.t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}))
	out := map[string]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Labels["job-name"] != "" {
			continue
		}
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[string(p.UID)] = restarts
	}
	return out
}
