package framework

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Prober calls a Service again and again while something else happens to
// the cluster, and keeps what it got: a Function that must keep answering
// through a fault is checked by every call, not by one before and one after.
type Prober struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	calls    int
	failures []string
	bodies   map[string]int
}

// ProbeResult is what a Prober saw.
type ProbeResult struct {
	// Calls made; Failures are those that did not answer 200 (each with
	// when and what).
	Calls    int
	Failures []string
	// Bodies counts the distinct answers.
	Bodies map[string]int
}

// KeepCalling calls GET path of Service ns/name every interval until Stop.
func (c *Cluster) KeepCalling(ns, name, path string, interval time.Duration) *Prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{cancel: cancel, done: make(chan struct{}), bodies: map[string]int{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := c.CallService(cctx, ns, name, http.MethodGet, path, nil, nil)
			ccancel()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.calls++
			switch {
			case err != nil:
				p.failures = append(p.failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			case r.Status != http.StatusOK:
				p.failures = append(p.failures, fmt.Sprintf("%s: HTTP %d %.200s", time.Now().Format("15:04:05.000"), r.Status, r.Body))
			default:
				p.bodies[r.Body]++
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// Stop ends the calls and returns what they got.
func (p *Prober) Stop() ProbeResult {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return ProbeResult{Calls: p.calls, Failures: p.failures, Bodies: p.bodies}
}

// RestartNodeComponent restarts the real node's kubelet or containerd as a
// service manager would (SIGTERM, start); Pods keep running.
func (c *Cluster) RestartNodeComponent(ctx context.Context, component string) error {
	_, err := runScript(ctx, c.root, "restart", component)
	return err
}
