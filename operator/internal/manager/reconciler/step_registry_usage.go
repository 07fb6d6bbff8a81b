package reconciler

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Registry usage thresholds and timing.
const (
	// registryFullPercent: above it the state is Warning.
	registryFullPercent = 80
	// registryUsageTimeout bounds one measurement (a walk of the storage).
	registryUsageTimeout = 10 * time.Second
	// registryUsageRetry is the next try after a failed measurement (the
	// registry may still be starting).
	registryUsageRetry = 30 * time.Second
)

// stepRegistryUsage measures the internal registry through its agent and
// reports it in the status, in the metrics and, above 80 %, as a warning.
// A failed measurement keeps the last figures and tries again soon; it
// never fails the reconcile.
func (r *Reconciler) stepRegistryUsage(ctx context.Context, s *state) (steps.Outcome, error) {
	ns := s.cr.Namespace
	if s.cr.Status.DockerRegistry != values.InternalRegistry || r.opts.RegistryUsage == nil {
		s.cr.Status.InternalRegistry = nil
		r.recordRegistryUsage(ns, nil)
		return steps.Next(), nil
	}
	next := r.opts.RegistryUsageEvery
	// Reconciles come with every status change of a module object; the
	// registry is walked only when the last figures are due again.
	if age, ok := r.usageAge(ns); ok && age < next && s.cr.Status.InternalRegistry != nil {
		r.warnIfFull(s)
		return steps.Next().Within(next - age), nil
	}
	secret, _, err := r.secretData(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName})
	data := secret.data
	if err == nil {
		mctx, cancel := context.WithTimeout(ctx, registryUsageTimeout)
		u, uerr := r.opts.RegistryUsage(mctx, ns, string(data["username"]), string(data["password"]))
		cancel()
		err = uerr
		if err == nil {
			usage := &v1alpha1.RegistryUsage{UsedBytes: u.UsedBytes, TotalBytes: u.TotalBytes, Images: u.TaggedImages}
			if u.TotalBytes > 0 {
				usage.UsedPercent = int(u.UsedBytes * 100 / u.TotalBytes)
			}
			s.cr.Status.InternalRegistry = usage
			r.recordRegistryUsage(ns, usage)
			r.usageMeasured(ns)
		}
	}
	if err != nil {
		s.log.V(1).Info("internal registry not measured", "error", err.Error())
		next = registryUsageRetry
	}
	r.warnIfFull(s)
	return steps.Next().Within(next), nil
}

// warnIfFull adds the warning of a registry volume above the threshold.
func (r *Reconciler) warnIfFull(s *state) {
	if u := s.cr.Status.InternalRegistry; u != nil && u.UsedPercent > registryFullPercent {
		s.warnings = append(s.warnings, fmt.Sprintf("%s: the internal registry's volume is %d %% full (%s of %s, %d images): delete Functions no longer needed (their images go at the next clean-up) or raise dockerRegistry.volumeSize",
			v1alpha1.ReasonRegistryAlmostFull, u.UsedPercent, bytes(u.UsedBytes), bytes(u.TotalBytes), u.Images))
	}
}

// usageMeasured notes a successful measurement of namespace's registry.
func (r *Reconciler) usageMeasured(namespace string) {
	r.usageMu.Lock()
	defer r.usageMu.Unlock()
	if r.usageAt == nil {
		r.usageAt = map[string]time.Time{}
	}
	r.usageAt[namespace] = time.Now()
}

// usageAge is how long ago namespace's registry was last measured.
func (r *Reconciler) usageAge(namespace string) (time.Duration, bool) {
	r.usageMu.Lock()
	defer r.usageMu.Unlock()
	at, ok := r.usageAt[namespace]
	return time.Since(at), ok
}

// bytes formats a size as Kubernetes quantities read (binary SI).
func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

func (r *Reconciler) recordRegistryUsage(namespace string, u *v1alpha1.RegistryUsage) {
	if r.metrics != nil {
		r.metrics.SetRegistryUsage(namespace, u)
	}
}
