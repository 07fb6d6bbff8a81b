package scaletozero

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// What the Function controller and the activator share about a Function
// that scales to zero (docs/contributor/scale-to-zero.md): which Functions
// do, where a replica serves, and how its call counters are read.

// RuntimePort is where a Function's replicas serve calls, /healthz and
// /metrics (docs/contributor/runtime-contract.md).
const RuntimePort = 8080

// Enabled is the one rule for "scales to zero": spec.scaleConfig.minReplicas
// is set and 0.
func Enabled(fn *v1alpha2.Function) bool {
	sc := fn.Spec.ScaleConfig
	return sc != nil && sc.MinReplicas != nil && *sc.MinReplicas == 0
}

// Scrape is one replica's answer in a round of scrapes of a Function.
type Scrape struct {
	// Replica identifies the replica across rounds: the Pod's UID, so a
	// new Pod is never mistaken for an old one with a reset counter.
	Replica string
	Sample  Sample
	// Err is why the replica could not be scraped or parsed.
	Err error
}

// Drained reports whether a round of scrapes shows no call in flight on
// any replica, so the replicas can go without cutting a request short.
// A failed scrape, a runtime that does not tell calls in flight, or an
// empty round is not drained.
func Drained(round []Scrape) bool {
	if len(round) == 0 {
		return false
	}
	for _, s := range round {
		if s.Err != nil {
			return false
		}
		if n, ok := s.Sample.InFlight(); !ok || n > 0 {
			return false
		}
	}
	return true
}

// ScrapeTimeout bounds one scrape of one replica.
const ScrapeTimeout = 2 * time.Second

// StatusError is a scrape answered with another status than 200; Body is
// the start of the answer, for callers that tell who answered.
type StatusError struct {
	Code   int
	Status string
	Body   []byte
}

func (e *StatusError) Error() string { return "status " + e.Status }

// ScrapeCounters asks the replica at address (host:port) for its metrics
// over plain HTTP, as Prometheus does (the Service's annotations name that
// endpoint), and reads its call counters.
func ScrapeCounters(ctx context.Context, c *http.Client, address string) (Sample, error) {
	return ScrapeCountersWithHost(ctx, c, address, "")
}

// ScrapeCountersWithHost is ScrapeCounters with the request's Host set to
// host ("" the address), for a mesh that routes by it (MeshAuthority).
func ScrapeCountersWithHost(ctx context.Context, c *http.Client, address, host string) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	if err != nil {
		return Sample{}, fmt.Errorf("scraping %s: %w", address, err)
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("scraping %s: %w", address, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Sample{}, fmt.Errorf("scraping %s: %w", address, &StatusError{Code: resp.StatusCode, Status: resp.Status, Body: body})
	}
	s, err := ParseCounters(resp.Body)
	if err != nil {
		return Sample{}, fmt.Errorf("scraping %s: %w", address, err)
	}
	return s, nil
}
