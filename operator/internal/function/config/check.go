package config

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// CheckCustom checks a Function's own resources (req.Resources; profiles are
// trusted, the operator wrote them): every CPU and memory request and limit
// given must be at least MinRequestedCPU / MinRequestedMemory, and a request
// must not exceed its limit. A quantity left out is not checked (Kubernetes
// defaults a missing request to the limit). nil when fine or when req has no
// resources. The message names the fields, e.g.
// "resources.requests.cpu 5m is below the minimum 10m"; the caller prefixes
// the block (spec.resourceConfiguration.function) for the condition.
func (p Presets) CheckCustom(req *v1alpha2.ResourceRequirements) error {
	if req == nil || req.Resources == nil {
		return nil
	}
	res := req.Resources
	var problems []string
	for _, c := range []struct {
		field string
		list  corev1.ResourceList
		name  corev1.ResourceName
		min   resource.Quantity
	}{
		{"resources.requests.cpu", res.Requests, corev1.ResourceCPU, p.MinRequestedCPU},
		{"resources.requests.memory", res.Requests, corev1.ResourceMemory, p.MinRequestedMemory},
		{"resources.limits.cpu", res.Limits, corev1.ResourceCPU, p.MinRequestedCPU},
		{"resources.limits.memory", res.Limits, corev1.ResourceMemory, p.MinRequestedMemory},
	} {
		if q, ok := c.list[c.name]; ok && q.Cmp(c.min) < 0 {
			problems = append(problems, fmt.Sprintf("%s %s is below the minimum %s", c.field, q.String(), c.min.String()))
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		request, hasRequest := res.Requests[name]
		limit, hasLimit := res.Limits[name]
		if hasRequest && hasLimit && request.Cmp(limit) > 0 {
			problems = append(problems, fmt.Sprintf("resources.requests.%s %s is above resources.limits.%s %s",
				name, request.String(), name, limit.String()))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}
