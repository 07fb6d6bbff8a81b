// Package upstreamtest puts into a cluster what serverless-operator leaves
// there after installing the module, from the fixtures in
// tests/e2e/testdata/upstream-<version>: the chart's objects server-side
// applied as upstream applies them, the Serverless CR with upstream's
// finalizer and status, and the manifest cache Secret that records
// upstream's manifest. Two releases: 1.8.4 (the last build-based one) and
// 1.13.0 (buildless). Integration (envtest) and e2e tests of the takeover
// share it.
package upstreamtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Dir holds the 1.8.4 fixtures, relative to the repository root.
const Dir = "tests/e2e/testdata/upstream-1.8.4"

// Facts of serverless-operator (components/operator) the fixtures follow;
// the manager has its own copy (reconciler.Upstream*), which tests compare
// with these.
const (
	Namespace   = "kyma-system"
	Finalizer   = "serverless-operator.kyma-project.io/deletion-hook"
	Manager     = "serverless-operator" // 1.8.4's field manager
	CacheSecret = "serverless-manifest-cache"
	// OnlyUpstream is what 1.8.4's chart renders and this module's does not.
	OnlyUpstream = "serverless.function.cli-compat"
)

// Release is what differs between the releases the fixtures describe.
type Release struct {
	// Dir holds the fixtures, relative to the repository root.
	Dir string
	// Manager is the field manager of its server-side applies.
	Manager string
	// CRDLabels are the labels its Function CRD carries (its own, not the
	// chart's common labels).
	CRDLabels map[string]string
	// Flags are the custom flags its manifest cache records.
	Flags map[string]any
}

// Release184 is serverless-operator 1.8.4 with the internal registry.
func Release184() Release {
	return Release{
		Dir:     Dir,
		Manager: Manager,
		CRDLabels: map[string]string{
			"app.kubernetes.io/component": "serverless", "app.kubernetes.io/instance": "functions.serverless.kyma-project.io",
			"app.kubernetes.io/managed-by": "kustomize", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/part-of": "serverless",
			"app.kubernetes.io/version": "main", "kyma-project.io/module": "serverless",
		},
		Flags: map[string]any{
			"dockerRegistry": map[string]any{"enableInternal": true},
			"global": map[string]any{
				"commonLabels":     map[string]any{"app.kubernetes.io/managed-by": Manager},
				"registryNodePort": 32137,
			},
		},
	}
}

// Release1130 is serverless-operator 1.13.0, buildless. From 1.10 on it
// applies under the field manager name the manager uses too
// (docs/contributor/upstream-contract.md#field-managers).
func Release1130() Release {
	return Release{
		Dir:     "tests/e2e/testdata/upstream-1.13.0",
		Manager: "serverless-manager",
		CRDLabels: map[string]string{
			"app.kubernetes.io/component": "controller", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/instance": "serverless",
			"app.kubernetes.io/part-of": "serverless", "app.kubernetes.io/version": "1.13.0", "kyma-project.io/module": "serverless",
		},
		Flags: map[string]any{
			"global": map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/managed-by": "serverless-operator"}},
		},
	}
}

// Installation is one upstream installation.
type Installation struct {
	// CR is the Serverless CR, with finalizer and status.
	CR *unstructured.Unstructured
	// Objects are the chart's objects, the Function CRD first.
	Objects []*unstructured.Unstructured
	// Cache is the manifest cache Secret.
	Cache *corev1.Secret
	// manager applies the objects.
	manager string
}

// Load reads the 1.8.4 fixtures under root (the repository root).
func Load(root string) (*Installation, error) { return LoadRelease(root, Release184()) }

