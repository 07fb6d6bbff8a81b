package scaletozero

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names of the runtimes' /metrics endpoint on the Function's port
// 8080 (docs/contributor/scale-to-zero.md). The call counter rises when the
// user's handler is called; each runtime's duration histogram counts calls
// that returned (milliseconds in Node.js, seconds in Python, so only the
// prefix is common).
const (
	CallsMetric          = "function_calls_total"
	DurationMetricPrefix = "function_duration_"
)

// ErrNoCallCounter says a replica's metrics do not count calls: such a
// Function can never be shown idle.
var ErrNoCallCounter = errors.New("the metrics have no " + CallsMetric + " counter")

// Sample is what one scrape of a replica says about its calls.
type Sample struct {
	// Calls is function_calls_total summed over its methods.
	Calls float64
	// Returned is the sample count of the duration histogram, summed over
	// its methods; valid only when HasReturned.
	Returned    float64
	HasReturned bool
}

// InFlight is the number of calls running on the replica; ok is false when
// the replica has no duration histogram to tell.
func (s Sample) InFlight() (n float64, ok bool) {
	if !s.HasReturned {
		return 0, false
	}
	return max(s.Calls-s.Returned, 0), true
}

// maxMetricsSize bounds what is read of one replica's metrics: the
// runtimes' text is a few kilobytes.
const maxMetricsSize = 1 << 20

// ParseCounters reads a replica's metrics in the Prometheus text format.
// A counter declared without samples (no call yet) counts 0: the runtimes
// declare their families before the first call, and the parser drops
// families without samples, so the declaration is looked for in the text.
func ParseCounters(r io.Reader) (Sample, error) {
	text, err := io.ReadAll(io.LimitReader(r, maxMetricsSize+1))
	if err != nil {
		return Sample{}, fmt.Errorf("reading the metrics: %w", err)
	}
	if len(text) > maxMetricsSize {
		return Sample{}, fmt.Errorf("the metrics are larger than %d bytes", maxMetricsSize)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return Sample{}, fmt.Errorf("parsing the metrics: %w", err)
	}
	var s Sample
	if declared(text, "TYPE", DurationMetricPrefix, "histogram") {
		s.HasReturned = true
	}
	calls, ok := families[CallsMetric]
	if !ok {
		if declared(text, "TYPE", CallsMetric+" ", "counter") {
			return s, nil
		}
		return Sample{}, ErrNoCallCounter
	}
	for _, m := range calls.GetMetric() {
		switch calls.GetType() {
		case dto.MetricType_COUNTER:
			s.Calls += m.GetCounter().GetValue()
		case dto.MetricType_UNTYPED:
			s.Calls += m.GetUntyped().GetValue()
		default:
			return Sample{}, fmt.Errorf("%s is a %s, not a counter", CallsMetric, calls.GetType())
		}
	}
	for name, family := range families {
		if !strings.HasPrefix(name, DurationMetricPrefix) || family.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		s.HasReturned = true
		for _, m := range family.GetMetric() {
			s.Returned += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return s, nil
}

// declared reports whether text has a comment line "# <keyword> <name
// starting with prefix> <kind>".
func declared(text []byte, keyword, prefix, kind string) bool {
	lines := bufio.NewScanner(bytes.NewReader(text))
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 4 && fields[0] == "#" && fields[1] == keyword &&
			strings.HasPrefix(fields[2]+" ", prefix) && fields[3] == kind {
			return true
		}
	}
	return false
}
