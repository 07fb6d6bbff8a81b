package reconciler

import (
	"context"

	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Mesh mode (docs/contributor/scale-to-zero.md, Mesh Mode): a scale-to-zero
// Function gets a private Service, a headless Service of its Pods named by
// scaletozero.PrivateServiceName, whose name the activator sends as the
// Host of its requests to the Pods; Istio's sidecar of the activator then
// routes them to the Pod dialled, in mutual TLS. Every other Function, and
// every Function outside mesh mode, has none.

// privateService keeps p's private Service in mesh mode for a scale-to-zero
// Function, and deletes it otherwise. A Service of its name that is not
// the Function's (found by name only, not among its children) is not taken
// over: Running False ServiceFailed says so, as for the Function's Service.
func (r *Reconciler) privateService(ctx context.Context, p *pass) (steps.Outcome, error) {
	if r.cfg.ScaleToZeroMesh == "" || !scaletozero.Enabled(p.fn) {
		for i := range p.privateServices {
			if err := r.remove(ctx, &p.privateServices[i]); err != nil {
				return steps.Outcome{}, err
			}
		}
		return steps.Next(), nil
	}
	desired := resources.PrivateService(p.fn)
	if len(p.privateServices) == 0 {
		return r.createService(ctx, p, desired)
	}
	live := &p.privateServices[0]
	if !resources.IsHeadless(live) {
		// Its cluster IP is immutable: made anew, headless.
		if err := r.remove(ctx, live); err != nil {
			return steps.Outcome{}, err
		}
		p.privateServices = nil
		return r.privateService(ctx, p)
	}
	updated, changed := resources.UpdatePrivateService(live, desired)
	if !changed {
		return steps.Next(), nil
	}
	return r.updateService(ctx, p, updated)
}
