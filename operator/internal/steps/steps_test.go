package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrl "sigs.k8s.io/controller-runtime"
)

// trace is a test state: the names of the steps that ran.
type trace struct{ ran []string }

func step(name string, o Outcome, err error) Step[*trace] {
	return Step[*trace]{Name: name, Run: func(_ context.Context, t *trace) (Outcome, error) {
		t.ran = append(t.ran, name)
		return o, err
	}}
}

func TestRunTurnsOutcomesIntoTheResult(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		list    []Step[*trace]
		want    ctrl.Result
		wantErr error
		wantRan []string
	}{
		{
			name:    "every step goes on",
			list:    []Step[*trace]{step("a", Next(), nil), step("b", Outcome{}, nil)},
			wantRan: []string{"a", "b"},
		},
		{
			name:    "stop skips the rest",
			list:    []Step[*trace]{step("a", Stop(), nil), step("b", Next(), nil)},
			wantRan: []string{"a"},
		},
		{
			name:    "requeue after ends the run and comes back",
			list:    []Step[*trace]{step("a", RequeueAfter(time.Minute), nil), step("b", Next(), nil)},
			want:    ctrl.Result{RequeueAfter: time.Minute},
			wantRan: []string{"a"},
		},
		{
			name:    "requeue after nothing is a stop",
			list:    []Step[*trace]{step("a", RequeueAfter(0), nil), step("b", Next(), nil)},
			wantRan: []string{"a"},
		},
		{
			name:    "requeue comes back at once",
			list:    []Step[*trace]{step("a", Next().Within(time.Minute), nil), step("b", Requeue(), nil), step("c", Next(), nil)},
			want:    ctrl.Result{Requeue: true},
			wantRan: []string{"a", "b"},
		},
		{
			name:    "within goes on, and the earliest ask wins",
			list:    []Step[*trace]{step("a", Next().Within(time.Minute), nil), step("b", Next().Within(time.Second), nil), step("c", RequeueAfter(time.Hour), nil)},
			want:    ctrl.Result{RequeueAfter: time.Second},
			wantRan: []string{"a", "b", "c"},
		},
		{
			name:    "fail without an error ends the run, no backoff",
			list:    []Step[*trace]{step("a", Fail("Invalid"), nil), step("b", Next(), nil)},
			wantRan: []string{"a"},
		},
		{
			name:    "fail within comes back",
			list:    []Step[*trace]{step("a", Fail("Refused").Within(time.Second), nil), step("b", Next(), nil)},
			want:    ctrl.Result{RequeueAfter: time.Second},
			wantRan: []string{"a"},
		},
		{
			name:    "an error stops the rest and drops the requeue",
			list:    []Step[*trace]{step("a", Next().Within(time.Second), nil), step("b", Fail("ReadFailed"), boom), step("c", Next(), nil)},
			wantErr: boom,
			wantRan: []string{"a", "b"},
		},
		{
			name:    "an error beside go on still ends the run",
			list:    []Step[*trace]{step("a", Next(), boom), step("b", Next(), nil)},
			wantErr: boom,
			wantRan: []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &trace{}
			got, err := Run(context.Background(), s, tt.list, nil)
			assert.Equal(t, tt.wantRan, s.ran)
			assert.Equal(t, tt.want, got)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.EqualError(t, err, fmt.Sprintf("step %s: %v", tt.wantRan[len(tt.wantRan)-1], tt.wantErr))
		})
	}
}

func TestRunTimesAndLogsEveryStepThatRan(t *testing.T) {
	tests := []struct {
		name     string
		verbose  int
		list     []Step[*trace]
		wantLogs []string // the logged lines' step and outcome
	}{
		{
			name:    "debug level: each step that ran, with its outcome",
			verbose: 1,
			list: []Step[*trace]{
				step("a", Next().Within(time.Second), nil),
				step("b", Fail("Invalid"), errors.New("boom")),
				step("c", Next(), nil),
			},
			wantLogs: []string{"a next after=1s", "b fail cause=Invalid error=boom"},
		},
		{
			name:    "info level: nothing",
			verbose: 0,
			list:    []Step[*trace]{step("a", Next(), nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs []string
			log := funcr.NewJSON(func(obj string) { logs = append(logs, obj) }, funcr.Options{Verbosity: tt.verbose})
			ctx := logr.NewContext(context.Background(), log)
			var observed []string
			observe := func(step string, took time.Duration) {
				assert.GreaterOrEqual(t, took, time.Duration(0))
				observed = append(observed, step)
			}
			s := &trace{}
			_, _ = Run(ctx, s, tt.list, observe)
			assert.Equal(t, s.ran, observed, "every step that ran is timed")
			var got []string
			for _, l := range logs {
				got = append(got, summary(t, l))
			}
			assert.Equal(t, tt.wantLogs, got)
		})
	}
}

func TestRunLogsHowLongAStepTook(t *testing.T) {
	var line string
	log := funcr.NewJSON(func(obj string) { line = obj }, funcr.Options{Verbosity: 1})
	slow := Step[*trace]{Name: "slow", Run: func(context.Context, *trace) (Outcome, error) {
		time.Sleep(20 * time.Millisecond)
		return Next(), nil
	}}
	var took time.Duration
	_, err := Run(logr.NewContext(context.Background(), log), &trace{}, []Step[*trace]{slow}, func(_ string, d time.Duration) { took = d })
	require.NoError(t, err)
	assert.GreaterOrEqual(t, took, 20*time.Millisecond)
	assert.Contains(t, line, `"step":"slow"`)
	assert.Contains(t, line, fmt.Sprintf(`"took":"%s"`, took), "the logged duration is the observed one")
}

// summary is a logged step line as "<step> <outcome>[ after=…][ cause=…][ error=…]".
func summary(t *testing.T, line string) string {
	t.Helper()
	var v struct {
		Msg, Step, Took, Outcome, After, Cause, Error string
		Level                                         int
	}
	require.NoError(t, json.Unmarshal([]byte(line), &v))
	assert.Equal(t, "step", v.Msg)
	assert.Equal(t, 1, v.Level, "debug level")
	assert.NotEmpty(t, v.Took)
	out := v.Step + " " + v.Outcome
	for _, kv := range [][2]string{{"after", v.After}, {"cause", v.Cause}, {"error", v.Error}} {
		if kv[1] != "" {
			out += " " + kv[0] + "=" + kv[1]
		}
	}
	return out
}

func TestSoonerKeepsTheEarliestRequeue(t *testing.T) {
	tests := []struct {
		name string
		res  ctrl.Result
		d    time.Duration
		want time.Duration
	}{
		{name: "none yet", d: time.Second, want: time.Second},
		{name: "earlier wins", res: ctrl.Result{RequeueAfter: time.Minute}, d: time.Second, want: time.Second},
		{name: "later loses", res: ctrl.Result{RequeueAfter: time.Second}, d: time.Minute, want: time.Second},
		{name: "zero asks nothing", res: ctrl.Result{RequeueAfter: time.Second}, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Sooner(tt.res, tt.d).RequeueAfter)
		})
	}
}

func TestEndsIsTrueForEveryOutcomeButGoingOn(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want bool
	}{
		{"next", Next(), false},
		{"next within", Next().Within(time.Second), false},
		{"stop", Stop(), true},
		{"requeue", Requeue(), true},
		{"requeue after", RequeueAfter(time.Second), true},
		{"fail", Fail("Invalid"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.o.Ends())
		})
	}
}
