package scaletozero

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The texts follow hack/image/runtimes: Node.js writes integers and a
// histogram in milliseconds, Python writes floats and one in seconds.
const (
	nodeFresh = `# HELP function_calls_total Number of calls to user function
# TYPE function_calls_total counter
# HELP function_failures_total Number of exceptions in user function
# TYPE function_failures_total counter
# HELP function_duration_miliseconds Duration of user function in milliseconds
# TYPE function_duration_miliseconds histogram
`
	nodeBusy = `# HELP function_calls_total Number of calls to user function
# TYPE function_calls_total counter
function_calls_total{method="GET"} 7
function_calls_total{method="POST"} 3
# HELP function_failures_total Number of exceptions in user function
# TYPE function_failures_total counter
function_failures_total{method="POST"} 1
# HELP function_duration_miliseconds Duration of user function in milliseconds
# TYPE function_duration_miliseconds histogram
function_duration_miliseconds_bucket{le="1",method="GET"} 6
function_duration_miliseconds_bucket{le="+Inf",method="GET"} 7
function_duration_miliseconds_sum{method="GET"} 12.5
function_duration_miliseconds_count{method="GET"} 7
function_duration_miliseconds_bucket{le="1",method="POST"} 1
function_duration_miliseconds_bucket{le="+Inf",method="POST"} 2
function_duration_miliseconds_sum{method="POST"} 4
function_duration_miliseconds_count{method="POST"} 2
`
	pythonBusy = `# HELP function_calls_total Number of calls to user function
# TYPE function_calls_total counter
function_calls_total{method="GET"} 4.0
# HELP function_failures_total Number of exceptions in user function
# TYPE function_failures_total counter
# HELP function_duration_seconds Duration of user function in seconds
# TYPE function_duration_seconds histogram
function_duration_seconds_bucket{le="0.005",method="GET"} 4.0
function_duration_seconds_bucket{le="+Inf",method="GET"} 4.0
function_duration_seconds_sum{method="GET"} 0.01
function_duration_seconds_count{method="GET"} 4.0
`
)

func TestParseCounters(t *testing.T) {
	tests := []struct {
		name         string
		text         string
		want         Sample
		wantInFlight float64
		wantKnown    bool
		wantErr      string
	}{
		{name: "Node.js before any call", text: nodeFresh,
			want: Sample{HasReturned: true}, wantKnown: true},
		{name: "Node.js with one POST running", text: nodeBusy,
			want: Sample{Calls: 10, Returned: 9, HasReturned: true}, wantInFlight: 1, wantKnown: true},
		{name: "Python, all returned", text: pythonBusy,
			want: Sample{Calls: 4, Returned: 4, HasReturned: true}, wantKnown: true},
		{name: "untyped counter, no histogram", text: "function_calls_total 3\n",
			want: Sample{Calls: 3}},
		{name: "counter declared, no histogram", text: "# TYPE function_calls_total counter\n",
			want: Sample{}},
		{name: "a longer name is not the counter", text: "# TYPE function_calls_total_x counter\n",
			wantErr: "no function_calls_total counter"},
		{name: "larger than a replica writes", text: strings.Repeat("# filler line\n", 100_000),
			wantErr: "larger than 1048576 bytes"},
		{name: "no call counter", text: "# TYPE other_total counter\nother_total 1\n",
			wantErr: "no function_calls_total counter"},
		{name: "empty answer", text: "", wantErr: "no function_calls_total counter"},
		{name: "call counter of the wrong type", text: "# TYPE function_calls_total gauge\nfunction_calls_total 1\n",
			wantErr: "function_calls_total is a GAUGE, not a counter"},
		{name: "not the text format", text: "<html>hello</html>\n", wantErr: "parsing the metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCounters(strings.NewReader(tt.text))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			n, ok := got.InFlight()
			assert.Equal(t, tt.wantKnown, ok)
			assert.Equal(t, tt.wantInFlight, n)
		})
	}
}
