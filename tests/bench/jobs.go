package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// watchJobs times each build Job's creation and its completion: it tells
// where the time to all Running goes (the builds themselves, refilling a free
// slot, or the Deployments after the last build).
func watchJobs(ctx context.Context, wc client.WithWatch) (*timeline, error) {
	return watchTimeline(ctx, wc, &batchv1.JobList{}, func(obj client.Object) (bool, string) {
		return jobCondition(obj.(*batchv1.Job), batchv1.JobComplete), "not complete"
	}, client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController})
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobFigures sum up a timeline.
type jobFigures struct {
	jobs, completed        int
	buildMedian, buildMean time.Duration // Job seen → seen Complete
	refillMedian           time.Duration // a Job seen Complete → the next Job seen, while Jobs were still to start
	busySlots              float64       // mean builds in flight between the first Job and the last completion
	lastComplete           time.Time
}

func jobFiguresOf(t *timeline) jobFigures {
	added, complete := t.end()
	f := jobFigures{jobs: len(added), completed: len(complete)}
	var builds []time.Duration
	var total time.Duration
	var adds, completes []time.Time
	var first time.Time
	for key, a := range added {
		adds = append(adds, a)
		if first.IsZero() || a.Before(first) {
			first = a
		}
		if c, ok := complete[key]; ok {
			builds = append(builds, c.Sub(a))
			total += c.Sub(a)
			completes = append(completes, c)
			if c.After(f.lastComplete) {
				f.lastComplete = c
			}
		}
	}
	if len(builds) == 0 {
		return f
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i] < builds[j] })
	f.buildMedian, f.buildMean = builds[len(builds)/2], total/time.Duration(len(builds))
	if span := f.lastComplete.Sub(first); span > 0 {
		f.busySlots = float64(total) / float64(span)
	}
	sort.Slice(adds, func(i, j int) bool { return adds[i].Before(adds[j]) })
	lastAdd := adds[len(adds)-1]
	var refills []time.Duration
	for _, c := range completes {
		if !c.Before(lastAdd) {
			continue
		}
		i := sort.Search(len(adds), func(i int) bool { return !adds[i].Before(c) })
		refills = append(refills, adds[i].Sub(c))
	}
	if len(refills) > 0 {
		sort.Slice(refills, func(i, j int) bool { return refills[i] < refills[j] })
		f.refillMedian = refills[len(refills)/2]
	}
	return f
}

func (f jobFigures) String() string {
	return fmt.Sprintf("%d Jobs (%d seen Complete): Job created → Complete median %s (mean %s; the Job controller and the simulated Pod), "+
		"a slot refilled median %s after a Job completed, %.1f builds in flight on average",
		f.jobs, f.completed, f.buildMedian.Round(time.Millisecond), f.buildMean.Round(time.Millisecond),
		f.refillMedian.Round(time.Millisecond), f.busySlots)
}
