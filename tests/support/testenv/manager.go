package testenv

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager is a controller-runtime manager on rc with opts, made fit for
// a test: no metrics or health listener, and controller names that the
// next manager of the same test binary may register again.
func NewManager(t testing.TB, rc *rest.Config, opts manager.Options) manager.Manager {
	t.Helper()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(rc, opts)
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	return mgr
}

// RunManager starts mgr and returns what stops it: stop cancels mgr's
// context, waits until mgr has ended and fails t if it ended with an
// error; calls after the first do nothing (a test that failed between a
// stop and the next start must not leave the next stop waiting for a
// manager that is gone). The caller decides when it runs at the latest
// (t.Cleanup(stop)).
func RunManager(t testing.TB, mgr manager.Manager) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager ended with an error: %v", err)
		}
	})
}

// RecordingClient is a manager's NewClient whose client tells record of
// every write it sends (RecordWrites).
func RecordingClient(record func(verb string, obj client.Object)) client.NewClientFunc {
	return func(rc *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(rc, opts)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, RecordWrites(record)), nil
	}
}

// RecordWrites is interceptor functions that send each write on and then
// tell record its verb ("create", "update", "patch", "delete",
// "update/<subresource>", "patch/<subresource>") and object: after the
// write, so that a generated name is known, and whatever the answer (a
// refused write was sent all the same).
func RecordWrites(record func(verb string, obj client.Object)) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			record("create", obj)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			record("update", obj)
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			record("patch", obj)
			return err
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			record("delete", obj)
			return err
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			record("update/"+sub, obj)
			return err
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			record("patch/"+sub, obj)
			return err
		},
	}
}
