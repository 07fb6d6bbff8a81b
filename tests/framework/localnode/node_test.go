package localnode

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
)

const ns = "kyma-system"

// registryPod is the chart's registry Deployment, Services and what they
// mount (charts/serverless/templates/registry.yaml), trimmed to what
// running it here reads: an init container, the registry and the
// registry-agent sidecar, sharing the claim's volume.
func registryPod(volume string) []client.Object {
	labels := map[string]string{"app": "docker-registry", "release": "serverless"}
	data := corev1.VolumeMount{Name: "data", MountPath: "/var/lib/registry/"}
	regcred := corev1.VolumeMount{Name: "registry-credentials", MountPath: "/regcred", ReadOnly: true}
	htpasswd := corev1.VolumeMount{Name: "htpasswd-data", MountPath: "/data"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: module.RegistryServiceName},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "generate-htpasswd", Image: "europe-docker.pkg.dev/kyma-project/prod/registry-init:v1",
					VolumeMounts: []corev1.VolumeMount{regcred, htpasswd, data}}},
				Containers: []corev1.Container{
					{
						Name: "registry", Image: "europe-docker.pkg.dev/kyma-project/prod/external/library/registry:3.0.0",
						Args:  []string{"serve", "/etc/distribution/config.yml"},
						Ports: []corev1.ContainerPort{{Name: "http-registry", ContainerPort: 5000}},
						Env: []corev1.EnvVar{
							{Name: "REGISTRY_AUTH", Value: "htpasswd"}, {Name: "REGISTRY_AUTH_HTPASSWD_REALM", Value: "Registry Realm"},
							{Name: "REGISTRY_AUTH_HTPASSWD_PATH", Value: "/data/htpasswd"}, {Name: "REGISTRY_HTTP_SECRET", Value: "test"},
							{Name: "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY", Value: "/var/lib/registry"},
						},
						VolumeMounts: []corev1.VolumeMount{data, {Name: "config", MountPath: "/etc/distribution"}, htpasswd},
					},
					{
						Name: "registry-agent", Image: "europe-docker.pkg.dev/kyma-project/prod/serverless-registry-agent:1",
						Command: []string{"/" + module.RegistryAgent().Binary},
						Ports:   []corev1.ContainerPort{{Name: registryagent.PortName, ContainerPort: registryagent.Port}},
						Env: []corev1.EnvVar{
							{Name: registryagent.EnvAddress, Value: ":5002"},
							{Name: registryagent.EnvStorageRoot, Value: "/var/lib/registry"},
							{Name: registryagent.EnvCredentialsDir, Value: "/regcred"},
						},
						VolumeMounts: []corev1.VolumeMount{data, regcred},
					},
				},
				Volumes: []corev1.Volume{
					{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: module.RegistryPVCName}}},
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "serverless-docker-registry-config"}}}},
					{Name: "registry-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: module.RegistrySecretName,
						Items:      []corev1.KeyToPath{{Key: "username", Path: "username.txt"}, {Key: "password", Path: "password.txt"}}}}},
					{Name: "htpasswd-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		}},
	}
	service := func(name string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}}}}
	}
	return []client.Object{
		d,
		service(module.RegistryServiceName, 5000),
		service(module.RegistryAgentServiceName, registryagent.Port),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serverless-docker-registry-config"},
			Data: map[string]string{"config.yml": "version: 0.1\nlog:\n  level: warn\nstorage:\n  delete:\n    enabled: true\n  filesystem:\n    rootdirectory: /var/lib/registry\nhttp:\n  addr: :5000\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: module.RegistrySecretName},
			Data: map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: module.RegistryPVCName, UID: "claim-1"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: volume}}}},
	}
}

// compileBinary builds bin/<binary> of this checkout into dir, as
// `make build` would.
func compileBinary(t *testing.T, dir string, id module.Identity) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, id.Binary), id.Package)
	cmd.Dir = repo.MustRoot()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

// Every container of the registry Pod runs, each Service reaches the
// container that serves its target port, both see the same volume; a
// rollout restarts them all and the end of the run stops them all.
func TestRunDeploymentRunsEveryContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the registry agent and runs the registry")
	}
	assets := filepath.Join(repo.MustRoot(), "bin", "assets")
	if _, err := os.Stat(filepath.Join(assets, "registry")); err != nil {
		t.Fatalf("no registry in bin/assets: run `hack/tools.sh registry` first (%v)", err)
	}
	binDir, logDir := t.TempDir(), t.TempDir()
	compileBinary(t, binDir, module.RegistryAgent())
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(registryPod(t.TempDir())...).Build()
	network, err := StartNetwork()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, network.Close()) })
	var mu sync.Mutex
	var reported []string
	node := &Node{Client: c, BinDir: binDir, AssetsDir: assets, Dir: t.TempDir(), LogDir: logDir, Network: network,
		Report: func(err error) { mu.Lock(); defer mu.Unlock(); reported = append(reported, err.Error()) }}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the local node reported: %q", reported)
		}
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); node.RunDeployment(ctx, ns, module.RegistryServiceName) }()
	t.Cleanup(func() { stop(); <-done })

	registry := module.RegistryServiceName + "." + ns + ".svc.cluster.local:5000"
	agentAddr := module.RegistryAgentServiceName + "." + ns + ".svc:5002"
	require.Eventually(t, func() bool { return network.Reaches(registry) && network.Reaches(agentAddr) }, time.Minute, 100*time.Millisecond,
		"both Services routed")

	ref, err := name.ParseReference(registry+"/ns-fn:1", name.Insecure)
	require.NoError(t, err)
	img, err := random.Image(1024, 2)
	require.NoError(t, err)
	opts := []remote.Option{remote.WithTransport(network.Transport()), remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"})}
	require.Eventually(t, func() bool { return remote.Write(ref, img, opts...) == nil }, 30*time.Second, 200*time.Millisecond, "the registry takes a push")
	agent := &registryagent.Client{URL: "http://" + agentAddr, Username: "alice", Password: "s3cret",
		HTTP: &http.Client{Transport: network.Transport()}}
	var u registryagent.Usage
	require.Eventually(t, func() bool { u, err = agent.Usage(ctx); return err == nil }, 30*time.Second, 200*time.Millisecond, "the agent answers")
	assert.Equal(t, 1, u.TaggedImages, "the sidecar sees what the registry stored")

	// A rollout: every container starts again from the new template.
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, d))
	d.Spec.Template.Annotations = map[string]string{"rolled": "1"}
	require.NoError(t, c.Update(ctx, d))
	agentLog := filepath.Join(logDir, ns+"-"+module.RegistryServiceName+"-registry-agent.log")
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(agentLog)
		return strings.Count(string(data), `"serving"`) == 2
	}, time.Minute, 200*time.Millisecond, "the sidecar started again")
	require.Eventually(t, func() bool { u, err = agent.Usage(ctx); return err == nil }, 30*time.Second, 200*time.Millisecond, "the agent answers after the rollout")
	assert.Equal(t, 1, u.TaggedImages)
	_, err = remote.Get(ref, opts...)
	assert.NoError(t, err, "the registry answers after the rollout, from the same volume")
	assert.FileExists(t, filepath.Join(logDir, ns+"-"+module.RegistryServiceName+".log"), "the first container's log keeps its name")

	stop()
	<-done
	assert.False(t, network.Reaches(registry), "the registry stopped")
	assert.False(t, network.Reaches(agentAddr), "the sidecar stopped")
	mu.Lock()
	defer mu.Unlock()
	for _, line := range reported {
		assert.NotContains(t, line, "exited", "no container crashed")
	}
}
