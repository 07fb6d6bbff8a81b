package registryagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// ErrBusy is returned by Client.GC while another GC runs.
var ErrBusy = errors.New("a garbage collection is already running")

// URL is the agent's base URL in a cluster: its Service in the module's
// namespace.
func URL(namespace string) string {
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", module.RegistryAgentServiceName, namespace, Port)
}

// Client calls a registry agent.
type Client struct {
	// URL is the agent's base URL, e.g.
	// http://serverless-docker-registry.kyma-system.svc.cluster.local:5002.
	URL string
	// Username and Password are the registry's credentials.
	Username, Password string
	// HTTP is the client to use; nil is http.DefaultClient. A GC takes as
	// long as the walk of the storage: give it no short timeout.
	HTTP *http.Client
}

// Usage returns how full the registry is.
func (c *Client) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	return u, c.call(ctx, http.MethodGet, PathUsage, &u)
}

// GC runs a garbage collection and returns what it reclaimed; ErrBusy
// (wrapped) while another one runs.
func (c *Client) GC(ctx context.Context) (GCResult, error) {
	var r GCResult
	return r, c.call(ctx, http.MethodPost, PathGC, &r)
}

func (c *Client) call(ctx context.Context, method, path string, out any) error {
	url := strings.TrimSuffix(c.URL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.Username, c.Password)
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("registry agent %s %s: %w", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("registry agent %s %s: reading the answer: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorAnswer
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		err := fmt.Errorf("registry agent %s %s: %s: %s", method, url, resp.Status, msg)
		if resp.StatusCode == http.StatusConflict {
			err = fmt.Errorf("%w (%w)", ErrBusy, err)
		}
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("registry agent %s %s: decoding the answer: %w", method, url, err)
	}
	return nil
}
