package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func selectorDeployment(name string, selector, podLabels map[string]any) *unstructured.Unstructured {
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "kyma-system"},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": selector},
			"template": map[string]any{"metadata": map[string]any{"labels": podLabels}},
		},
	}}
	return d
}

func TestKeepSelector(t *testing.T) {
	upstream := map[string]any{"app": "serverless", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/instance": "serverless"}
	earlier := map[string]any{"app.kubernetes.io/name": "serverless", "app.kubernetes.io/component": "controller", "app.kubernetes.io/instance": "serverless"}
	pods := map[string]any{"app": "serverless", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/component": "controller",
		"app.kubernetes.io/instance": "serverless", "kyma-project.io/module": "serverless"}
	metaOnly := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "ctrl"}}}

	tests := []struct {
		name         string
		live         *unstructured.Unstructured
		wantSelector map[string]any
		wantChanged  bool
	}{
		{name: "no live Deployment: the chart's", live: nil, wantSelector: upstream},
		{name: "live metadata only (not cached): the chart's", live: metaOnly, wantSelector: upstream},
		{name: "live equals the chart's", live: selectorDeployment("ctrl", upstream, pods), wantSelector: upstream},
		{name: "earlier install of this chart keeps its selector", live: selectorDeployment("ctrl", earlier, pods), wantSelector: earlier, wantChanged: true},
		{name: "a live selector the Pods would not match stays the chart's (the apply reports it)",
			live: selectorDeployment("ctrl", map[string]any{"app": "other"}, pods), wantSelector: upstream},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rendered := selectorDeployment("ctrl", upstream, pods)
			before := rendered.DeepCopy()
			got, changed, err := keepSelector(rendered, tc.live)
			require.NoError(t, err)
			assert.Equal(t, tc.wantChanged, changed)
			sel, _, _ := unstructured.NestedMap(got.Object, "spec", "selector", "matchLabels")
			assert.Equal(t, tc.wantSelector, sel)
			assert.Equal(t, before, rendered, "the rendered object is never modified")
		})
	}
}

func TestKeepLiveSelectorsCopiesOnlyWhatChanges(t *testing.T) {
	pods := map[string]any{"a": "1", "b": "2"}
	ctrl := selectorDeployment("ctrl", map[string]any{"a": "1"}, pods)
	reg := selectorDeployment("registry", map[string]any{"a": "1"}, pods)
	live := fakeLive{"Deployment/ctrl": selectorDeployment("ctrl", map[string]any{"b": "2"}, pods)}
	r := &Reconciler{live: live}

	objs := []*unstructured.Unstructured{ctrl, reg}
	out, err := r.keepLiveSelectors(context.Background(), objs)
	require.NoError(t, err)
	require.Len(t, out, 2)
	sel, _, _ := unstructured.NestedMap(out[0].Object, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]any{"b": "2"}, sel)
	assert.Same(t, reg, out[1], "an unchanged Deployment is passed as it is")
	assert.Same(t, ctrl, objs[0], "the caller's slice is untouched")
	sel, _, _ = unstructured.NestedMap(ctrl.Object, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]any{"a": "1"}, sel)
}
