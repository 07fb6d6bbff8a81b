package cleanup

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

type fakeRegistry struct {
	images  []Image
	deleted []string
}

func (r *fakeRegistry) Images(context.Context) ([]Image, error) { return r.images, nil }
func (r *fakeRegistry) Delete(_ context.Context, img Image) error {
	r.deleted = append(r.deleted, img.Repository+"@"+img.Digest)
	return nil
}

type fakeGC struct{ calls int }

func (g *fakeGC) GC(context.Context) (registryagent.GCResult, error) {
	g.calls++
	return registryagent.GCResult{BytesBefore: 100, BytesAfter: 60}, nil
}

type fakeBuilds struct {
	err             error
	paused, resumed int
}

func (b *fakeBuilds) Pause(context.Context) (func(), error) {
	if b.err != nil {
		return nil, b.err
	}
	b.paused++
	return func() { b.resumed++ }, nil
}

func TestRound(t *testing.T) {
	const push, pull = "reg.kyma-system.svc.cluster.local:5000", "localhost:32137"
	managed := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	running := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn", Labels: managed},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "function", Image: pull + "/ns-fn:t2@sha256:b"}}}}}}
	runtimeCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "dockerfile-nodejs22",
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}},
		Data: map[string]string{"Dockerfile": "ARG base_image=" + push + "/base:1\nFROM ${base_image}\n"}}
	secret := func(internal string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "serverless-registry-config-default"},
			Data: map[string][]byte{"isInternal": []byte(internal), "pushRegAddr": []byte(push), "pullRegAddr": []byte(pull),
				"registryAddress": []byte("ext.example"), "username": []byte("u"), "password": []byte("p")}}
	}
	stored := []Image{
		{Repository: "ns-fn", Digest: "sha256:a", Tags: []string{"t1"}, Layers: []string{"base", "depOld", "srcA"}},
		{Repository: "ns-fn", Digest: "sha256:b", Tags: []string{"t2"}, Layers: []string{"base", "dep", "srcB"}},
		{Repository: "serverless-dependencies", Digest: "sha256:d", Tags: []string{"k"}, Layers: []string{"dep"}},
		{Repository: "serverless-dependencies", Digest: "sha256:o", Tags: []string{"old"}, Layers: []string{"depOld"}},
		{Repository: "base", Digest: "sha256:base", Tags: []string{"1"}, Layers: []string{"base"}},
	}
	tests := []struct {
		name        string
		internal    string
		pauseErr    error
		wantDeleted []string
		wantSkipped string
		wantAgain   bool
	}{
		{name: "deletes what nothing refers to, then collects", internal: "true",
			wantDeleted: []string{"ns-fn@sha256:a", "serverless-dependencies@sha256:o"}},
		{name: "an external registry is not cleaned", internal: "false", wantSkipped: "the Function registry is external"},
		{name: "builds that keep running postpone the round", internal: "true", pauseErr: errors.New("2 builds left"),
			wantSkipped: "2 builds left", wantAgain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, clientgoscheme.AddToScheme(s))
			require.NoError(t, v1alpha2.AddToScheme(s))
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(running.DeepCopy(), runtimeCM.DeepCopy(), secret(tt.internal)).Build()
			reg, gc, builds := &fakeRegistry{images: stored}, &fakeGC{}, &fakeBuilds{err: tt.pauseErr}
			var connected []string
			cl := New(Cleaner{Reader: c, API: c, Builds: builds,
				Connect: func(address string, creds authn.Basic, insecure bool) (Registry, GarbageCollector, error) {
					connected = append(connected, address, creds.Username, creds.Password)
					return reg, gc, nil
				},
				Config: &config.Config{BaseNamespace: "kyma-system", ImageRegistryDefaultDockerConfigSecretName: "serverless-registry-config-default",
					Build: config.BuildConfig{ExecutorArgs: []string{"--insecure"}}},
				PauseFor: 1})
			res, err := cl.Round(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.wantSkipped, res.Skipped)
			assert.Equal(t, tt.wantAgain, res.Again)
			assert.Equal(t, tt.wantDeleted, reg.deleted)
			if tt.wantSkipped != "" {
				assert.Zero(t, gc.calls)
				assert.Zero(t, builds.resumed)
				return
			}
			assert.Equal(t, []string{push, "u", "p"}, connected, "the push address with the registry's credentials")
			assert.Equal(t, 1, gc.calls, "garbage collected after the deletes")
			assert.Equal(t, 1, builds.paused)
			assert.Equal(t, 1, builds.resumed, "builds resume")
			require.NotNil(t, res.GC)
			assert.Len(t, res.Kept, 3, "the running image, its dependency layer, the runtime base")
		})
	}
}

// In buildless mode a round pauses nothing and keeps only what Deployments
// run: after a switch every image the build mode pushed goes (the runtime
// images come from upstream's registry). Without the registry Secret there
// is nothing to clean.
func TestRoundBuildless(t *testing.T) {
	const push, pull = "reg.kyma-system.svc.cluster.local:5000", "localhost:32137"
	managed := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	deployment := func(name, image string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: managed},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "function", Image: image}}}}}}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "serverless-registry-config-default"},
		Data: map[string][]byte{"isInternal": []byte("true"), "pushRegAddr": []byte(push), "pullRegAddr": []byte(pull),
			"username": []byte("u"), "password": []byte("p")}}
	stored := []Image{
		{Repository: "ns-switched", Digest: "sha256:a", Tags: []string{"t1"}, Layers: []string{"base", "dep", "srcA"}},
		{Repository: "ns-override", Digest: "sha256:o", Tags: []string{"v1"}, Layers: []string{"x"}},
		{Repository: "serverless-dependencies", Digest: "sha256:d", Tags: []string{"k"}, Layers: []string{"dep"}},
	}
	cfg := &config.Config{Mode: config.ModeBuildless, BaseNamespace: "kyma-system",
		ImageRegistryDefaultDockerConfigSecretName: "serverless-registry-config-default"}
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	objs := func(extra ...client.Object) *fake.ClientBuilder {
		return fake.NewClientBuilder().WithScheme(s).WithObjects(append(extra,
			deployment("switched", "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:1.13.0"),
			deployment("override", pull+"/ns-override:v1"))...)
	}
	reg := &fakeRegistry{images: stored}
	connect := func(string, authn.Basic, bool) (Registry, GarbageCollector, error) { return reg, nil, nil }

	c := objs(secret).Build()
	res, err := New(Cleaner{Reader: c, API: c, Connect: connect, Config: cfg}).Round(context.Background())
	require.NoError(t, err)
	assert.Empty(t, res.Skipped)
	assert.Equal(t, []string{"ns-switched@sha256:a", "serverless-dependencies@sha256:d"}, reg.deleted)

	c = objs().Build()
	res, err = New(Cleaner{Reader: c, API: c, Connect: connect, Config: cfg}).Round(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "no registry Secret kyma-system/serverless-registry-config-default", res.Skipped)
}
