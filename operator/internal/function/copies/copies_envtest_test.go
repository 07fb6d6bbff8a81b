package copies_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/copies"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const (
	baseNS     = "kyma-system"
	secretName = "serverless-registry-config-default"
	saName     = "serverless-function"
	wait       = 15 * time.Second
	tick       = 50 * time.Millisecond
)

// request is one request the controller sent, as the API server answered it.
type request struct {
	method, path string
	status       int
}

func (r request) String() string { return fmt.Sprintf("%s %s → %d", r.method, r.path, r.status) }

// requestLog records the controller's writes (every method but GET).
type requestLog struct {
	mu     sync.Mutex
	writes []request
}

func (l *requestLog) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if req.Method != http.MethodGet && err == nil {
			l.mu.Lock()
			l.writes = append(l.writes, request{req.Method, req.URL.Path, resp.StatusCode})
			l.mu.Unlock()
		}
		return resp, err
	})
}

func (l *requestLog) Writes() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.writes...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startController runs a manager with the Function controller's cache and
// only the copies reconciler; it stops when stop is called or owner ends.
func startController(t, owner *testing.T, restCfg *rest.Config, cfg *config.Config) (log *requestLog, stop func()) {
	t.Helper()
	log = &requestLog{}
	rc := rest.CopyConfig(restCfg)
	rc.WrapTransport = log.RoundTrip
	scheme, err := app.NewScheme()
	require.NoError(t, err)
	cacheOpts, err := app.CacheOptions(cfg)
	require.NoError(t, err)
	mgr := testenv.NewManager(t, rc, ctrl.Options{Scheme: scheme, Cache: cacheOpts, Logger: logr.Discard()})
	require.NoError(t, copies.New(mgr.GetClient(), mgr.GetAPIReader(), cfg).SetupWithManager(mgr))
	stop = testenv.RunManager(owner, mgr)
	owner.Cleanup(stop)
	return log, stop
}

