package activator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Results of a scale-down, the label of serverless_activator_scale_downs_total.
const (
	scaleDownScaled   = "scaled"
	scaleDownConflict = "conflict"
	scaleDownError    = "error"
)

// maxParallelScrapes bounds the replicas scraped at the same moment.
const maxParallelScrapes = 16

// ScaleDowns is the leader's loop: it scrapes the ready replicas of every
// Function that may scale to zero, and scales the ones idle for their
// window to zero.
type ScaleDowns struct {
	Cache client.Reader
	// Client writes the scale subresource.
	Client client.Client
	Kube   *Kube
	// HTTP scrapes the replicas; a client with scaletozero.ScrapeTimeout if nil.
	HTTP *http.Client
	Log  logr.Logger
	// Tick is how often the loop looks for Functions due; 1 s if zero.
	Tick time.Duration

	watched map[types.NamespacedName]*watched
	// warned is when each Function last got a ScrapeRefused event.
	warned       map[types.NamespacedName]time.Time
	scaleDowns   *prometheus.CounterVec
	scrapeErrors prometheus.Counter
}

type watched struct {
	uid      types.UID
	window   time.Duration
	idleness *Idleness
	next     time.Time
	// refused are the replicas that refused the last round's plaintext
	// scrape as a mesh would (PlaintextRefusal).
	refused map[string]bool
}

// NewScaleDowns registers the loop's metrics with reg (none if nil).
func NewScaleDowns(s ScaleDowns, reg prometheus.Registerer) (*ScaleDowns, error) {
	s.scaleDowns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "serverless_activator_scale_downs_total",
		Help: "Functions the leader scaled to zero (scaled), or found changed meanwhile (conflict), or could not scale (error).",
	}, []string{"result"})
	s.scrapeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "serverless_activator_scrape_errors_total",
		Help: "Replicas whose metrics could not be scraped or parsed.",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{s.scaleDowns, s.scrapeErrors} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering the scale-down metrics: %w", err)
			}
		}
	}
	s.watched = map[types.NamespacedName]*watched{}
	s.warned = map[types.NamespacedName]time.Time{}
	if s.HTTP == nil {
		s.HTTP = &http.Client{Timeout: scaletozero.ScrapeTimeout}
	}
	return &s, nil
}

// NeedLeaderElection is true: two deciders could scale down a Function
// the other just saw active.
func (s *ScaleDowns) NeedLeaderElection() bool { return true }

// Start runs rounds until ctx ends. A new leader starts every window anew.
func (s *ScaleDowns) Start(ctx context.Context) error {
	tick := s.Tick
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := s.Round(ctx, time.Now()); err != nil {
			s.Log.Error(err, "looking for idle Functions")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Eligible reports whether the leader watches a Function, and its window:
// minReplicas 0, replicas above 0, and a valid idle window.
func Eligible(f *v1alpha2.Function) (time.Duration, bool) {
	if !scaletozero.Enabled(f) || f.DeletionTimestamp != nil {
		return 0, false
	}
	if f.Spec.Replicas != nil && *f.Spec.Replicas <= 0 {
		return 0, false
	}
	window, err := scaletozero.IdleWindow(f.Annotations)
	if err != nil {
		return 0, false
	}
	return window, true
}

// Round scrapes the Functions due at now and scales the idle ones to zero.
func (s *ScaleDowns) Round(ctx context.Context, now time.Time) error {
	fns := &v1alpha2.FunctionList{}
	if err := s.Cache.List(ctx, fns); err != nil {
		return fmt.Errorf("listing Functions: %w", err)
	}
	seen := map[types.NamespacedName]bool{}
	var due []types.NamespacedName
	for i := range fns.Items {
		f := &fns.Items[i]
		window, ok := Eligible(f)
		if !ok {
			continue
		}
		key := client.ObjectKeyFromObject(f)
		seen[key] = true
		w := s.watched[key]
		if w == nil || w.uid != f.UID || w.window != window {
			// Spread the first scrapes over an interval, the same for a
			// Function each time, so Functions are not all scraped at once.
			interval := ScrapeInterval(window)
			w = &watched{uid: f.UID, window: window, idleness: NewIdleness(window, now),
				next: now.Add(spread(f.UID, interval))}
			s.watched[key] = w
		}
		if !now.Before(w.next) {
			due = append(due, key)
		}
	}
	for key := range s.watched {
		if !seen[key] {
			delete(s.watched, key)
		}
	}
	for key := range s.warned {
		if !seen[key] {
			delete(s.warned, key)
		}
	}
	for _, key := range due {
		w := s.watched[key]
		round, err := s.scrape(ctx, key)
		if err != nil {
			s.Log.Error(err, "finding the replicas", "function", key.String())
			round = nil
		}
		w.idleness.Observe(now, round)
		s.warnRefused(ctx, key, w, now, round)
		w.next = now.Add(ScrapeInterval(w.window))
		if !w.idleness.Idle(now) {
			continue
		}
		s.scaleDown(ctx, key, w)
	}
	return nil
}

func spread(uid types.UID, interval time.Duration) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return time.Duration(uint64(h.Sum32()) % uint64(interval))
}

func (s *ScaleDowns) scaleDown(ctx context.Context, key types.NamespacedName, w *watched) {
	f := &v1alpha2.Function{}
	if err := s.Cache.Get(ctx, key, f); err != nil {
		s.scaleDowns.WithLabelValues(scaleDownError).Inc()
		s.Log.Error(err, "reading the Function before scaling it to zero", "function", key.String())
		return
	}
	current := int32(1)
	if f.Spec.Replicas != nil {
		current = *f.Spec.Replicas
	}
	wrote, err := SetScale(ctx, s.Client, key, current, 0)
	switch {
	case apierrors.IsConflict(err) || (err == nil && !wrote):
		// Changed since it was read: the next round decides again.
		s.scaleDowns.WithLabelValues(scaleDownConflict).Inc()
	case err != nil:
		s.scaleDowns.WithLabelValues(scaleDownError).Inc()
		s.Log.Error(err, "scaling to zero", "function", key.String())
	default:
		s.scaleDowns.WithLabelValues(scaleDownScaled).Inc()
		s.Log.Info("scaled to zero", "function", key.String(), "idleFor", w.window.String())
		delete(s.watched, key)
	}
}

// scrape reads the metrics of every ready replica of the Function.
func (s *ScaleDowns) scrape(ctx context.Context, fn types.NamespacedName) ([]scaletozero.Scrape, error) {
	replicas, err := s.Kube.ReadyReplicas(ctx, fn)
	if err != nil {
		return nil, err
	}
	round := make([]scaletozero.Scrape, len(replicas))
	sem := make(chan struct{}, maxParallelScrapes)
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id := r.UID
			if id == "" {
				id = r.URL.Host
			}
			sample, err := s.scrapeOne(ctx, r)
			if err != nil {
				s.scrapeErrors.Inc()
				s.Log.V(1).Info("scrape failed", "function", fn.String(), "replica", r.URL.Host, "error", err.Error())
			}
			round[i] = scaletozero.Scrape{Replica: id, Sample: sample, Err: err}
		}()
	}
	wg.Wait()
	return round, nil
}

