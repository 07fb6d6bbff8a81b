package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/upstreamtest"
)

// The fixtures follow the same facts of serverless-operator as the manager.
func TestUpstreamFactsAgree(t *testing.T) {
	assert.Equal(t, upstreamtest.Finalizer, reconciler.UpstreamFinalizer)
	assert.Equal(t, upstreamtest.Manager, reconciler.UpstreamManager)
	assert.Equal(t, upstreamtest.CacheSecret, reconciler.UpstreamCacheSecret)
	assert.Equal(t, upstreamtest.Namespace, reconciler.UpstreamCacheNamespace)
}

// uids of the objects whose identity the takeover must keep.
func takeoverUIDs(t *testing.T, c client.Client) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "serverless-ctrl-mngr"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "serverless-docker-registry"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: module.RegistryPVCName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: module.RegistrySecretName}},
	} {
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: o.GetName()}, o))
		out[kindOf(o)+"/"+o.GetName()] = o.GetUID()
	}
	return out
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.PersistentVolumeClaim:
		return "PersistentVolumeClaim"
	default:
		return "Secret"
	}
}

// upstreamLabelled lists the objects of the managed kinds in the module
// namespace (and cluster-scoped) that still say serverless-operator manages them.
func upstreamLabelled(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, k := range kinds.Managed() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		err := c.List(context.Background(), list, client.MatchingLabels{module.LabelManagedBy: upstreamtest.Manager})
		require.NoError(t, err)
		for _, o := range list.Items {
			out = append(out, k.GVK.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	return out
}

// bound plays the PV controller: the registry's claim is bound.
func bound(t *testing.T, c client.Client) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc))
	if pvc.Status.Phase == corev1.ClaimBound {
		return
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pvc.Spec.Resources.Requests
	require.NoError(t, c.Status().Update(context.Background(), pvc))
}

// An installation of serverless-operator 1.8.4 (fixtures) is taken over by
// the manager with the module's own chart: Ready, every Deployment, the PVC
// and the registry Secret kept (same UID, same credentials), what upstream
// set and the chart does not removed from the objects, the object only
// upstream renders deleted, the finalizers swapped, the cache Secret gone,
// and a user's object that merely carries upstream's label left alone.
func TestTakeoverOfServerlessOperator(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	inst, err := upstreamtest.Load(repo.MustRoot())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, c))
	bound(t, c)
	before := takeoverUIDs(t, c)
	credsBefore := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, credsBefore))
	// A user's copy with upstream's labels, never applied by upstream and not
	// in its manifest: not upstream's to delete.
	userCopy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-serverless-notes",
		Labels: map[string]string{module.LabelManagedBy: upstreamtest.Manager, module.LabelModule: "serverless"}}}
	require.NoError(t, c.Create(ctx, userCopy))

	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	awaitTakeoverReady(t, c)

	cr := getCR(t, c, "default")
	assert.Equal(t, []string{module.Finalizer}, cr.Finalizers, "upstream's finalizer swapped for the manager's")
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	assert.Equal(t, before, takeoverUIDs(t, c), "Deployments, PVC and registry Secret kept, not re-created")

	creds := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, creds))
	assert.Equal(t, string(credsBefore.Data["username"]), string(creds.Data["username"]), "registry credentials kept")
	assert.Equal(t, string(credsBefore.Data["password"]), string(creds.Data["password"]), "registry credentials kept")

	err = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.CacheSecret}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the manifest cache Secret is removed: %v", err)
	err = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.OnlyUpstream}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "the object only upstream rendered is pruned: %v", err)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(userCopy), &corev1.ConfigMap{}), "a user's object stays")
	assert.Equal(t, []string{"ConfigMap/" + ns + "/my-serverless-notes"}, upstreamLabelled(t, c),
		"nothing of upstream's is labelled as serverless-operator's any more")

	// The objects hold the chart's content only: what upstream set and the
	// chart does not is gone (ownership moved before the apply).
	ctrl := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-ctrl-mngr"}, ctrl))
	require.Len(t, ctrl.Spec.Template.Spec.Containers, 1)
	assert.Equal(t, []string{"/function-controller"}, ctrl.Spec.Template.Spec.Containers[0].Command)
	assert.Equal(t, map[string]string{"app": "serverless", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/instance": "serverless"},
		ctrl.Spec.Selector.MatchLabels)
	assert.NotContains(t, ctrl.Spec.Template.Labels, "version", "upstream's Pod label is gone")
	for _, e := range ctrl.Spec.Template.Spec.Containers[0].Env {
		assert.NotEqual(t, "APP_FUNCTION_REQUEUE_DURATION", e.Name, "upstream's env is gone")
	}
	reg := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-docker-registry"}, reg))
	var names []string
	for _, ctr := range reg.Spec.Template.Spec.Containers {
		names = append(names, ctr.Name)
	}
	assert.Equal(t, []string{"registry", "registry-agent"}, names, "upstream's container docker-registry is replaced, not kept beside; the chart's sidecar is added")
	svc := &corev1.Service{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-controller-manager"}, svc))
	require.Len(t, svc.Spec.Ports, 1, "upstream's https port is gone")
	assert.Equal(t, "http-metrics", svc.Spec.Ports[0].Name)
	regSvc := &corev1.Service{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, regSvc))
	assert.Equal(t, int32(32137), regSvc.Spec.Ports[0].NodePort, "the registry keeps its NodePort")
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc))
	assert.Equal(t, "20Gi", pvc.Spec.Resources.Requests.Storage().String(), "the claim keeps its size")
	assert.Equal(t, module.ManagedBy, pvc.Labels[module.LabelManagedBy])
	assert.NotContains(t, pvc.Labels, "heritage", "upstream's label is gone")
}

