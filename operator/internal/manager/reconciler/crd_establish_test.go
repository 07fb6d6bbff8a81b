package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func TestEstablishDue(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	cond := func(typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, ago time.Duration) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))}
	}
	namesAccepted := func(ago time.Duration) apiextensionsv1.CustomResourceDefinitionCondition {
		return cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue, ago)
	}
	tests := []struct {
		name       string
		conditions []apiextensionsv1.CustomResourceDefinitionCondition
		requested  time.Duration // ago; 0: never
		deleting   bool
		touch      bool
		wait       time.Duration
	}{
		{name: "established", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Hour), cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue, time.Hour)}},
		{name: "names not accepted yet: kube-apiserver is still at it", conditions: nil},
		{name: "names rejected: touching does not help", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse, time.Minute)}},
		{name: "names just accepted: look again when the grace ends", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(3 * time.Second)}, wait: establishGrace - 3*time.Second},
		{name: "names accepted long ago, not established: touch", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Minute)}, touch: true, wait: establishGrace},
		{name: "established False counts as not established", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Minute), cond(apiextensionsv1.Established, apiextensionsv1.ConditionFalse, time.Minute)}, touch: true, wait: establishGrace},
		{name: "touched recently: wait for the API server", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Minute)}, requested: 4 * time.Second, wait: establishGrace - 4*time.Second},
		{name: "touched long ago without effect: touch again", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Hour)}, requested: 30 * time.Second, touch: true, wait: establishGrace},
		{name: "being deleted: leave it", conditions: []apiextensionsv1.CustomResourceDefinitionCondition{namesAccepted(time.Minute)}, deleting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			crd.Status.Conditions = tt.conditions
			if tt.requested > 0 {
				crd.Annotations = map[string]string{module.EstablishRequestedAnnotation: now.Add(-tt.requested).Format(time.RFC3339)}
			}
			if tt.deleting {
				crd.DeletionTimestamp = &metav1.Time{Time: now}
			}
			touch, wait := establishDue(crd, now)
			assert.Equal(t, tt.touch, touch, "touch")
			assert.Equal(t, tt.wait, wait, "wait")
		})
	}
}