func TestCopies(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	scheme, err := app.NewScheme()
	require.NoError(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := context.Background()

	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := map[string]string{config.EnvExcludedNamespaces: baseNS + ",excluded"}[k]
		return v, ok
	})
	require.NoError(t, err)
	require.Equal(t, baseNS, cfg.BaseNamespace)

	for _, n := range []string{baseNS, "excluded", "fn-a", "fn-b", "fn-c", "fn-user", "fn-old", "doomed", "empty"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	baseMeta := func(name, cfgValue string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: baseNS,
			Labels:      map[string]string{v1alpha2.LabelConfig: cfgValue, "app.kubernetes.io/version": "1.9.0"},
			Annotations: map[string]string{"meta.helm.sh/release-name": "serverless"}}
	}
	bases := []client.Object{
		&corev1.ConfigMap{ObjectMeta: baseMeta("dockerfile-nodejs22", v1alpha2.ConfigRuntime),
			Data: map[string]string{"Dockerfile": "ARG base_image=node:22\nFROM ${base_image}\n"}},
		&corev1.ConfigMap{ObjectMeta: baseMeta("dockerfile-python312", v1alpha2.ConfigRuntime),
			Data: map[string]string{"Dockerfile": "ARG base_image=python:3.12\nFROM ${base_image}\n"}},
		&corev1.Secret{ObjectMeta: baseMeta(secretName, v1alpha2.ConfigCredentials), Type: corev1.SecretTypeDockerConfigJson,
			StringData: map[string]string{".dockerconfigjson": `{"auths":{}}`, "isInternal": "true", "password": "one"}},
		&corev1.ServiceAccount{ObjectMeta: baseMeta(saName, v1alpha2.ConfigServiceAccount),
			ImagePullSecrets:             []corev1.LocalObjectReference{{Name: secretName}},
			AutomountServiceAccountToken: ptr.To(false)},
		// Not bases: another credentials Secret, an unlabelled ConfigMap.
		&corev1.Secret{ObjectMeta: baseMeta("other-registry", v1alpha2.ConfigCredentials), StringData: map[string]string{"x": "y"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "serverless-configuration", Namespace: baseNS}},
	}
	for _, b := range bases {
		require.NoError(t, c.Create(ctx, b))
	}

	// A user's registry Secret and a Dockerfile copy left by 1.8.4 (no
	// managed-by label, stale content) wait in fn-user.
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "fn-user",
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials, v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}},
		Type: corev1.SecretTypeDockerConfigJson, StringData: map[string]string{".dockerconfigjson": `{"auths":{"mine":{}}}`}}
	require.NoError(t, c.Create(ctx, userSecret))
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dockerfile-nodejs22", Namespace: "fn-user",
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}}, Data: map[string]string{"Dockerfile": "old"}}))

	// A registry Secret copy left by 1.8.4 with another type (immutable).
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: "fn-old",
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials}}, Type: corev1.SecretTypeOpaque,
		StringData: map[string]string{"isInternal": "true"}}))

	log, stop := startController(t, t, env.Config, &cfg)

	f := &fixture{t: t, ctx: ctx, c: c}
	parent := t

	t.Run("first Function of a namespace: every copy", func(t *testing.T) {
		f.t = t
		f.createFunction("fn-a", "one")
		f.eventuallyCopies("fn-a", "dockerfile-nodejs22", "dockerfile-python312")
		f.noCopies("empty")
		assert.False(t, f.exists(&corev1.Secret{}, "fn-a", "other-registry"), "only the registry Secret is copied")
		f.createFunction("fn-b", "one")
		f.eventuallyCopies("fn-b", "dockerfile-nodejs22", "dockerfile-python312")
	})

	t.Run("excluded and base namespaces: no copies, bases untouched", func(t *testing.T) {
		f.t = t
		f.createFunction("excluded", "one")
		f.createFunction(baseNS, "one")
		// A later namespace served proves the earlier requests were handled.
		f.createFunction("fn-c", "one")
		f.eventuallyCopies("fn-c", "dockerfile-nodejs22", "dockerfile-python312")
		f.noCopies("excluded")
		for _, b := range bases[:4] {
			live := b.DeepCopyObject().(client.Object)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(b), live))
			assert.NotContains(t, live.GetLabels(), v1alpha2.LabelManagedBy, live.GetName())
			assert.Empty(t, live.GetFinalizers(), "bases get no finalizer: %s", live.GetName())
		}
	})

	t.Run("1.8.4 copy adopted, user's Secret left alone", func(t *testing.T) {
		f.t = t
		f.createFunction("fn-user", "one")
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			f.assertCopy(ct, &corev1.ConfigMap{}, "fn-user", "dockerfile-nodejs22")
			f.assertCopy(ct, &corev1.ConfigMap{}, "fn-user", "dockerfile-python312")
			f.assertCopy(ct, &corev1.ServiceAccount{}, "fn-user", saName)
		}, wait, tick)
		f.assertUserSecret()
	})

	t.Run("1.8.4 copy of another Secret type: created anew", func(t *testing.T) {
		f.t = t
		f.createFunction("fn-old", "one")
		f.eventuallyCopies("fn-old", "dockerfile-nodejs22", "dockerfile-python312")
	})

	t.Run("terminating namespace: copies left as they are", func(t *testing.T) {
		f.t = t
		f.createFunction("doomed", "one")
		f.eventuallyCopies("doomed", "dockerfile-nodejs22", "dockerfile-python312")
		// envtest runs no namespace controller: the namespace stays
		// Terminating with its content.
		require.NoError(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}))
	})

	t.Run("base Secret and Dockerfile edited: copies follow", func(t *testing.T) {
		f.t = t
		f.edit(&corev1.Secret{}, baseNS, secretName, func(o client.Object) {
			s := o.(*corev1.Secret)
			s.Data["password"] = []byte("two")
			s.Labels["rotated"] = "yes"
		})
		f.edit(&corev1.ConfigMap{}, baseNS, "dockerfile-nodejs22", func(o client.Object) {
			o.(*corev1.ConfigMap).Data["Dockerfile"] = "ARG base_image=node:22.1\nFROM ${base_image}\n"
		})
		for _, n := range []string{"fn-a", "fn-b", "fn-c", "fn-old"} {
			f.eventuallyCopies(n, "dockerfile-nodejs22", "dockerfile-python312")
			s := &corev1.Secret{}
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: n, Name: secretName}, s))
			assert.Equal(t, "two", string(s.Data["password"]))
		}
		f.assertUserSecret()
		// The terminating namespace was in the same fan-out.
		time.Sleep(500 * time.Millisecond)
		s := &corev1.Secret{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "doomed", Name: secretName}, s))
		assert.Equal(t, "one", string(s.Data["password"]), "copy in a terminating namespace untouched")
	})

	t.Run("copy deleted: restored", func(t *testing.T) {
		f.t = t
		s := &corev1.Secret{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "fn-a", Name: secretName}, s))
		require.NoError(t, c.Delete(ctx, s))
		require.Eventually(t, func() bool {
			again := &corev1.Secret{}
			return c.Get(ctx, client.ObjectKeyFromObject(s), again) == nil && again.UID != s.UID
		}, wait, tick)
		f.eventuallyCopies("fn-a", "dockerfile-nodejs22", "dockerfile-python312")
	})

	t.Run("copy edited: restored", func(t *testing.T) {
		f.t = t
		f.edit(&corev1.ConfigMap{}, "fn-a", "dockerfile-python312", func(o client.Object) {
			o.(*corev1.ConfigMap).Data["Dockerfile"] = "FROM evil"
			o.GetLabels()["extra"] = "x"
		})
		f.edit(&corev1.ServiceAccount{}, "fn-a", saName, func(o client.Object) {
			o.(*corev1.ServiceAccount).ImagePullSecrets = nil
			o.(*corev1.ServiceAccount).AutomountServiceAccountToken = ptr.To(true)
		})
		f.eventuallyCopies("fn-a", "dockerfile-nodejs22", "dockerfile-python312")
	})

	t.Run("restart: no write", func(t *testing.T) {
		f.t = t
		stop()
		// Runs for the rest of the test.
		log2, _ := startController(t, parent, env.Config, &cfg)
		// A Function in a namespace without copies is served after the
		// passes the restart queued (one worker, requests in order).
		f.createFunction("empty", "one")
		f.eventuallyCopies("empty", "dockerfile-nodejs22", "dockerfile-python312")
		time.Sleep(time.Second)
		var others []request
		for _, w := range log2.Writes() {
			if !strings.Contains(w.path, "/namespaces/empty/") {
				others = append(others, w)
			}
		}
		// The user's Secret is cached: no create is tried for it.
		assert.Empty(t, others, "writes after the restart besides the new namespace's copies")
		assert.Len(t, log2.Writes(), 4, "four copies created in the new namespace: %v", log2.Writes())
		// Before the restart, every write succeeded but the creates that
		// found the 1.8.4 copies and the user's Secret: no
		// pass wrote twice because the cache lagged behind its last write.
		require.NotEmpty(t, log.Writes(), "the first controller wrote (the log works)")
		for _, w := range log.Writes() {
			assert.NotEqual(t, "/api/v1/namespaces/fn-user/secrets", w.path, "the user's Secret is cached: no create tried")
			if w.method == http.MethodPost && w.status == http.StatusConflict &&
				(strings.HasPrefix(w.path, "/api/v1/namespaces/fn-user/") || w.path == "/api/v1/namespaces/fn-old/secrets") {
				continue
			}
			assert.Less(t, w.status, 300, "%v", w)
		}
		f.assertUserSecret()
	})

	t.Run("base deleted: its copies go", func(t *testing.T) {
		f.t = t
		require.NoError(t, c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: baseNS, Name: "dockerfile-python312"}}))
		for _, n := range []string{"fn-a", "fn-b", "fn-c", "empty"} {
			f.eventuallyCopies(n, "dockerfile-nodejs22")
		}
		require.Eventually(t, func() bool {
			return !f.exists(&corev1.ConfigMap{}, "fn-user", "dockerfile-python312")
		}, wait, tick)
		assert.True(t, f.exists(&corev1.ConfigMap{}, "fn-user", "dockerfile-nodejs22"))
		f.assertUserSecret()
	})

	t.Run("last Function gone: copies gone, user's Secret stays", func(t *testing.T) {
		f.t = t
		f.createFunction("fn-a", "two")
		f.deleteFunction("fn-a", "one")
		f.deleteFunction("fn-b", "one")
		f.deleteFunction("fn-user", "one")
		f.eventuallyNoCopies("fn-b")
		f.eventuallyNoCopies("fn-user")
		f.assertUserSecret()
		f.eventuallyCopies("fn-a", "dockerfile-nodejs22")
		f.deleteFunction("fn-a", "two")
		f.eventuallyNoCopies("fn-a")
	})

	t.Run("user deletes the Secret they took over: the copy comes at once", func(t *testing.T) {
		f.t = t
		f.createFunction("fn-user", "two")
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			f.assertCopy(ct, &corev1.ConfigMap{}, "fn-user", "dockerfile-nodejs22")
			f.assertCopy(ct, &corev1.ServiceAccount{}, "fn-user", saName)
		}, wait, tick)
		f.assertUserSecret()
		require.NoError(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fn-user", Name: secretName}}))
		f.eventuallyCopies("fn-user", "dockerfile-nodejs22")
	})
}

