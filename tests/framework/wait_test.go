package framework

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPoll(t *testing.T) {
	t.Parallel()
	dump := func() string { return "--- dumped state" }
	tests := []struct {
		name    string
		timeout time.Duration
		cond    func(attempt int) (bool, string, error)
		// wantErr lists parts of the error message; none: Poll must succeed
		wantErr  []string
		attempts int // exact number of checks expected (0: do not check)
		// waited is what the last check that was not done saw
		waited string
	}{
		{
			name:    "done after a few checks, errors on the way are tolerated",
			timeout: 5 * time.Second,
			cond: func(n int) (bool, string, error) {
				return n == 3, fmt.Sprintf("attempt %d", n), map[bool]error{true: errors.New("not found")}[n == 1]
			},
			attempts: 3,
			waited:   "attempt 2",
		},
		{
			name:    "timeout reports what, the last observation, the last error and the dumps",
			timeout: 600 * time.Millisecond,
			cond: func(n int) (bool, string, error) {
				return false, fmt.Sprintf("%d/3 replicas available", min(n, 2)), errors.New("still rolling")
			},
			wantErr: []string{"timed out after", "waiting for web to become Available", "last observed: 2/3 replicas available", "last error: still rolling", "--- dumped state"},
			waited:  "still rolling",
		},
		{
			name:     "StopWaiting ends the wait at once",
			timeout:  time.Minute,
			cond:     func(int) (bool, string, error) { return false, "phase Failed", StopWaiting(errors.New("job failed")) },
			wantErr:  []string{"gave up waiting for web to become Available", "last observed: phase Failed", "last error: job failed", "--- dumped state"},
			attempts: 1,
			waited:   "job failed",
		},
		{
			name:     "done with an error is not done",
			timeout:  5 * time.Second,
			cond:     func(n int) (bool, string, error) { return true, "", map[bool]error{true: errors.New("flaky")}[n < 2] },
			attempts: 2,
			waited:   "flaky",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			attempts := 0
			start := time.Now()
			waited, err := poll(t.Context(), tc.timeout, "web to become Available", func(ctx context.Context) (bool, string, error) {
				attempts++
				_, hasDeadline := ctx.Deadline()
				require.True(t, hasDeadline, "every check gets a deadline")
				return tc.cond(attempts)
			}, dump)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				for _, part := range tc.wantErr {
					require.Contains(t, err.Error(), part)
				}
			}
			if tc.attempts > 0 {
				require.Equal(t, tc.attempts, attempts)
			}
			require.Equal(t, tc.waited, waited, "what the wait saw last before it ended")
			require.Less(t, time.Since(start), tc.timeout+time.Second, "Poll must respect its timeout")
		})
	}
}

func TestPollStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Poll(ctx, time.Minute, "never", func(context.Context) (bool, string, error) { return false, "", nil })
	require.ErrorContains(t, err, "waiting for never")
}
