// Package metrics exports the manager's own Prometheus metrics next to
// controller-runtime's on the metrics endpoint.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// Metrics of the Serverless reconciler.
type Metrics struct {
	stepDuration   *prometheus.HistogramVec
	renderDuration prometheus.Histogram
	state          *prometheus.GaugeVec
	applied        prometheus.Counter
	pruned         prometheus.Counter
	registry       *prometheus.GaugeVec
}

var states = []v1alpha1.State{v1alpha1.StateProcessing, v1alpha1.StateReady, v1alpha1.StateError, v1alpha1.StateWarning, v1alpha1.StateDeleting}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "serverless_manager_reconcile_step_duration_seconds",
			Help:    "Duration of each reconcile step.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"step"}),
		renderDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "serverless_manager_render_duration_seconds",
			Help:    "Duration of rendering the Serverless chart.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12),
		}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "serverless_manager_state",
			Help: "1 for the current state of each Serverless CR, 0 for the other states.",
		}, []string{"namespace", "name", "state"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "serverless_manager_objects_applied_total",
			Help: "Objects sent to the API server with server-side apply.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "serverless_manager_objects_pruned_total",
			Help: "Objects deleted because they left the chart.",
		}),
		registry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "serverless_manager_internal_registry",
			Help: "The internal registry as its agent last measured it: used_bytes, total_bytes (of its volume), images.",
		}, []string{"namespace", "figure"}),
	}
	for _, c := range []prometheus.Collector{m.stepDuration, m.renderDuration, m.state, m.applied, m.pruned, m.registry} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveStep records the duration of a reconcile step.
func (m *Metrics) ObserveStep(step string, d time.Duration) {
	m.stepDuration.WithLabelValues(step).Observe(d.Seconds())
}

// ObserveRender records the duration of a chart render.
func (m *Metrics) ObserveRender(d time.Duration) { m.renderDuration.Observe(d.Seconds()) }

// SetState sets the state gauge of a CR.
func (m *Metrics) SetState(namespace, name string, state v1alpha1.State) {
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(namespace, name, string(s)).Set(v)
	}
}

// DeleteState drops the state series of a CR that is gone.
func (m *Metrics) DeleteState(namespace, name string) {
	m.state.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}

// AddApplied counts applied objects.
func (m *Metrics) AddApplied(n int) { m.applied.Add(float64(n)) }

// AddPruned counts pruned objects.
func (m *Metrics) AddPruned(n int) { m.pruned.Add(float64(n)) }

// SetRegistryUsage records the internal registry's figures (nil drops them).
func (m *Metrics) SetRegistryUsage(namespace string, u *v1alpha1.RegistryUsage) {
	if u == nil {
		m.registry.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
		return
	}
	m.registry.WithLabelValues(namespace, "used_bytes").Set(float64(u.UsedBytes))
	m.registry.WithLabelValues(namespace, "total_bytes").Set(float64(u.TotalBytes))
	m.registry.WithLabelValues(namespace, "images").Set(float64(u.Images))
}