func (s *ScaleDowns) scrapeOne(ctx context.Context, r Replica) (scaletozero.Sample, error) {
	sample, err := scaletozero.ScrapeCountersWithHost(ctx, s.HTTP, r.URL.Host, r.Authority)
	var status *scaletozero.StatusError
	switch {
	case !errors.As(err, &status):
	case answeredTLSOnly(status.Code, status.Body):
		// A TLS server answers plaintext with a 400 that says so.
		err = fmt.Errorf("%w: %w", err, errAnswersTLS)
	case s.mesh() && sidecarFailed(status.Code, status.Body):
		// The activator's own sidecar answers when the replica refused it.
		err = fmt.Errorf("%w: %w", err, errSidecarFailed)
	}
	if err != nil {
		return scaletozero.Sample{}, &ScrapeError{Replica: r.URL.Host, Err: err}
	}
	return sample, nil
}

// mesh reports whether the activator runs in a mesh (mesh mode).
func (s *ScaleDowns) mesh() bool { return s.Kube != nil && s.Kube.Mesh != "" }

// warnRefused records a Warning event on a Function whose replica refused
// the plaintext scrape as a mesh with STRICT mutual TLS would, in this
// round and the one before (a replica that just went refuses too, once),
// at most once per scrapeRefusedEvery. The Function stays up anyway: a
// round with a failed scrape is never idle.
func (s *ScaleDowns) warnRefused(ctx context.Context, fn types.NamespacedName, w *watched, now time.Time, round []scaletozero.Scrape) {
	refused := map[string]bool{}
	var replica, cause string
	for _, sc := range round {
		c := PlaintextRefusal(sc.Err)
		if c == "" {
			continue
		}
		refused[sc.Replica] = true
		if w.refused[sc.Replica] && cause == "" {
			cause = c
			var se *ScrapeError
			if errors.As(sc.Err, &se) {
				replica = se.Replica
			}
		}
	}
	w.refused = refused
	if cause == "" {
		return
	}
	if last, ok := s.warned[fn]; ok && now.Sub(last) < scrapeRefusedEvery {
		return
	}
	s.warned[fn] = now
	note := scrapeRefusedNote(fn.String(), replica, cause)
	if s.mesh() {
		note = meshScrapeRefusedNote(fn, replica, cause)
	}
	s.Log.Info("replicas refuse plaintext scrapes", "function", fn.String(), "replica", replica, "cause", cause)
	if s.Kube == nil || s.Kube.Events == nil {
		return
	}
	f := &v1alpha2.Function{}
	if err := s.Cache.Get(ctx, fn, f); err != nil {
		// Gone: nothing to attach the event to.
		return
	}
	s.Kube.Events.Eventf(f, nil, corev1.EventTypeWarning, ReasonScrapeRefused, "Scrape", "%s", note)
}
