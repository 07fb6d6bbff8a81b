package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

func cr(ns, name string, created int, served metav1.ConditionStatus, deleting bool) v1alpha1.Serverless {
	c := v1alpha1.Serverless{}
	c.Namespace, c.Name, c.UID = ns, name, types.UID(ns+"/"+name)
	c.CreationTimestamp = metav1.NewTime(time.Unix(int64(created), 0))
	c.Status.Served = served
	if deleting {
		now := metav1.Now()
		c.DeletionTimestamp = &now
	}
	return c
}

func TestPickServed(t *testing.T) {
	const ns = "kyma-system"
	tests := []struct {
		name  string
		items []v1alpha1.Serverless
		want  string
	}{
		{"none", nil, ""},
		{"single", []v1alpha1.Serverless{cr(ns, "default", 10, "", false)}, "default"},
		{"oldest wins", []v1alpha1.Serverless{cr(ns, "b", 20, "", false), cr(ns, "a", 30, "", false)}, "b"},
		{"same instant: name breaks the tie", []v1alpha1.Serverless{cr(ns, "zz", 10, "", false), cr(ns, "aa", 10, "", false)}, "aa"},
		{"served stays served even if younger", []v1alpha1.Serverless{cr(ns, "old", 1, metav1.ConditionFalse, false), cr(ns, "young", 9, metav1.ConditionTrue, false)}, "young"},
		{"served while uninstalling blocks others", []v1alpha1.Serverless{cr(ns, "first", 1, metav1.ConditionTrue, true), cr(ns, "second", 2, metav1.ConditionFalse, false)}, "first"},
		{"deleting unserved CR is not picked", []v1alpha1.Serverless{cr(ns, "first", 1, "", true), cr(ns, "second", 2, metav1.ConditionFalse, false)}, "second"},
		{"any namespace is served", []v1alpha1.Serverless{cr("default", "x", 1, "", false)}, "default/x"},
		{"oldest across namespaces", []v1alpha1.Serverless{cr(ns, "default", 20, "", false), cr("team-a", "default", 10, "", false)}, "team-a/default"},
		{"same instant across namespaces: namespace breaks the tie", []v1alpha1.Serverless{cr("team-b", "a", 10, "", false), cr("team-a", "z", 10, "", false)}, "team-a/z"},
		{"served in another namespace keeps it against an older CR", []v1alpha1.Serverless{cr(ns, "default", 1, metav1.ConditionFalse, false), cr("team-a", "default", 5, metav1.ConditionTrue, false)}, "team-a/default"},
		{"takeover across namespaces once the served one is gone", []v1alpha1.Serverless{cr("team-b", "late", 9, metav1.ConditionFalse, false), cr("team-a", "early", 5, metav1.ConditionFalse, false)}, "team-a/early"},
		{"all deleting, none served", []v1alpha1.Serverless{cr("team-a", "x", 1, "", true)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pickServed(tt.items)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				want := tt.want
				if !strings.Contains(want, "/") {
					want = ns + "/" + want
				}
				assert.Equal(t, want, got.Namespace+"/"+got.Name)
			}
		})
	}
}
