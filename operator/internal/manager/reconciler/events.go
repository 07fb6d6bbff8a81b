package reconciler

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
)

// maxNoteBytes is the API server's limit on an event's note
// (events.k8s.io/v1): a longer note is rejected and the event lost.
const maxNoteBytes = 1024

// truncatedMark ends a note that was cut to fit.
const truncatedMark = " …(truncated)"

// truncatingRecorder cuts notes to what the API server accepts, so an event
// about e.g. long executor arguments is shortened, not lost.
type truncatingRecorder struct{ next EventRecorder }

func (t truncatingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	t.next.Eventf(regarding, related, eventtype, reason, action, "%s", truncateNote(fmt.Sprintf(note, args...)))
}

// truncateNote returns s when it fits, else its longest prefix that ends on
// a character boundary and fits together with the mark.
func truncateNote(s string) string {
	if len(s) <= maxNoteBytes {
		return s
	}
	cut := maxNoteBytes - len(truncatedMark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}
