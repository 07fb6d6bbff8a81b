package reconciler

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
)

func TestIsNodePortTaken(t *testing.T) {
	taken := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "serverless-docker-registry", field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 32137, "provided port is already allocated"),
	})
	other := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "x", field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("port"), 70000, "must be between 1 and 65535"),
	})
	assert.True(t, isNodePortTaken(fmt.Errorf("applying: %w", taken)), "wrapped errors count")
	assert.False(t, isNodePortTaken(other))
	assert.False(t, isNodePortTaken(apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "x", nil)))
	assert.False(t, isNodePortTaken(fmt.Errorf("plain")))

	r := &Reconciler{refusedPorts: map[int32]time.Time{}}
	r.refuse(32137)
	assert.Equal(t, map[int32]bool{32137: true}, r.refused())
	r.refusedPorts[32137] = time.Now().Add(-refusedPortMemory - time.Second)
	assert.Empty(t, r.refused(), "a refusal is forgotten after a while")
}

// pagedServices serves Services like an API server that honours Limit and
// Continue, recording the limit of every request.
type pagedServices struct {
	client.Reader
	items  []corev1.Service
	limits []int64
}

func (p *pagedServices) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	p.limits = append(p.limits, o.Limit)
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := len(p.items)
	if o.Limit > 0 && start+int(o.Limit) < end {
		end = start + int(o.Limit)
	}
	out := list.(*corev1.ServiceList)
	out.Items = append([]corev1.Service(nil), p.items[start:end]...)
	if end < len(p.items) {
		out.Continue = strconv.Itoa(end)
	}
	return nil
}

func servicesWithNodePorts(n int, port func(i int) int32) []corev1.Service {
	out := make([]corev1.Service, n)
	for i := range out {
		out[i].Spec.Ports = []corev1.ServicePort{{NodePort: port(i)}}
	}
	return out
}

func TestFreeNodePort(t *testing.T) {
	tests := []struct {
		name      string
		services  []corev1.Service
		rng       values.NodePortRange
		want      int32
		wantErr   string
		wantPages int
	}{
		{
			name: "ports used on later pages count",
			// Ports 32137..32137+1199: the last pages hold the default's neighbours.
			services:  servicesWithNodePorts(1200, func(i int) int32 { return 32137 + int32(i)%600 }),
			want:      32737,
			wantPages: 3,
		},
		{
			name:      "custom range",
			services:  servicesWithNodePorts(3, func(i int) int32 { return 20000 + int32(i) }),
			rng:       values.NodePortRange{Min: 20000, Max: 20010},
			want:      20003,
			wantPages: 1,
		},
		{
			name:      "a full custom range is an error naming it",
			services:  servicesWithNodePorts(2, func(i int) int32 { return 20000 + int32(i) }),
			rng:       values.NodePortRange{Min: 20000, Max: 20001},
			wantErr:   "20000-20001",
			wantPages: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &pagedServices{items: tt.services}
			r := &Reconciler{api: api, refusedPorts: map[int32]time.Time{}, opts: Options{NodePortRange: tt.rng}}
			got, err := r.freeNodePort(context.Background())
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			assert.Len(t, api.limits, tt.wantPages)
			for _, l := range api.limits {
				assert.Positive(t, l, "every list is paginated")
			}
		})
	}
}

func TestNodePortOutOfRange(t *testing.T) {
	outOfRange := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "serverless-docker-registry", field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 32137,
			"provided port is not in the valid range. The range of valid ports is 20000-22767"),
	})
	noRange := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "serverless-docker-registry", field.ErrorList{
		field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 32137, "provided port is not in the valid range"),
	})
	rng, refused, ok := nodePortOutOfRange(fmt.Errorf("applying: %w", outOfRange))
	assert.True(t, refused)
	assert.True(t, ok)
	assert.Equal(t, values.NodePortRange{Min: 20000, Max: 22767}, rng)

	_, refused, ok = nodePortOutOfRange(noRange)
	assert.True(t, refused)
	assert.False(t, ok, "no range named")

	_, refused, _ = nodePortOutOfRange(fmt.Errorf("plain"))
	assert.False(t, refused)

	r := &Reconciler{refusedPorts: map[int32]time.Time{}, opts: Options{NodePortRange: values.NodePortRange{Min: 31000, Max: 31999}}}
	assert.Equal(t, values.NodePortRange{Min: 31000, Max: 31999}, r.portRange())
	r.learnRange(rng)
	assert.Equal(t, rng, r.portRange(), "the API server's word wins over the flag")
	assert.Equal(t, values.DefaultNodePortRange(), (&Reconciler{}).portRange())
}
