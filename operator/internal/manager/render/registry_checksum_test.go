package render_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// The registry writes its htpasswd file once at start: new credentials
// (e.g. generated after the Secret was deleted) must change its Pod
// template, so the registry restarts with them instead of answering 401.
func TestRegistryPodTemplateFollowsTheCredentials(t *testing.T) {
	r := renderer(t)
	internal := v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}
	template := func(creds values.Credentials) map[string]any {
		v := variant{spec: internal, facts: values.Facts{Nodes: 3, NodePort: 32137, InternalCredentials: &creds}}
		for _, o := range v.render(t, r) {
			if o.GetKind() == "Deployment" && o.GetName() == module.RegistryServiceName {
				tpl, found, err := unstructured.NestedMap(o.Object, "spec", "template")
				require.NoError(t, err)
				require.True(t, found)
				return tpl
			}
		}
		t.Fatal("no registry Deployment rendered")
		return nil
	}
	tests := []struct {
		name       string
		a, b       values.Credentials
		wantChange bool
	}{
		{"same credentials", values.Credentials{Username: "u1", Password: "p1"}, values.Credentials{Username: "u1", Password: "p1"}, false},
		{"new password", values.Credentials{Username: "u1", Password: "p1"}, values.Credentials{Username: "u1", Password: "p2"}, true},
		{"new username", values.Credentials{Username: "u1", Password: "p1"}, values.Credentials{Username: "u2", Password: "p1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := template(tt.a), template(tt.b)
			if tt.wantChange {
				assert.NotEqual(t, a, b)
			} else {
				assert.Equal(t, a, b)
			}
			ann, _, _ := unstructured.NestedStringMap(a, "metadata", "annotations")
			assert.NotContains(t, ann["checksum/credentials"], tt.a.Password, "the annotation holds no password")
		})
	}
}
