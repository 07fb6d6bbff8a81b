package resources

import (
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// UpdateConfigMap returns live with desired's data and labels when either
// differs (1.8.4 compares exactly these), else (nil, false).
func UpdateConfigMap(live, desired *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
	if maps.Equal(live.Data, desired.Data) && maps.Equal(live.Labels, desired.Labels) {
		return nil, false
	}
	out := live.DeepCopy()
	out.Data = cloneMap(desired.Data)
	out.Labels = cloneMap(desired.Labels)
	return out, true
}

// UpdateJob returns live with desired's labels when they differ, else
// (nil, false). Nothing else of a Job is updated: its Pod template is
// immutable, and a changed build is a new Job (JobDestination differs).
func UpdateJob(live, desired *batchv1.Job) (*batchv1.Job, bool) {
	if maps.Equal(live.Labels, desired.Labels) {
		return nil, false
	}
	out := live.DeepCopy()
	out.Labels = cloneMap(desired.Labels)
	return out, true
}
