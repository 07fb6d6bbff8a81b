package framework

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// FetchMetrics reads a Prometheus metrics endpoint.
func FetchMetrics(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// SumSamples adds the samples of metric name (text exposition format) whose
// labels contain labelsHave, and tells whether there was any.
func SumSamples(body, name, labelsHave string) (float64, bool) {
	total, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || (rest[0] != '{' && rest[0] != ' ')) || !strings.Contains(rest, labelsHave) {
			continue
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		total, found = total+v, true
	}
	return total, found
}
