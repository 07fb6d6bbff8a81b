package cleanup

import (
	"context"
	"errors"
	"slices"
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
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

type fakeRegistry struct {
	images  []Image
	deleted []string
	// asked are the repositories listed (nil: the whole registry).
	asked []string
}

// Images answers like a registry: only the repositories asked for.
func (r *fakeRegistry) Images(_ context.Context, repos []string) ([]Image, []string, error) {
	r.asked = repos
	if repos == nil {
		return r.images, nil, nil
	}
	var out []Image
	for _, img := range r.images {
		if slices.Contains(repos, img.Repository) {
			out = append(out, img)
		}
	}
	return out, nil, nil
}
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
		{name: "builds that keep running postpone the round", internal: "true", pauseErr: errors.New("2 builds left"),
			wantSkipped: "2 builds left", wantAgain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClient(t, running.DeepCopy(), runtimeCM.DeepCopy(), secret(tt.internal))
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

// An external registry is the user's: without the opt-in nothing is read
// or deleted; with it, only the repositories recorded as the module's (and
// those of existing Functions, recorded on the way) are listed, images by
// the same rules go, no garbage collection of ours runs, and repositories
// of departed Functions left empty leave the record.
func TestRoundExternal(t *testing.T) {
	const address = "ghcr.example/team"
	managed := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	running := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn-abcde", Labels: managed},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "function", Image: address + "/ns-fn:t2@sha256:b"}}}}}}
	fn := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistrySecretName},
		Data: map[string][]byte{"isInternal": []byte("false"), "registryAddress": []byte(address), "username": []byte("u"), "password": []byte("p")}}
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistryRepositoriesName},
		Data: map[string]string{"ns-gone": address, "ns-elsewhere": "other.example"}}
	stored := []Image{
		{Repository: "ns-fn", Digest: "sha256:a", Tags: []string{"t1"}, Layers: []string{"base", "srcA"}},
		{Repository: "ns-fn", Digest: "sha256:b", Tags: []string{"t2"}, Layers: []string{"base", "dep", "srcB"}},
		{Repository: "ns-fn/cache", Digest: "sha256:k", Tags: []string{"k"}, Layers: []string{"k"}},
		{Repository: "ns-gone", Digest: "sha256:g", Tags: []string{"t"}, Layers: []string{"base", "srcG"}},
		{Repository: "serverless-dependencies", Digest: "sha256:d", Tags: []string{"k"}, Layers: []string{"dep"}},
		// The user's own, not the module's: never listed.
		{Repository: "ns-elsewhere", Digest: "sha256:e", Tags: []string{"1"}},
		{Repository: "team-app", Digest: "sha256:u", Tags: []string{"1"}},
		{Repository: "ns-other", Digest: "sha256:o", Tags: []string{"1"}},
	}
	tests := []struct {
		name        string
		optIn       bool
		wantSkipped string
		wantAsked   []string
		wantDeleted []string
		wantRecord  map[string]string
	}{
		{name: "without the opt-in nothing is touched", wantSkipped: "the Function registry is external and dockerRegistry.deleteUnusedExternalImages is not set",
			wantRecord: record.Data},
		{name: "with the opt-in the module's repositories are cleaned by the same rules", optIn: true,
			wantAsked:   []string{"serverless-dependencies", "ns-fn", "ns-fn/cache", "ns-gone", "ns-gone/cache"},
			wantDeleted: []string{"ns-fn@sha256:a", "ns-fn/cache@sha256:k", "ns-gone@sha256:g"},
			wantRecord:  map[string]string{"ns-fn": address, "ns-elsewhere": "other.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClient(t, running.DeepCopy(), fn.DeepCopy(), secret.DeepCopy(), record.DeepCopy())
			reg, gc, builds := &fakeRegistry{images: stored}, &fakeGC{}, &fakeBuilds{}
			connected := 0
			cl := New(Cleaner{Reader: c, API: c, Builds: builds,
				Repositories: Repositories{Client: c, Namespace: "kyma-system"},
				Connect: func(address string, creds authn.Basic, insecure bool) (Registry, GarbageCollector, error) {
					connected++
					return reg, gc, nil
				},
				Config: &config.Config{BaseNamespace: "kyma-system", ImageRegistryDefaultDockerConfigSecretName: module.RegistrySecretName,
					RegistryCleanupExternal: tt.optIn},
				PauseFor: 1})
			res, err := cl.Round(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.wantSkipped, res.Skipped)
			assert.Equal(t, tt.wantAsked, reg.asked)
			assert.Equal(t, tt.wantDeleted, reg.deleted)
			assert.Zero(t, gc.calls, "no garbage collection in the user's registry")
			got := &corev1.ConfigMap{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(record), got))
			assert.Equal(t, tt.wantRecord, got.Data)
			if tt.wantSkipped != "" {
				assert.Zero(t, connected, "not even connected")
				return
			}
			assert.True(t, res.External)
			assert.Equal(t, 1, builds.resumed)
		})
	}
}

func TestRepositoriesRemember(t *testing.T) {
	c := fakeClient(t)
	r := Repositories{Client: c, Namespace: "kyma-system"}
	ctx := context.Background()
	require.NoError(t, r.Remember(ctx, "reg.example", "ns-a"), "the first record creates the ConfigMap")
	require.NoError(t, r.Remember(ctx, "reg.example", "ns-b", "ns-a"))
	require.NoError(t, r.Remember(ctx, "other.example", "ns-b"), "a new address replaces the old")
	require.NoError(t, r.Forget(ctx, "ns-a"))
	known, err := r.Known(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ns-b": "other.example"}, known)
}

// fakeClient serves objs, with Functions and the built-in kinds.
func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}
