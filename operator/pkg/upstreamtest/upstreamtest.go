// Package upstreamtest puts into a cluster what serverless-operator 1.8.4
// leaves there after installing the module, from the fixtures in
// tests/e2e/testdata/upstream-1.8.4: the chart's objects server-side applied
// as upstream applies them, the Serverless CR with upstream's finalizer and
// status, and the manifest cache Secret that records upstream's manifest.
// Integration (envtest) and e2e tests of the takeover share it.
package upstreamtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
)

// Dir holds the fixtures, relative to the repository root.
const Dir = "tests/e2e/testdata/upstream-1.8.4"

// Facts of serverless-operator 1.8.4 (components/operator) the fixtures
// follow; the manager has its own copy (reconciler.Upstream*), which tests
// compare with these.
const (
	Namespace   = "kyma-system"
	Finalizer   = "serverless-operator.kyma-project.io/deletion-hook"
	Manager     = "serverless-operator"
	CacheSecret = "serverless-manifest-cache"
	// OnlyUpstream is what upstream's chart renders and this module's does not.
	OnlyUpstream = "serverless.function.cli-compat"
)

// crdLabels are the labels upstream's Function CRD carries (its own, not the
// chart's common labels).
var crdLabels = map[string]string{
	"app.kubernetes.io/component": "serverless", "app.kubernetes.io/instance": "functions.serverless.kyma-project.io",
	"app.kubernetes.io/managed-by": "kustomize", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/part-of": "serverless",
	"app.kubernetes.io/version": "main", "kyma-project.io/module": "serverless",
}

// Installation is one upstream installation.
type Installation struct {
	// CR is the Serverless CR, with finalizer and status.
	CR *unstructured.Unstructured
	// Objects are the chart's objects, the Function CRD first.
	Objects []*unstructured.Unstructured
	// Cache is the manifest cache Secret.
	Cache *corev1.Secret
}

// Load reads the fixtures under root (the repository root). The Function
// CRD is this repository's (charts/serverless/crds) with upstream's labels.
func Load(root string) (*Installation, error) {
	dir := filepath.Join(root, Dir)
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
		maps.Copy(labels, crdLabels)
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
		"ManagerUID": "3f0c5a52-6c1e-4a8e-9f55-upstream",
		"CustomFlags": map[string]any{
			"dockerRegistry": map[string]any{"enableInternal": true},
			"global": map[string]any{
				"commonLabels":     map[string]any{"app.kubernetes.io/managed-by": Manager},
				"registryNodePort": 32137,
			},
		},
		"Manifest": rendered.String(),
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
	}, nil
}

// Install creates the installation with c: each object applied with
// upstream's field manager (server-side, forced, as upstream does), the
// cache Secret created, the CR created with its finalizer and its status
// written. The caller makes upstream's Deployments look rolled out if it
// needs to (on envtest nobody else does).
func (i *Installation) Install(ctx context.Context, c client.Client) error {
	for _, o := range i.Objects {
		if err := apply(ctx, c, o.DeepCopy()); err != nil {
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
// upstream's operator picks another free port when its default is taken.
func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(Manager), client.ForceOwnership)
	if o.GetKind() != "Service" || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided port is already allocated") {
		return err
	}
	ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok {
			delete(m, "nodePort")
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, ports, "spec", "ports"); err != nil {
		return err
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(Manager), client.ForceOwnership)
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
