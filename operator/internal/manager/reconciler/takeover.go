package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// What serverless-operator 1.x (kyma-project/serverless, components/operator:
// the build-based line up to 1.8.4 and the buildless one, 1.9 to 1.13)
// leaves in a cluster, as its sources say.
const (
	// UpstreamFinalizer is the finalizer it puts on the Serverless CR.
	UpstreamFinalizer = "serverless-operator.kyma-project.io/deletion-hook"
	// UpstreamManager is its field manager (server-side apply with force)
	// and the value of app.kubernetes.io/managed-by on what it applied.
	UpstreamManager = "serverless-operator"
	// UpstreamCacheSecret records its last rendered chart: data key
	// UpstreamCacheKey holds JSON with ManagerUID, CustomFlags and Manifest
	// (the rendered multi-document YAML).
	UpstreamCacheSecret = "serverless-manifest-cache"
	UpstreamCacheKey    = "spec"
	// UpstreamCacheNamespace is where it writes that Secret, whatever the
	// CR's namespace.
	UpstreamCacheNamespace = module.DefaultNamespace
)

// upstreamInstall is what the reconcile knows of an installation of
// serverless-operator 1.x: nil when there is none.
type upstreamInstall struct {
	// cache is the manifest cache Secret (nil when it is gone) with the
	// objects its manifest names that the module may own: kinds of
	// operator/pkg/kinds, namespaced ones in the CR's namespace.
	cache   *corev1.Secret
	objects []objectRef
	// functionMode is how its Functions run, read from its manifest
	// (empty when the cache Secret is gone).
	functionMode string
}

// mode is the Function mode of the installation; empty without one.
func (u *upstreamInstall) mode() string {
	if u == nil {
		return ""
	}
	return u.functionMode
}

// objectRef names one object of a manifest.
type objectRef struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func (o objectRef) String() string {
	if o.namespace == "" {
		return o.gvk.Kind + " " + o.name
	}
	return o.gvk.Kind + " " + o.namespace + "/" + o.name
}

// key identifies an object across API versions.
func (o objectRef) key() string {
	return o.gvk.Group + "/" + o.gvk.Kind + "/" + o.namespace + "/" + o.name
}

// upstream finds the traces of serverless-operator 1.x for cr. Its
// finalizer on the CR is the sign: it puts it there before it installs
// anything, and the takeover removes it last, so a takeover cut short is
// found again and no request is spent on CRs without it. The manifest cache
// Secret is then read from the API server (the manager caches only its own
// objects).
func (r *Reconciler) upstream(ctx context.Context, cr *v1alpha1.Serverless) (*upstreamInstall, error) {
	if !controllerutil.ContainsFinalizer(cr, UpstreamFinalizer) {
		return nil, nil
	}
	up := &upstreamInstall{}
	key := types.NamespacedName{Namespace: UpstreamCacheNamespace, Name: UpstreamCacheSecret}
	secret := &corev1.Secret{}
	found, err := r.apiGet(ctx, key, secret)
	if err != nil {
		return nil, fmt.Errorf("reading serverless-operator's %s: %w", key, err)
	}
	if found {
		up.cache = secret
		if up.objects, up.functionMode, err = upstreamObjects(secret, cr.Namespace); err != nil {
			return nil, fmt.Errorf("serverless-operator's %s: %w", key, err)
		}
	}
	return up, nil
}

