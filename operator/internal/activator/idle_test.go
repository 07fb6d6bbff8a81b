package activator

import (
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"

	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// round is one round of scrapes, observed `at` seconds after the start;
// then Idle is asked at each of the seconds in idle, for the answer given.
type round struct {
	at      int
	scrapes []scaletozero.Scrape
	idle    map[int]bool
}

func ok(replica string, calls float64) scaletozero.Scrape {
	return scaletozero.Scrape{Replica: replica, Sample: scaletozero.Sample{Calls: calls, Returned: calls, HasReturned: true}}
}

func running(replica string, calls, returned float64) scaletozero.Scrape {
	return scaletozero.Scrape{Replica: replica, Sample: scaletozero.Sample{Calls: calls, Returned: returned, HasReturned: true}}
}

func failed(replica string) scaletozero.Scrape {
	return scaletozero.Scrape{Replica: replica, Err: errors.New("connection refused")}
}

func TestIdleness(t *testing.T) {
	const window = 60
	tests := []struct {
		name   string
		rounds []round
		// idleBefore is asked before any round.
		idleBefore map[int]bool
	}{
		{
			name:       "no scrape is not idle",
			idleBefore: map[int]bool{0: false, 61: false, 3600: false},
		},
		{
			name: "a replica without calls is idle once the window passed since the start",
			rounds: []round{
				{at: 10, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 0)}, idle: map[int]bool{59: false, 60: true, 100: true}},
			},
		},
		{
			name: "calls served before the first scrape count from the first scrape",
			rounds: []round{
				{at: 10, scrapes: []scaletozero.Scrape{ok("a", 5)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 5)}, idle: map[int]bool{60: false, 69: false, 70: true}},
			},
		},
		{
			name: "a rising counter restarts the window",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 1)}},
				{at: 70, scrapes: []scaletozero.Scrape{ok("a", 1)}, idle: map[int]bool{70: false, 99: false, 100: true}},
			},
		},
		{
			name: "a counter reset (container restart) counts as activity",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 5)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 70, scrapes: []scaletozero.Scrape{ok("a", 0)}, idle: map[int]bool{99: false, 100: true}},
			},
		},
		{
			name: "a new replica that served calls counts as activity",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 0), ok("b", 1)}},
				{at: 70, scrapes: []scaletozero.Scrape{ok("a", 0), ok("b", 1)}, idle: map[int]bool{99: false, 100: true}},
			},
		},
		{
			name: "a new replica without calls does not",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("a", 0), ok("b", 0)}, idle: map[int]bool{59: false, 60: true}},
			},
		},
		{
			name: "a replica gone and back is new again",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 5)}},
				{at: 40, scrapes: []scaletozero.Scrape{ok("b", 0)}},
				{at: 70, scrapes: []scaletozero.Scrape{ok("b", 0)}, idle: map[int]bool{70: true}},
				{at: 80, scrapes: []scaletozero.Scrape{ok("b", 0), ok("a", 5)}, idle: map[int]bool{80: false, 139: false, 140: true}},
			},
		},
		{
			name: "a call in flight keeps the Function active",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{running("a", 5, 4)}},
				{at: 70, scrapes: []scaletozero.Scrape{running("a", 5, 4)}, idle: map[int]bool{70: false, 129: false}},
				{at: 80, scrapes: []scaletozero.Scrape{ok("a", 5)}, idle: map[int]bool{129: false, 130: true}},
			},
		},
		{
			name: "a failed scrape in the last round is not idle",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 0), ok("b", 0)}, idle: map[int]bool{60: true}},
				{at: 70, scrapes: []scaletozero.Scrape{ok("a", 0), failed("b")}, idle: map[int]bool{70: false, 3600: false}},
				{at: 80, scrapes: []scaletozero.Scrape{ok("a", 0), ok("b", 0)}, idle: map[int]bool{80: true}},
			},
		},
		{
			name: "calls while a scrape failed show at the next good one",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 5)}},
				{at: 40, scrapes: []scaletozero.Scrape{failed("a")}},
				{at: 50, scrapes: []scaletozero.Scrape{ok("a", 9)}, idle: map[int]bool{60: false, 109: false, 110: true}},
			},
		},
		{
			name: "a round without replicas is not idle",
			rounds: []round{
				{at: 0, scrapes: []scaletozero.Scrape{ok("a", 0)}},
				{at: 70, scrapes: nil, idle: map[int]bool{70: false, 3600: false}},
			},
		},
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewIdleness(window*time.Second, start)
			for s, want := range tt.idleBefore {
				assert.Equal(t, want, d.Idle(at(s)), "idle %d s after the start, before any round", s)
			}
			for _, r := range tt.rounds {
				d.Observe(at(r.at), r.scrapes)
				for s, want := range r.idle {
					assert.Equal(t, want, d.Idle(at(s)), "idle %d s after the start, after the round at %d s", s, r.at)
				}
			}
		})
	}
}

func TestIdlenessActive(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := NewIdleness(time.Minute, start)
	d.Observe(start.Add(10*time.Second), []scaletozero.Scrape{ok("a", 1)})
	d.Observe(start.Add(20*time.Second), []scaletozero.Scrape{ok("a", 1)})
	d.Active(start.Add(30 * time.Second))
	// Activity older than the last one changes nothing.
	d.Active(start.Add(5 * time.Second))
	assert.False(t, d.Idle(start.Add(89*time.Second)))
	assert.True(t, d.Idle(start.Add(90*time.Second)))
}
