package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// writeStatus writes the status this pass computed, once, and only when it
// differs from the one read (1.8.4 wrote it on every pass). Then
// it emits the events of the conditions that changed. A write it defers
// (a running build's only news) returns when to come again.
func (r *Reconciler) writeStatus(ctx context.Context, p *pass) (later time.Duration, err error) {
	if p.keepStatus || equality.Semantic.DeepEqual(p.fn.Status, p.status) {
		return 0, nil
	}
	if p.buildReportIn > 0 && onlyBuildNews(&p.fn.Status, &p.status) {
		return p.buildReportIn, nil
	}
	fn := p.fn.DeepCopy()
	fn.Status = p.status
	// A merge patch without resourceVersion: the status is computed from the
	// whole cached picture, so no conflict is possible or needed.
	if err := r.client.Status().Patch(ctx, fn, client.MergeFrom(p.fn)); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("writing the status of Function %s: %w", p.key, err)
	}
	r.awaitVersion(ctx, fn)
	for _, e := range statusEvents(&p.fn.Status, &p.status) {
		r.events.Eventf(fn, nil, e.kind, e.reason, e.action, "%s", e.message)
	}
	r.observeBuilds(p)
	return 0, nil
}

// onlyBuildNews: cur differs from old in nothing but the BuildReady
// condition and the runtime image a build uses.
func onlyBuildNews(old, cur *v1alpha2.FunctionStatus) bool {
	st := cur.DeepCopy()
	st.RuntimeImage, st.Conditions = old.RuntimeImage, nil
	for _, c := range cur.Conditions {
		if c.Type == v1alpha2.ConditionBuildReady {
			prev := old.Condition(c.Type)
			if prev == nil {
				continue
			}
			c = *prev
		}
		st.Conditions = append(st.Conditions, c)
	}
	// (Semantic equality: nil and empty lists are equal.)
	return equality.Semantic.DeepEqual(*old, *st)
}

// mirrorStatus derives the status fields that repeat others: the spec
// warnings leading ConfigurationReady's message while it is True
// (specWarnings), and status.gitRepository (release 1.13's field) from the
// top-level commit, reference and baseDir that 1.8.4's clients read.
func mirrorStatus(p *pass) {
	if c := p.status.Condition(v1alpha2.ConditionConfigurationReady); c != nil {
		var warnings []string
		if c.Status == corev1.ConditionTrue {
			warnings = specWarnings(p.fn, p.in.Config)
		}
		c.Message = withWarnings(c.Message, warnings)
	}
	st := &p.status
	repo := p.fn.Spec.Source.GitRepository
	if repo == nil || st.Commit == "" {
		st.GitRepository = nil
		return
	}
	st.GitRepository = &v1alpha2.GitRepositoryStatus{URL: repo.URL, Repository: st.Repository, Commit: st.Commit}
}

// observeBuilds counts what the status just written records for the first
// time, so that a build is counted once however many passes saw it.
func (r *Reconciler) observeBuilds(p *pass) {
	if p.finishedJob != nil && p.fn.Status.BuiltImage != p.status.BuiltImage {
		r.metrics.ObserveBuild(p.finishedJob)
	}
	old, cur := p.fn.Status.Condition(v1alpha2.ConditionBuildReady), p.status.Condition(v1alpha2.ConditionBuildReady)
	if cur != nil && cur.Reason == v1alpha2.ReasonJobFailed &&
		(old == nil || old.Reason != cur.Reason || old.Message != cur.Message) {
		r.metrics.BuildFailed()
	}
}

type statusEvent struct{ kind, reason, action, message string }

// statusEvents are the events a status change is worth: a Warning when a
// condition becomes False (or fails for another reason) or its message
// leads with a spec warning it did not have (specWarnings), and a Normal
// when a condition that was False becomes True again, closing that Warning.
// Progress that goes as expected is in the status only: an event is a
// write, and one per Function per build would be most of a quiet
// Function's API traffic. Repeats of the same condition, and a new message
// behind the same warnings, emit nothing.
func statusEvents(old, cur *v1alpha2.FunctionStatus) []statusEvent {
	var out []statusEvent
	for _, c := range cur.Conditions {
		prev := old.Condition(c.Type)
		if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
			continue
		}
		switch {
		case c.Status == corev1.ConditionFalse || newWarning(prevMessage(prev), c.Message):
			out = append(out, statusEvent{corev1.EventTypeWarning, c.Reason, "Reconcile", c.Message})
		case c.Status == corev1.ConditionTrue && prev != nil && prev.Status == corev1.ConditionFalse:
			out = append(out, statusEvent{corev1.EventTypeNormal, c.Reason, "Reconcile", c.Message})
		}
	}
	return out
}

func prevMessage(c *v1alpha2.Condition) string {
	if c == nil {
		return ""
	}
	return c.Message
}
