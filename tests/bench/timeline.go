package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timeline records, from one watch and with this machine's clock, when each
// object was first seen and when it first reached a state. A watch costs the
// API server one encoding per change, where polling lists would cost one
// per object per poll (on 2 cores the bench must not take the CPU the
// measured controller needs), and it times each change to the event rather
// than to the poll that noticed it.
type timeline struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	reached map[string]time.Time
	// current holds every object that exists now: "" when it is in the
	// state, else what it waits on (an object can leave the state again).
	current map[string]string
	stop    context.CancelFunc
	done    chan struct{}
}

// stateFunc tells whether an object is in the state a timeline records and,
// when not, what it waits on.
type stateFunc func(client.Object) (reached bool, waiting string)

// watchTimeline watches list's kind with opts until the timeline's
// summary is taken.
func watchTimeline(ctx context.Context, wc client.WithWatch, list client.ObjectList, state stateFunc, opts ...client.ListOption) (*timeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := wc.Watch(ctx, list, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	t := &timeline{seen: map[string]time.Time{}, reached: map[string]time.Time{}, current: map[string]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			t.record(ctx, w, state)
			w.Stop()
			// The API server ends a watch now and then: watch again. A new
			// watch starts with every object as it is now, so the current
			// states stay right; first sightings keep their earlier time.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if w, err = wc.Watch(ctx, list, opts...); err != nil {
				return
			}
		}
	}()
	return t, nil
}

// record notes the events of one watch until it ends.
func (t *timeline) record(ctx context.Context, w watch.Interface, state stateFunc) {
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(client.Object)
		if !ok || ev.Type == watch.Error {
			// A watch ended by end() reports its cancellation: no news.
			if ev.Type == watch.Error && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "[bench] watch: %v\n", ev.Object)
			}
			continue
		}
		key, now := obj.GetNamespace()+"/"+obj.GetName(), time.Now()
		t.mu.Lock()
		if ev.Type == watch.Deleted {
			delete(t.current, key)
			t.mu.Unlock()
			continue
		}
		if _, ok := t.seen[key]; !ok {
			t.seen[key] = now
		}
		reached, waiting := state(obj)
		if !reached && waiting == "" {
			waiting = "not yet"
		}
		t.current[key] = waiting
		if reached {
			t.current[key] = ""
			if _, ok := t.reached[key]; !ok {
				t.reached[key] = now
			}
		}
		t.mu.Unlock()
	}
}

// progress: how many objects are in the state now, and what the others
// wait on (counted per reason).
func (t *timeline) progress() (inState int, others map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	others = map[string]int{}
	for _, why := range t.current {
		if why == "" {
			inState++
			continue
		}
		others[why]++
	}
	return inState, others
}

// end stops the watch; the recorded times are then the caller's. Ending
// again returns them again.
func (t *timeline) end() (seen, reached map[string]time.Time) {
	t.stop()
	<-t.done
	return t.seen, t.reached
}

// last is the latest of times, as a duration after start.
func last(times map[string]time.Time, start time.Time) time.Duration {
	var d time.Duration
	for _, at := range times {
		d = max(d, at.Sub(start))
	}
	return d
}
