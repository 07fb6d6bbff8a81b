package main

import (
	"context"
	"time"
)

// nodeReady is the node's last action: the real node is Ready and the
// default ServiceAccount exists (Pods of the default namespace need it).
// Its down has nothing to do.
type nodeReady struct{}

func (nodeReady) Name() string { return "node ready" }

func (nodeReady) Up(ctx context.Context, ac *actionContext) error {
	if err := ac.waitRealNodeReady(ctx); err != nil {
		return err
	}
	return waitFor(ctx, 60*time.Second, "the default ServiceAccount", func() error {
		_, err := ac.kubectl("get", "serviceaccount", "default", "-n", "default")
		return err
	})
}

func (nodeReady) Down(context.Context, *actionContext) error { return nil }
