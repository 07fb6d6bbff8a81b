package cleanup

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

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
	out := maps.Clone(cm.Data)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// Remember records the repositories under address unless the record has
// them already. Builds record theirs at the same time: a conflict reads
// again and retries.
func (r Repositories) Remember(ctx context.Context, address string, repositories ...string) error {
	return r.change(ctx, func(data map[string]string) {
		for _, repo := range repositories {
			data[repo] = address
		}
	})
}

// Forget removes repositories from the record.
func (r Repositories) Forget(ctx context.Context, repositories ...string) error {
	return r.change(ctx, func(data map[string]string) {
		for _, repo := range repositories {
			delete(data, repo)
		}
	})
}

// change applies edit to the record and writes it when that changed it
// (creating it on the first record).
func (r Repositories) change(ctx context.Context, edit func(data map[string]string)) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cm := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: module.RegistryRepositoriesName}, cm)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		exists := err == nil
		before := maps.Clone(cm.Data)
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		edit(cm.Data)
		switch {
		case maps.Equal(before, cm.Data):
			return nil
		case exists:
			return r.Client.Update(ctx, cm)
		}
		cm.ObjectMeta = metav1.ObjectMeta{Namespace: r.Namespace, Name: module.RegistryRepositoriesName,
			Labels: map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}}
		err = r.Client.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile: read it again, as after a conflict.
			return apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("recording registry repositories: %w", err)
	}
	return nil
}
