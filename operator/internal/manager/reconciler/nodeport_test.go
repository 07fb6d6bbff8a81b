package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
