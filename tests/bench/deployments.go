package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// deploymentTimeline records, from a watch, when each Function Deployment
// was first seen and first had an available replica: it splits the time to
// Running into the controller's part (creating the Deployments, writing
// the status) and the cluster's (ReplicaSets, Pods, scheduling).
type deploymentTimeline struct {
	mu               sync.Mutex
	added, available map[string]time.Time
	stop             context.CancelFunc
	done             chan struct{}
}

func watchDeployments(ctx context.Context, wc client.WithWatch) (*deploymentTimeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	sel := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	w, err := wc.Watch(ctx, &appsv1.DeploymentList{}, sel)
	if err != nil {
		cancel()
		return nil, err
	}
	t := &deploymentTimeline{added: map[string]time.Time{}, available: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			t.record(w)
			w.Stop()
			// The API server ends a watch now and then: watch again (the
			// first sight of an object is what counts).
			time.Sleep(100 * time.Millisecond)
			if w, err = wc.Watch(ctx, &appsv1.DeploymentList{}, sel); err != nil {
				return
			}
		}
	}()
	return t, nil
}

// record notes the events of one watch until it ends.
func (t *deploymentTimeline) record(w watch.Interface) {
	for ev := range w.ResultChan() {
		d, ok := ev.Object.(*appsv1.Deployment)
		if !ok || ev.Type == watch.Deleted {
			if ev.Type == watch.Error {
				fmt.Fprintf(os.Stderr, "[bench] Deployment watch: %v\n", ev.Object)
			}
			continue
		}
		key, now := d.Namespace+"/"+d.Name, time.Now()
		t.mu.Lock()
		if _, seen := t.added[key]; !seen {
			t.added[key] = now
		}
		if _, seen := t.available[key]; !seen && d.Status.AvailableReplicas > 0 {
			t.available[key] = now
		}
		t.mu.Unlock()
	}
}

// deploymentFigures: when, after start, the last Deployment was created and
// the last one became available.
type deploymentFigures struct {
	count                      int
	lastCreated, lastAvailable time.Duration
}

func (t *deploymentTimeline) figures(start time.Time) deploymentFigures {
	t.stop()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	f := deploymentFigures{count: len(t.added)}
	for _, at := range t.added {
		f.lastCreated = max(f.lastCreated, at.Sub(start))
	}
	for _, at := range t.available {
		f.lastAvailable = max(f.lastAvailable, at.Sub(start))
	}
	return f
}
