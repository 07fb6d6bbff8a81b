package podrun

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Only a new Pod template replaces the Pod: that is when the process must
// start again from a new plan.
func TestRolledFollowsThePodTemplateOnly(t *testing.T) {
	tests := []struct {
		name    string
		change  func(d *appsv1.Deployment)
		want    bool
		wantErr bool
	}{
		{name: "unchanged", change: func(*appsv1.Deployment) {}},
		{name: "scaled", change: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }},
		{name: "status and Deployment metadata", change: func(d *appsv1.Deployment) {
			d.Status.ReadyReplicas = 1
			d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
		}},
		{name: "Pod template annotation", change: func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"serverless.kyma-project.io/log-format": "text"}
		}, want: true},
		{name: "container env", change: func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "APP_NEW", Value: "1"})
		}, want: true},
		{name: "Deployment gone", change: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(deployment(nil), settings("info")).Build()
			p, err := Prepare(ctx, c, Spec{Namespace: "kyma-system", Deployment: "ctrl", BinDir: "/repo/bin", Dir: t.TempDir(), FreePort: ports(40001, 40002)})
			require.NoError(t, err)
			d := &appsv1.Deployment{}
			require.NoError(t, c.Get(ctx, p.deployment, d))
			if tt.change == nil {
				require.NoError(t, c.Delete(ctx, d))
			} else {
				tt.change(d)
				require.NoError(t, c.Update(ctx, d))
			}
			rolled, err := p.Rolled(ctx, c)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, rolled)
		})
	}
}