// LoadRelease reads rel's fixtures under root (the repository root). The
// Function CRD is this repository's (charts/serverless/crds) with
// upstream's labels.
func LoadRelease(root string, rel Release) (*Installation, error) {
	dir := filepath.Join(root, rel.Dir)
	crs, err := manifest.ReadFile(filepath.Join(dir, "serverless.yaml"))
	if err != nil {
		return nil, err
	}
	if len(crs) != 1 {
		return nil, fmt.Errorf("serverless.yaml: want one CR, got %d", len(crs))
	}
	text, err := os.ReadFile(filepath.Join(dir, "installation.yaml"))
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Decode(text)
	if err != nil {
		return nil, fmt.Errorf("installation.yaml: %w", err)
	}
	crds, err := manifest.ReadDir(filepath.Join(root, "charts", "serverless", "crds"))
	if err != nil {
		return nil, err
	}
	var rendered strings.Builder
	for _, crd := range crds {
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, rel.CRDLabels)
		crd.SetLabels(labels)
		data, err := yaml.Marshal(crd.Object)
		if err != nil {
			return nil, err
		}
		rendered.WriteString("---\n")
		rendered.Write(data)
	}
	rendered.WriteString("---\n")
	rendered.Write(text)
	// The operator's record: the flags it rendered with and the manifest
	// (components/operator/internal/chart/cache.go: key "spec", JSON).
	spec, err := json.Marshal(map[string]any{
		"ManagerUID":  "3f0c5a52-6c1e-4a8e-9f55-upstream",
		"CustomFlags": rel.Flags,
		"Manifest":    rendered.String(),
	})
	if err != nil {
		return nil, err
	}
	return &Installation{
		CR:      crs[0],
		Objects: append(crds, objs...),
		Cache: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: CacheSecret},
			Data:       map[string][]byte{"spec": spec},
		},
		manager: rel.Manager,
	}, nil
}

// Install creates the installation with c: each object applied with
// upstream's field manager (server-side, forced, as upstream does), the
// cache Secret created, the CR created with its finalizer and its status
// written. The caller makes upstream's Deployments look rolled out if it
// needs to (on envtest nobody else does).
func (i *Installation) Install(ctx context.Context, c client.Client) error {
	// Services first: a NodePort that moved (see apply) moves in the
	// addresses the Secrets hold too, as upstream's operator writes the
	// port it got.
	moved := map[string]string{}
	for _, o := range i.Objects {
		if o.GetKind() != "Service" {
			continue
		}
		if err := apply(ctx, c, o.DeepCopy(), i.manager, moved); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range i.Objects {
		if o.GetKind() == "Service" {
			continue
		}
		o = o.DeepCopy()
		if o.GetKind() == "Secret" && len(moved) > 0 {
			var pairs []string
			for from, to := range moved {
				pairs = append(pairs, from, to)
			}
			moves := strings.NewReplacer(pairs...)
			data, _, _ := unstructured.NestedStringMap(o.Object, "stringData")
			for k, v := range data {
				data[k] = moves.Replace(v)
			}
			if len(data) > 0 {
				if err := unstructured.SetNestedStringMap(o.Object, data, "stringData"); err != nil {
					return err
				}
			}
		}
		if err := apply(ctx, c, o, i.manager, moved); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if err := c.Create(ctx, i.Cache.DeepCopy()); err != nil {
		return fmt.Errorf("creating the cache Secret: %w", err)
	}
	cr := i.CR.DeepCopy()
	status := cr.Object["status"]
	delete(cr.Object, "status")
	if err := c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR: %w", err)
	}
	cr.Object["status"] = status
	if err := c.Status().Update(ctx, cr); err != nil {
		return fmt.Errorf("writing the Serverless CR's status: %w", err)
	}
	return nil
}

// apply applies o as upstream's operator does. A NodePort the API server
// says is taken (a Service of an earlier test, or a port its repair loop
// still holds for a deleted one) is left to the API server to choose, as
// upstream's operator picks another free port when its default is taken;
// moved then maps "localhost:<fixture port>" to "localhost:<port got>".
func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured, manager string, moved map[string]string) error {
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(manager), client.ForceOwnership)
	if o.GetKind() != "Service" || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided port is already allocated") {
		return err
	}
	ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
	wanted := map[string]int64{}
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok {
			name, _ := m["name"].(string)
			switch n := m["nodePort"].(type) { // as decoded: JSON numbers or int64
			case int64:
				wanted[name] = n
			case float64:
				wanted[name] = int64(n)
			}
			delete(m, "nodePort")
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, ports, "spec", "ports"); err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return err
	}
	got := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
		return fmt.Errorf("reading the NodePort Service %s got: %w", o.GetName(), err)
	}
	for _, p := range got.Spec.Ports {
		if n, ok := wanted[p.Name]; ok && p.NodePort != 0 {
			moved[fmt.Sprintf("localhost:%d", n)] = fmt.Sprintf("localhost:%d", p.NodePort)
		}
	}
	return nil
}

