package activator

import "time"

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
