package activator

import (
	"fmt"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const (
	// DefaultIdleWindow applies when a Function does not set
	// v1alpha2.AnnotationScaleToZeroAfter.
	DefaultIdleWindow = 5 * time.Minute
	// MinIdleWindow is the shortest idle window accepted: shorter ones
	// would scale a Function down between two requests of a slow client
	// and cost a cold start each time.
	MinIdleWindow = 10 * time.Second
)

// IdleWindow reads how long a Function may go without a request before it
// is scaled to zero. A value that does not parse or is below MinIdleWindow
// is an error, never silently replaced: the caller keeps the Function
// running and reports the error.
func IdleWindow(annotations map[string]string) (time.Duration, error) {
	raw, ok := annotations[v1alpha2.AnnotationScaleToZeroAfter]
	if !ok {
		return DefaultIdleWindow, nil
	}
	value := strings.TrimSpace(raw)
	if value == "" {
		return 0, fmt.Errorf("annotation %s is empty: give a duration such as 90s or 5m, or remove it for the default of %s",
			v1alpha2.AnnotationScaleToZeroAfter, DefaultIdleWindow)
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %q is not a duration such as 90s, 5m or 1h30m: %w",
			v1alpha2.AnnotationScaleToZeroAfter, raw, err)
	}
	if d < MinIdleWindow {
		return 0, fmt.Errorf("annotation %s: %q is shorter than the minimum of %s",
			v1alpha2.AnnotationScaleToZeroAfter, raw, MinIdleWindow)
	}
	return d, nil
}

// Bounds of the interval at which the leader scrapes a Function's replicas.
const (
	minScrapeInterval = 2 * time.Second
	maxScrapeInterval = 30 * time.Second
)

// ScrapeInterval is how often a Function with the given idle window is
// scraped: a fifth of the window, so it goes to zero at most a fifth late,
// between 2 s (the replicas' load) and 30 s.
func ScrapeInterval(window time.Duration) time.Duration {
	return min(max(window/5, minScrapeInterval), maxScrapeInterval)
}
