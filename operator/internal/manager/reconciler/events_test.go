package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// notes records the notes of the events it is given, formatted.
type notes struct{ got []string }

func (n *notes) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	n.got = append(n.got, fmt.Sprintf(note, args...))
}

func TestTruncateNote(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		unchanged bool
	}{
		{"short", "state changed from none to Ready", true},
		{"exactly the limit", strings.Repeat("a", maxNoteBytes), true},
		{"one byte over", strings.Repeat("a", maxNoteBytes+1), false},
		{"long executor args", "functionBuildExecutorArgs set from \"\" to " + strings.Repeat("--flag=value,", 200), false},
		{"multi-byte characters across the cut", strings.Repeat("ä€", 600), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateNote(tt.in)
			if tt.unchanged {
				assert.Equal(t, tt.in, got)
				return
			}
			assert.LessOrEqual(t, len(got), maxNoteBytes)
			assert.Greater(t, len(got), maxNoteBytes-len(truncatedMark)-utf8.UTFMax, "as much as fits is kept")
			assert.True(t, utf8.ValidString(got), "cut on a character boundary")
			assert.True(t, strings.HasSuffix(got, truncatedMark))
			assert.True(t, strings.HasPrefix(tt.in, strings.TrimSuffix(got, truncatedMark)))
		})
	}
}

// A Warning about a long error reaches the recorder short enough for the
// API server (events.k8s.io rejects notes over 1 KiB).
func TestReconcilerEventsFitTheAPIServersLimit(t *testing.T) {
	rec := &notes{}
	r := New(nil, nil, fakeLive{}, nil, nil, rec, nil, Options{})
	s := newTestState(1)
	long := errors.New("applying: " + strings.Repeat("--registry-mirror=mirror.example.com ", 60))
	r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonApplyFailed, long, false)
	require.Len(t, rec.got, 1)
	assert.LessOrEqual(t, len(rec.got[0]), maxNoteBytes)
	assert.True(t, strings.HasPrefix(rec.got[0], "applying: --registry-mirror"))
}
