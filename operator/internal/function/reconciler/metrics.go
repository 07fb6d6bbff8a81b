package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
)

// Metrics of builds. Reconcile counts, durations and errors come from
// controller-runtime (controller="function").
type Metrics struct {
	started  prometheus.Counter
	failed   prometheus.Counter
	duration prometheus.Histogram
	queue    prometheus.Gauge
}

// NewMetrics registers the build metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "serverless_function_builds_started_total", Help: "Build Jobs created.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "serverless_function_builds_failed_total", Help: "Build Jobs seen failed.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "serverless_function_build_duration_seconds", Help: "Duration of successful build Jobs, start to completion.",
			Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800},
		}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "serverless_function_build_queue_length", Help: "Functions waiting for a build slot.",
		}),
	}
	for _, c := range []prometheus.Collector{m.started, m.failed, m.duration, m.queue} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// BuildStarted counts a created build Job.
func (m *Metrics) BuildStarted() { m.started.Inc() }

// BuildFailed counts a failed build Job, once per failure seen.
func (m *Metrics) BuildFailed() { m.failed.Inc() }

// ObserveBuild records the duration of a finished build Job.
func (m *Metrics) ObserveBuild(j *batchv1.Job) {
	if j.Status.StartTime != nil && j.Status.CompletionTime != nil {
		m.duration.Observe(j.Status.CompletionTime.Sub(j.Status.StartTime.Time).Seconds())
	}
}

// SetQueueLength reports the Functions waiting for a build slot.
func (m *Metrics) SetQueueLength(n int) { m.queue.Set(float64(n)) }
