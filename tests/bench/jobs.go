package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// jobTimeline records, by watch with this machine's clock, when each build
// Job appeared and when it was seen Complete: it tells where the time to
// all Running goes (the builds themselves, refilling a free slot, or the
// Deployments after the last build).
type jobTimeline struct {
	mu       sync.Mutex
	added    map[string]time.Time
	complete map[string]time.Time
	stop     context.CancelFunc
	done     chan struct{}
}

func watchJobs(ctx context.Context, wc client.WithWatch) (*jobTimeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := wc.Watch(ctx, &batchv1.JobList{}, client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController})
	if err != nil {
		cancel()
		return nil, err
	}
	t := &jobTimeline{added: map[string]time.Time{}, complete: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			key, now := j.Namespace+"/"+j.Name, time.Now()
			t.mu.Lock()
			if _, seen := t.added[key]; !seen {
				t.added[key] = now
			}
			if _, seen := t.complete[key]; !seen && jobCondition(j, batchv1.JobComplete) {
				t.complete[key] = now
			}
			t.mu.Unlock()
		}
	}()
	return t, nil
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

func (t *jobTimeline) figures() jobFigures {
	t.stop()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	f := jobFigures{jobs: len(t.added), completed: len(t.complete)}
	var builds []time.Duration
	var total time.Duration
	var adds, completes []time.Time
	var first time.Time
	for key, a := range t.added {
		adds = append(adds, a)
		if first.IsZero() || a.Before(first) {
			first = a
		}
		if c, ok := t.complete[key]; ok {
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
