package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

// revisionAnnotation numbers a Deployment's ReplicaSets (set by the
// Deployment controller).
const revisionAnnotation = "deployment.kubernetes.io/revision"

// keepRefs are the images of the registry (known by addresses) that
// cluster objects refer to. going tells that some are held only by
// ReplicaSets of Deployments that went (their Pods still terminate): a
// later round can delete them.
func (c *Cleaner) keepRefs(ctx context.Context, addresses ...string) (refs []Ref, going bool, err error) {
	add := func(image string) {
		if r, ok := ParseRef(image, addresses...); ok {
			refs = append(refs, r)
		}
	}
	managed := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}

	var deployments appsv1.DeploymentList
	if err := c.Reader.List(ctx, &deployments, managed); err != nil {
		return nil, false, fmt.Errorf("listing Function Deployments: %w", err)
	}
	owners := map[types.UID]bool{}
	for i := range deployments.Items {
		podImages(&deployments.Items[i].Spec.Template.Spec, add)
		owners[deployments.Items[i].UID] = deployments.Items[i].DeletionTimestamp == nil
	}

	var replicaSets appsv1.ReplicaSetList
	if err := c.API.List(ctx, &replicaSets, managed); err != nil {
		return nil, false, fmt.Errorf("listing the ReplicaSets of Function Deployments: %w", err)
	}
	for _, rs := range rollbackTargets(replicaSets.Items) {
		podImages(&rs.Spec.Template.Spec, add)
		if owner := metav1.GetControllerOf(rs); rs.DeletionTimestamp != nil || (owner != nil && !owners[owner.UID]) {
			going = true
		}
	}

	var fns v1alpha2.FunctionList
	if err := c.Reader.List(ctx, &fns); err != nil {
		return nil, false, fmt.Errorf("listing Functions: %w", err)
	}
	for i := range fns.Items {
		if o := fns.Items[i].Spec.RuntimeImageOverride; o != "" {
			add(o)
		}
	}
	if c.Config.Mode == config.ModeBuildless {
		// No build Jobs and no runtime Dockerfiles: Functions run the
		// runtime images, which the Deployments name.
		return refs, going, nil
	}

	var jobs batchv1.JobList
	if err := c.Reader.List(ctx, &jobs, managed); err != nil {
		return nil, false, fmt.Errorf("listing build Jobs: %w", err)
	}
	for _, j := range buildsToKeep(jobs.Items) {
		if d := resources.JobDestination(j); d != "" {
			add(d)
		}
	}

	var runtimes corev1.ConfigMapList
	if err := c.Reader.List(ctx, &runtimes, client.InNamespace(c.Config.BaseNamespace),
		client.MatchingLabels{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}); err != nil {
		return nil, false, fmt.Errorf("listing runtime ConfigMaps: %w", err)
	}
	for i := range runtimes.Items {
		if base, err := build.BaseImageOf(runtimes.Items[i].Data["Dockerfile"]); err == nil {
			add(base)
		}
	}
	return refs, going, nil
}

// buildsToKeep are, per Function, the build Jobs whose images must stay:
// the newest (its image may not run yet, or it still builds), any other
// unfinished one, and the two newest that succeeded (the running image and
// the one before it: Function Deployments keep no old ReplicaSets, so a
// rollback means running that build's image again). Older builds'
// images go even though the controller keeps their Jobs.
func buildsToKeep(all []batchv1.Job) []*batchv1.Job {
	byFunction := map[string][]*batchv1.Job{}
	for i := range all {
		j := &all[i]
		key := j.Namespace + "/" + j.Labels[v1alpha2.LabelUUID] + "/" + j.Labels[v1alpha2.LabelFunctionName]
		byFunction[key] = append(byFunction[key], j)
	}
	var out []*batchv1.Job
	for _, jobs := range byFunction {
		sort.Slice(jobs, func(a, b int) bool { return jobs[b].CreationTimestamp.Before(&jobs[a].CreationTimestamp) })
		succeeded := 0
		for i, j := range jobs {
			switch {
			case i == 0, !jobFinished(j):
				out = append(out, j)
			case succeeded < 2 && jobSucceeded(j):
				out = append(out, j)
			}
			if jobSucceeded(j) {
				succeeded++
			}
		}
	}
	return out
}

func jobSucceeded(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) }

func jobFinished(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) || jobCondition(j, batchv1.JobFailed)
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podImages(spec *corev1.PodSpec, add func(string)) {
	for _, image := range images(spec) {
		add(image)
	}
}

func images(spec *corev1.PodSpec) []string {
	var out []string
	for _, ctr := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		out = append(out, ctr.Image)
	}
	return out
}

// rollbackTargets are the ReplicaSets whose images must stay: those with
// Pods, and per Deployment the two newest revisions (the current one and
// the one a rollback returns to).
func rollbackTargets(all []appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	byOwner := map[string][]*appsv1.ReplicaSet{}
	var out []*appsv1.ReplicaSet
	for i := range all {
		rs := &all[i]
		if rs.Status.Replicas > 0 {
			out = append(out, rs)
		}
		owner := ""
		if ref := metav1.GetControllerOf(rs); ref != nil {
			owner = string(ref.UID)
		}
		byOwner[owner] = append(byOwner[owner], rs)
	}
	for _, sets := range byOwner {
		sort.Slice(sets, func(i, j int) bool { return revision(sets[i]) > revision(sets[j]) })
		out = append(out, sets[:min(2, len(sets))]...)
	}
	return out
}

func revision(rs *appsv1.ReplicaSet) int {
	n, _ := strconv.Atoi(rs.Annotations[revisionAnnotation])
	return n
}
