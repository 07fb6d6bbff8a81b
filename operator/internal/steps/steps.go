// Package steps is the one step contract of the module's reconcilers (the
// manager's Serverless reconciler and the Function controller's): a
// reconcile is a list of named steps over a state typed per reconciler,
// each step says with one Outcome how the reconcile goes on, and Run runs
// the list, times and logs every step, and turns the outcomes into
// controller-runtime's result.
package steps

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Step is one named part of a reconcile over the state S (a pointer: steps
// fill it in for the later ones and for what the reconciler does after the
// run, e.g. writing the status).
//
// Run returns what the reconcile does next, and an error the reconcile
// cannot handle itself: a non-nil error ends the run whatever the outcome,
// and is returned for controller-runtime's retry with backoff (steps
// return Outcome{} beside it, or Fail with the cause when they know it).
type Step[S any] struct {
	Name string // the log's and the metrics' name of the step
	Run  func(ctx context.Context, s S) (Outcome, error)
}

// flow is where the run goes after a step.
type flow uint8

const (
	flowNext    flow = iota // the next step runs
	flowStop                // the run ends here
	flowRequeue             // the run ends here and comes again soon
	flowFail                // the run ends here: it failed for a cause
)

// Outcome is what a step decided for the rest of its run: go on, stop,
// requeue, or fail with a cause; and at the latest when the reconcile runs
// again. The zero value goes on. Conditions and status stay the
// reconciler's: a step that fails sets its condition itself, the outcome
// only ends the run and names the cause in the log.
type Outcome struct {
	flow  flow
	after time.Duration // run again after this at the latest (0: on the next event)
	cause string        // why the run failed (flowFail)
}

// Next goes on with the next step.
func Next() Outcome { return Outcome{} }

// Stop ends the run here; the next event brings the next reconcile.
func Stop() Outcome { return Outcome{flow: flowStop} }

// Requeue ends the run here and reconciles again soon, with the
// controller's rate limit (e.g. after a conflict on a stale read).
func Requeue() Outcome { return Outcome{flow: flowRequeue} }

// RequeueAfter ends the run here and reconciles again after d at the
// latest (d <= 0: Stop).
func RequeueAfter(d time.Duration) Outcome { return Stop().Within(d) }

// Fail ends the run here: it failed for cause (a condition reason), which
// the step has put into the status. Without an error beside it the
// reconcile is not retried with backoff: a change (or Within) brings the
// next.
func Fail(cause string) Outcome { return Outcome{flow: flowFail, cause: cause} }

// Within keeps o's flow and asks for a reconcile after d at the latest
// (d <= 0: no such ask). The earliest ask of a run wins, so steps that
// wait for different things each get their reconcile.
func (o Outcome) Within(d time.Duration) Outcome {
	o.after = sooner(o.after, d)
	return o
}

// Ends reports whether o ends the run: for a step made of parts that each
// return an outcome, which stops at the first part that ends it.
func (o Outcome) Ends() bool { return o.flow != flowNext }

// String names the outcome's flow for the log.
func (o Outcome) String() string {
	switch o.flow {
	case flowStop:
		return "stop"
	case flowRequeue:
		return "requeue"
	case flowFail:
		return "fail"
	}
	return "next"
}

// Observer is told how long each step took (metrics); nil: nobody.
type Observer func(step string, took time.Duration)

// Run runs list on s in order until a step ends the run or returns an
// error. Each step is timed, told to observe and logged at V(1) with its
// name, duration and outcome. The result requeues after the earliest
// Within/RequeueAfter of the steps that ran, or at once after Requeue; an
// error comes back as "step <name>: <error>" with an empty result.
func Run[S any](ctx context.Context, s S, list []Step[S], observe Observer) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx).V(1)
	var after time.Duration
	requeue := false
	for _, st := range list {
		start := time.Now()
		o, err := st.Run(ctx, s)
		took := time.Since(start)
		if observe != nil {
			observe(st.Name, took)
		}
		if log.Enabled() {
			kv := []any{"step", st.Name, "took", took, "outcome", o.String()}
			if o.after > 0 {
				kv = append(kv, "after", o.after)
			}
			if o.cause != "" {
				kv = append(kv, "cause", o.cause)
			}
			if err != nil {
				kv = append(kv, "error", err.Error())
			}
			log.Info("step", kv...)
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("step %s: %w", st.Name, err)
		}
		after = sooner(after, o.after)
		requeue = requeue || o.flow == flowRequeue
		if o.Ends() {
			break
		}
	}
	if requeue {
		// controller-runtime's RequeueAfter would win over Requeue; a
		// step asked for at once.
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue has no other spelling
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// Sooner returns res, requeued after d at the latest (d <= 0: res): for what
// a reconciler decides after its run (e.g. a status write it defers).
func Sooner(res ctrl.Result, d time.Duration) ctrl.Result {
	res.RequeueAfter = sooner(res.RequeueAfter, d)
	return res
}

// sooner is the earlier of two requeue delays, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if b > 0 && (a == 0 || b < a) {
		return b
	}
	return a
}
