package activator

import (
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"

	"time"
)

// Idleness tells from successive rounds of scrapes of one Function's ready
// replicas when it has had no request for its window. It decides on
// evidence only: the window counts from the last activity seen or from
// when watching began, and a round with a failed scrape, or with no
// replica at all, leaves the Function not idle.
type Idleness struct {
	window      time.Duration
	calls       map[string]float64
	lastActive  time.Time
	lastRoundOK bool
}

// NewIdleness starts watching a Function at start; it cannot be idle
// before start+window.
func NewIdleness(window time.Duration, start time.Time) *Idleness {
	return &Idleness{window: window, calls: map[string]float64{}, lastActive: start}
}

// Observe takes a round of scrapes made at `at`, one per ready replica.
// A replica counts as active when its counter rose, went down (the
// container restarted, and what it served before is unknown), starts
// above zero on a replica not seen before, or has calls in flight.
// Replicas missing from the round are forgotten.
func (d *Idleness) Observe(at time.Time, round []scaletozero.Scrape) {
	d.lastRoundOK = len(round) > 0
	seen := make(map[string]bool, len(round))
	for _, s := range round {
		seen[s.Replica] = true
		if s.Err != nil {
			// Its last count stays, to compare the next good scrape with.
			d.lastRoundOK = false
			continue
		}
		before, known := d.calls[s.Replica]
		now := s.Sample.Calls
		active := (known && now != before) || (!known && now > 0)
		if n, ok := s.Sample.InFlight(); ok && n > 0 {
			active = true
		}
		if active {
			d.Active(at)
		}
		d.calls[s.Replica] = now
	}
	for replica := range d.calls {
		if !seen[replica] {
			delete(d.calls, replica)
		}
	}
}

// Active records activity seen elsewhere, such as a request the activator
// forwarded.
func (d *Idleness) Active(at time.Time) {
	if at.After(d.lastActive) {
		d.lastActive = at
	}
}

// Idle reports whether the Function has been idle for its window at now:
// the last round scraped every replica and none showed activity within the
// window.
func (d *Idleness) Idle(now time.Time) bool {
	return d.lastRoundOK && now.Sub(d.lastActive) >= d.window
}
