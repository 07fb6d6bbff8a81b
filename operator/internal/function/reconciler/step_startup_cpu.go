package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// A scale-to-zero Function's Pods start with more CPU than their own limit
// (resources.AnnotationCPULimitAfterStart); once a Pod is ready it is
// resized in place to its own (docs/contributor/scale-to-zero.md#startup-cpu).
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch

// startupCPU resizes each ready Pod of a scale-to-zero Function that started
// boosted to the CPU limit its template names. The ready Pods come from the
// Function's Service's slices, whose changes requeue such a Function; each
// Pod is read once (the cache holds no Function Pods) and remembered.
func (r *Reconciler) startupCPU(ctx context.Context, p *pass) (steps.Outcome, error) {
	if !scaletozero.Enabled(p.fn) || r.api == nil {
		r.resized.forget(p.key)
		return steps.Next(), nil
	}
	ready := resources.ReadyPods(p.fn.Name, p.endpointSlices)
	r.resized.keep(p.key, ready)
	out := steps.Next()
	for _, key := range ready {
		if r.resized.done(p.key, key.Name) {
			continue
		}
		if err := r.resizeAfterStart(ctx, key); err != nil {
			// The Function runs either way: its Pod keeps the start's
			// limit until a later pass resizes it.
			logr.FromContextOrDiscard(ctx).Error(err, "the Pod keeps its start's CPU limit for now", "retryIn", resizeRetry)
			out = out.Within(resizeRetry)
			continue
		}
		r.resized.add(p.key, key.Name)
	}
	return out, nil
}

// resizeRetry is when a pass tries again to resize a Pod it could not.
const resizeRetry = 30 * time.Second

// resizeAfterStart sets the function container's CPU limit of Pod key to
// its template's AnnotationCPULimitAfterStart when it differs. A Pod gone
// meanwhile needs nothing.
func (r *Reconciler) resizeAfterStart(ctx context.Context, key types.NamespacedName) error {
	pod := &corev1.Pod{}
	if err := r.api.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Pod %s to lower its CPU limit after its start: %w", key, err)
	}
	after, ok := pod.Annotations[resources.AnnotationCPULimitAfterStart]
	if !ok || pod.DeletionTimestamp != nil {
		return nil
	}
	limit, err := resource.ParseQuantity(after)
	if err != nil {
		return fmt.Errorf("pod %s: annotation %s: %w", key, resources.AnnotationCPULimitAfterStart, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == resources.ContainerFunction && c.Resources.Limits.Cpu().Cmp(limit) == 0 {
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name":      resources.ContainerFunction,
		"resources": map[string]any{"limits": map[string]string{string(corev1.ResourceCPU): limit.String()}},
	}}}})
	if err != nil {
		return err
	}
	if err := r.client.SubResource("resize").Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lowering the CPU limit of Pod %s to %s after its start: %w", key, limit.String(), err)
	}
	return nil
}

// resizedPods remembers, per Function, the ready Pods already brought to
// their own CPU limit, so a pass reads each Pod once (in memory: a
// restarted controller reads them again, and finds nothing to change).
type resizedPods struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]map[string]bool
}

func newResizedPods() *resizedPods {
	return &resizedPods{pods: map[types.NamespacedName]map[string]bool{}}
}

func (s *resizedPods) done(fn types.NamespacedName, pod string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[fn][pod]
}

func (s *resizedPods) add(fn types.NamespacedName, pod string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods[fn] == nil {
		s.pods[fn] = map[string]bool{}
	}
	s.pods[fn][pod] = true
}

// keep forgets fn's Pods that are no longer ready ones.
func (s *resizedPods) keep(fn types.NamespacedName, ready []types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pod := range s.pods[fn] {
		if !containsPod(ready, pod) {
			delete(s.pods[fn], pod)
		}
	}
	if len(s.pods[fn]) == 0 {
		delete(s.pods, fn)
	}
}

func (s *resizedPods) forget(fn types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, fn)
}

func containsPod(pods []types.NamespacedName, name string) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}
