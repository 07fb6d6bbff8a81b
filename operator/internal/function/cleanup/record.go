package cleanup

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=patch

// Repositories records, in a ConfigMap of the base namespace, the
// repositories of an external registry the module pushed Function images
// to (key: repository under the registry address, value: that address).
// An external registry is the user's: its opt-in clean-up touches these
// repositories only, never one it cannot tell is the module's — a catalog
// would list the user's own repositories, and many registries have none.
// A Function's repository is recorded before its build pushes, so the
// images of a Function deleted between two rounds are still found.
type Repositories struct {
	// Client reads the ConfigMap from the cache and writes it.
	Client    client.Client
	Namespace string
}

// Known is the record: repository → registry address.
func (r Repositories) Known(ctx context.Context) (map[string]string, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: module.RegistryRepositoriesName}, cm)
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the record of registry repositories: %w", err)
	}
	out := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		out[k] = v
	}
	return out, nil
}

// Remember records the repositories under address unless the record has
// them already. Merge patches: records of other repositories, made at the
// same time by other builds, do not conflict.
func (r Repositories) Remember(ctx context.Context, address string, repositories ...string) error {
	known, err := r.Known(ctx)
	if err != nil {
		return err
	}
	data := map[string]any{}
	for _, repo := range repositories {
		if known[repo] != address {
			data[repo] = address
		}
	}
	if len(data) == 0 {
		return nil
	}
	if err := r.patch(ctx, data); !apierrors.IsNotFound(err) {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: module.RegistryRepositoriesName,
		Labels: map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}}, Data: map[string]string{}}
	for k, v := range data {
		cm.Data[k] = v.(string)
	}
	err = r.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		return r.patch(ctx, data)
	}
	if err != nil {
		return fmt.Errorf("recording registry repositories: %w", err)
	}
	return nil
}

// Forget removes repositories from the record.
func (r Repositories) Forget(ctx context.Context, repositories ...string) error {
	if len(repositories) == 0 {
		return nil
	}
	data := map[string]any{}
	for _, repo := range repositories {
		data[repo] = nil
	}
	return client.IgnoreNotFound(r.patch(ctx, data))
}

func (r Repositories) patch(ctx context.Context, data map[string]any) error {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: module.RegistryRepositoriesName}}
	if err := r.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("recording registry repositories: %w", err)
	}
	return nil
}