type fixture struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
}

func (f *fixture) createFunction(ns, name string) {
	f.t.Helper()
	require.NoError(f.t, f.c.Create(f.ctx, &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22,
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'hi' }"}}},
	}))
}

func (f *fixture) deleteFunction(ns, name string) {
	f.t.Helper()
	require.NoError(f.t, f.c.Delete(f.ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
}

func (f *fixture) exists(obj client.Object, ns, name string) bool {
	err := f.c.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	require.True(f.t, err == nil || apierrors.IsNotFound(err), "%v", err)
	return err == nil
}

func (f *fixture) edit(obj client.Object, ns, name string, change func(client.Object)) {
	f.t.Helper()
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		change(obj)
		return f.c.Update(f.ctx, obj)
	}))
}

// eventuallyCopies waits until ns holds exactly the copies of the registry
// Secret, the ServiceAccount and the named Dockerfiles, equal to their bases.
func (f *fixture) eventuallyCopies(ns string, dockerfiles ...string) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		for _, d := range dockerfiles {
			f.assertCopy(ct, &corev1.ConfigMap{}, ns, d)
		}
		f.assertCopy(ct, &corev1.Secret{}, ns, secretName)
		f.assertCopy(ct, &corev1.ServiceAccount{}, ns, saName)
		cms := &corev1.ConfigMapList{}
		require.NoError(ct, f.c.List(f.ctx, cms, client.InNamespace(ns), client.HasLabels{v1alpha2.LabelConfig}))
		var names []string
		for _, cm := range cms.Items {
			names = append(names, cm.Name)
		}
		assert.ElementsMatch(ct, dockerfiles, names)
	}, wait, tick)
}