// Object returns the installation's object of kind and name, nil if none.
func (i *Installation) Object(kind, name string) *unstructured.Unstructured {
	for _, o := range i.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// FunctionManager is the field manager of what upstream's buildless
// controller writes: it updates without naming one, so the API server
// records its binary's name (docs/contributor/upstream-contract.md#field-managers).
const FunctionManager = "manager"

// LoadFunctions reads rel's functions.yaml: Functions, each followed by the
// Deployment and Service upstream's controller made for it.
func LoadFunctions(root string, rel Release) ([]*unstructured.Unstructured, error) {
	return manifest.ReadFile(filepath.Join(root, rel.Dir, "functions.yaml"))
}

// InstallFunctions creates objs (from LoadFunctions) as upstream's
// controller left them: each Function with its status, then its Deployment
// and Service labelled with its UID and owned by it.
func InstallFunctions(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	owners := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		o = o.DeepCopy()
		key := o.GetNamespace() + "/" + o.GetLabels()[functionNameLabel]
		if o.GetKind() == "Function" {
			if err := createFunction(ctx, c, o); err != nil {
				return err
			}
			owners[o.GetNamespace()+"/"+o.GetName()] = o
			continue
		}
		fn := owners[key]
		if fn == nil {
			return fmt.Errorf("%s %s: no Function %s before it", o.GetKind(), o.GetName(), key)
		}
		if err := ownedBy(o, fn); err != nil {
			return err
		}
		if err := c.Create(ctx, o, client.FieldOwner(FunctionManager)); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

const (
	functionNameLabel = "serverless.kyma-project.io/function-name"
	uuidLabel         = "serverless.kyma-project.io/uuid"
)

// createFunction creates fn and writes its status, the UID in its Pod
// selector.
func createFunction(ctx context.Context, c client.Client, fn *unstructured.Unstructured) error {
	status, _, _ := unstructured.NestedMap(fn.Object, "status")
	delete(fn.Object, "status")
	if err := c.Create(ctx, fn, client.FieldOwner(FunctionManager)); err != nil {
		return fmt.Errorf("creating Function %s: %w", fn.GetName(), err)
	}
	if sel, ok := status["podSelector"].(string); ok {
		status["podSelector"] = strings.Replace(sel, uuidLabel+"=UID", uuidLabel+"="+string(fn.GetUID()), 1)
	}
	fn.Object["status"] = status
	if err := c.Status().Update(ctx, fn, client.FieldOwner(FunctionManager)); err != nil {
		return fmt.Errorf("writing Function %s's status: %w", fn.GetName(), err)
	}
	return nil
}

// ownedBy labels o (and its selector and Pod template) with fn's UID and
// makes fn its controller.
func ownedBy(o, fn *unstructured.Unstructured) error {
	uid := string(fn.GetUID())
	labels := o.GetLabels()
	labels[uuidLabel] = uid
	o.SetLabels(labels)
	paths := [][]string{{"spec", "selector"}}
	if o.GetKind() == "Deployment" {
		paths = [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}}
	}
	for _, p := range paths {
		if err := unstructured.SetNestedField(o.Object, uid, append(p, uuidLabel)...); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	o.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: fn.GetAPIVersion(), Kind: fn.GetKind(), Name: fn.GetName(), UID: fn.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	return nil
}

// RemoveLeftovers deletes what is still upstream's of the installation: its
// objects the module did not take over (without the module's managed-by
// label; the Function CRD stays) and the cache Secret. A takeover test that
// failed half-way thus leaves nothing that a later installation would trip
// over.
func (i *Installation) RemoveLeftovers(ctx context.Context, c client.Client) error {
	var errs []error
	for _, o := range i.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err == nil && live.GetLabels()[module.LabelManagedBy] == module.ManagedBy {
			continue
		}
		if err == nil {
			err = c.Delete(ctx, live)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err))
		}
	}
	if err := c.Delete(ctx, i.Cache.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("the cache Secret: %w", err))
	}
	return errors.Join(errs...)
}