func (r *Reconciler) apiGet(ctx context.Context, key types.NamespacedName, into *corev1.Secret) (bool, error) {
	err := r.api.Get(ctx, key, into)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// upstreamObjects lists the objects of the cache Secret's manifest that the
// module may own (others are never acted on) and the Function mode the
// manifest installed.
func upstreamObjects(secret *corev1.Secret, namespace string) ([]objectRef, string, error) {
	raw, ok := secret.Data[UpstreamCacheKey]
	if !ok {
		return nil, "", nil
	}
	var cached struct {
		Manifest string
	}
	if err := json.Unmarshal(raw, &cached); err != nil {
		return nil, "", fmt.Errorf("decoding key %q: %w", UpstreamCacheKey, err)
	}
	objs, err := manifest.Decode([]byte(cached.Manifest))
	if err != nil {
		return nil, "", fmt.Errorf("decoding the manifest: %w", err)
	}
	var out []objectRef
	mode := v1alpha1.FunctionModeBuild
	for _, o := range objs {
		ref, ok := managedRef(o, namespace)
		if ok {
			out = append(out, ref)
		}
		if runsBuildlessController(o) {
			mode = v1alpha1.FunctionModeBuildless
		}
	}
	return out, mode, nil
}

// UpstreamBuildlessController is the image repository of upstream's
// buildless Function controller (1.9 on, and 1.8's opt-in chart).
const UpstreamBuildlessController = "function-buildless-controller"

// runsBuildlessController tells whether o is a Deployment running
// upstream's buildless Function controller: the sign of a buildless chart.
func runsBuildlessController(o *unstructured.Unstructured) bool {
	if o.GetKind() != "Deployment" {
		return false
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		image, _, _ := unstructured.NestedString(m, "image")
		if strings.Contains(image, "/"+UpstreamBuildlessController+":") || strings.Contains(image, "/"+UpstreamBuildlessController+"@") {
			return true
		}
	}
	return false
}

// managedRef names o as the module would own it: a kind of the table, a
// namespaced object in namespace (the chart's objects carry none or that
// one), a cluster-scoped one without a namespace.
func managedRef(o *unstructured.Unstructured, namespace string) (objectRef, bool) {
	gvk := o.GroupVersionKind()
	i := slices.IndexFunc(kinds.Managed(), func(k kinds.Kind) bool { return k.GVK.GroupKind() == gvk.GroupKind() })
	if i < 0 || o.GetName() == "" {
		return objectRef{}, false
	}
	k := kinds.Managed()[i]
	ref := objectRef{gvk: k.GVK, name: o.GetName()}
	if k.Namespaced {
		if o.GetNamespace() != "" && o.GetNamespace() != namespace {
			return objectRef{}, false
		}
		ref.namespace = namespace
	}
	return ref, true
}

// transferredFields returns managedFields where upstream's server-side apply
// entry belongs to the manager (merged into the manager's own entry of the
// same API version), and whether anything changed. The manager's next apply
// then owns every field upstream set: those its chart does not set are
// removed instead of staying behind (labels, env, containers of upstream's
// chart).
func transferredFields(fields []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, bool, error) {
	up := slices.IndexFunc(fields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == UpstreamManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
	})
	if up < 0 {
		return fields, false, nil
	}
	out := slices.Clone(fields)
	ours := slices.IndexFunc(out, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == module.ManagerName && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
	})
	if ours < 0 {
		out[up].Manager = module.ManagerName
		return out, true, nil
	}
	if out[ours].APIVersion == out[up].APIVersion && out[ours].FieldsV1 != nil && out[up].FieldsV1 != nil {
		merged, err := unionFields(out[ours].FieldsV1, out[up].FieldsV1)
		if err != nil {
			return nil, false, err
		}
		out[ours].FieldsV1 = merged
	}
	// Fields of another API version stay unowned (and on the object) rather
	// than being claimed under a version they were not set in.
	return slices.Delete(out, up, up+1), true, nil
}

// unionFields merges two FieldsV1 sets. Their JSON form is a tree of
// objects (keys "f:<field>", "k:<key>", "v:<value>", "i:<index>", "."),
// so the union of the sets is the deep merge of the trees.
func unionFields(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	var ta, tb map[string]any
	if err := json.Unmarshal(a.Raw, &ta); err != nil {
		return nil, fmt.Errorf("decoding managed fields: %w", err)
	}
	if err := json.Unmarshal(b.Raw, &tb); err != nil {
		return nil, fmt.Errorf("decoding managed fields: %w", err)
	}
	raw, err := json.Marshal(mergeTrees(ta, tb))
	if err != nil {
		return nil, err
	}
	return &metav1.FieldsV1{Raw: raw}, nil
}

func mergeTrees(a, b map[string]any) map[string]any {
	if a == nil {
		a = map[string]any{}
	}
	for k, vb := range b {
		ma, _ := a[k].(map[string]any)
		mb, _ := vb.(map[string]any)
		a[k] = mergeTrees(ma, mb)
	}
	return a
}

// appliedByUpstream tells whether serverless-operator applied obj and the
// manager does not own it. Up to 1.9 it applied as UpstreamManager and
// labelled its objects so: both must hold. From 1.10 on it applies under
// the manager's own field manager name and labels nothing as its own, so
// there an apply entry of that name on an object without the manager's
// managed-by label is upstream's.
func appliedByUpstream(obj metav1.Object) bool {
	managedBy := obj.GetLabels()[module.LabelManagedBy]
	if managedBy == module.ManagedBy {
		return false
	}
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		if e.Operation != metav1.ManagedFieldsOperationApply {
			return false
		}
		return (e.Manager == UpstreamManager && managedBy == UpstreamManager) || e.Manager == module.ManagerName
	})
}

// upstreamObject reads ref's metadata from the API server (upstream's
// objects lack the module's labels: the cache does not hold them). It is
// nil when the object does not exist, or when the manager may not read it:
// an object its apply could not write either, and that apply says so.
func (r *Reconciler) upstreamObject(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(ref.gvk)
	err := r.api.Get(ctx, types.NamespacedName{Namespace: ref.namespace, Name: ref.name}, live)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return live, nil
}