// assertCopy compares a copy with its base, field by copied field.
func (f *fixture) assertCopy(ct *assert.CollectT, obj client.Object, ns, name string) {
	base := obj.DeepCopyObject().(client.Object)
	if !assert.NoError(ct, f.c.Get(f.ctx, client.ObjectKey{Namespace: baseNS, Name: name}, base)) ||
		!assert.NoError(ct, f.c.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)) {
		return
	}
	wantLabels := maps.Clone(base.GetLabels())
	wantLabels[v1alpha2.LabelManagedBy] = v1alpha2.ManagedByController
	assert.Equal(ct, wantLabels, obj.GetLabels(), "%s/%s labels", ns, name)
	assert.Equal(ct, base.GetAnnotations(), obj.GetAnnotations(), "%s/%s annotations", ns, name)
	assert.Empty(ct, obj.GetOwnerReferences())
	assert.Empty(ct, obj.GetFinalizers())
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		assert.Equal(ct, base.(*corev1.ConfigMap).Data, o.Data, "%s/%s data", ns, name)
	case *corev1.Secret:
		assert.Equal(ct, base.(*corev1.Secret).Data, o.Data, "%s/%s data", ns, name)
		assert.Equal(ct, base.(*corev1.Secret).Type, o.Type)
	case *corev1.ServiceAccount:
		assert.Equal(ct, base.(*corev1.ServiceAccount).ImagePullSecrets, o.ImagePullSecrets, "%s/%s pull secrets", ns, name)
		assert.Equal(ct, ptr.To(false), o.AutomountServiceAccountToken)
	}
}

func (f *fixture) noCopies(ns string) {
	f.t.Helper()
	for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}} {
		require.NoError(f.t, f.c.List(f.ctx, l, client.InNamespace(ns), client.HasLabels{v1alpha2.LabelConfig}))
		items, err := metaItems(l)
		require.NoError(f.t, err)
		assert.Empty(f.t, items, "copies in %s", ns)
	}
}

func (f *fixture) eventuallyNoCopies(ns string) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}} {
			require.NoError(ct, f.c.List(f.ctx, l, client.InNamespace(ns),
				client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}, client.HasLabels{v1alpha2.LabelConfig}))
			items, err := metaItems(l)
			require.NoError(ct, err)
			assert.Empty(ct, items, "copies in %s", ns)
		}
	}, wait, tick)
}

// assertUserSecret checks that the user's registry Secret is as created.
func (f *fixture) assertUserSecret() {
	f.t.Helper()
	s := &corev1.Secret{}
	require.NoError(f.t, f.c.Get(f.ctx, client.ObjectKey{Namespace: "fn-user", Name: secretName}, s))
	assert.Equal(f.t, `{"auths":{"mine":{}}}`, string(s.Data[".dockerconfigjson"]))
	assert.Equal(f.t, v1alpha2.ManagedByUser, s.Labels[v1alpha2.LabelManagedBy])
	assert.Len(f.t, s.Data, 1)
}

func metaItems(l client.ObjectList) ([]string, error) {
	var names []string
	switch l := l.(type) {
	case *corev1.ConfigMapList:
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
	case *corev1.SecretList:
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
	case *corev1.ServiceAccountList:
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", l)
	}
	return names, nil
}