// Deleting a CR whose takeover never finished (upstream's finalizer still
// on it) uninstalls and lets the CR go: nobody else would remove that
// finalizer.
func TestUpstreamFinalizerGoesWithTheUninstall(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	inst, err := upstreamtest.Load(repo.MustRoot())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, c))
	cr := getCR(t, c, "default")
	require.NoError(t, c.Delete(ctx, cr))

	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	eventually(t, 60*time.Second, "the CR to be gone", func() (bool, string) {
		got := &v1alpha1.Serverless{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, got)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describe(got) + " finalizers " + strings.Join(got.Finalizers, ",")
	})
}

// The report that started the takeover: an earlier manager without it ran
// on upstream's installation and failed half-way, leaving both finalizers
// and objects applied by both field managers. The takeover merges
// upstream's fields into the manager's and finishes the job.
func TestTakeoverAfterAFailedAttempt(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	inst, err := upstreamtest.Load(repo.MustRoot())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, c))
	bound(t, c)
	// What the failed attempt left: its finalizer and one object it applied.
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Finalizers = append(cr.Finalizers, module.Finalizer) })
	half := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "serverless-configuration", "labels": map[string]any{
			module.LabelManagedBy: module.ManagedBy, module.LabelModule: "serverless", module.LabelPartOf: "serverless"}},
		"data": map[string]any{"log-config.yaml": "logLevel: info\nlogFormat: json\n"},
	}}
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(half), client.FieldOwner(module.ManagerName), client.ForceOwnership))

	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	awaitTakeoverReady(t, c)
	assert.Equal(t, []string{module.Finalizer}, getCR(t, c, "default").Finalizers)
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-configuration"}, cm))
	assert.NotContains(t, cm.Labels, "version", "upstream's label went with the merged fields")
	var managers []string
	for _, e := range cm.ManagedFields {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
	}
	assert.Equal(t, []string{module.ManagerName + "/Apply"}, managers, "one owner: the manager")
	assert.Empty(t, upstreamLabelled(t, c))
}

// awaitTakeoverReady waits for the default CR to be Ready, playing
// kube-controller-manager for the taken-over Deployments meanwhile.
func awaitTakeoverReady(t *testing.T, c client.Client) {
	t.Helper()
	eventually(t, 60*time.Second, "the takeover to be Ready", func() (bool, string) {
		cr := getCR(t, c, "default")
		if cr.Status.State == v1alpha1.StateProcessing {
			markChartAvailable(t, c)
			markAvailable(t, c, "serverless-docker-registry")
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation, describe(cr)
	})
}

// Upstream's installation whose registry got another NodePort (its default
// was taken when it installed): the takeover keeps that port, it does not
// move the registry to the chart's default.
func TestTakeoverKeepsAnotherNodePort(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	taken := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "holds-the-default-port"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "none"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 32137}}},
	}
	require.NoError(t, c.Create(ctx, taken))
	inst, err := upstreamtest.Load(repo.MustRoot())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, c))
	bound(t, c)
	regSvc := &corev1.Service{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, regSvc))
	port := regSvc.Spec.Ports[0].NodePort
	require.NotEqual(t, int32(32137), port, "the fixture's registry got another port")
	upstreamSecret := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, upstreamSecret))
	assert.Equal(t, fmt.Sprintf("localhost:%d", port), string(upstreamSecret.Data["pullRegAddr"]),
		"upstream's registry Secret names the port its registry got")

	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	awaitTakeoverReady(t, c)
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, regSvc))
	assert.Equal(t, port, regSvc.Spec.Ports[0].NodePort, "the registry keeps its NodePort")
}
