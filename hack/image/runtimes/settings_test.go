package runtimes

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runtime settings of Kyma 1.13's documentation (technical reference,
// environment variables), as docs/contributor/runtime-contract.md#settings
// says each runtime reads them.

// settingsCase is a server started with env, and what it must show.
type settingsCase struct {
	name string
	env  []string
	// limit is the largest body served, in bytes: one byte more gets 413.
	// Limits too large to send are checked through the context instead.
	limit int
	// contextLimit is the context's body-size-limit (Node.js MiB, Python bytes).
	contextLimit float64
	// threads is how many handler calls run at once (Python only).
	threads int
	// accessLog is whether each request gets a line on stdout.
	accessLog bool
	// stderr is a text the server's stderr must hold.
	stderr string
}

const mib = 1 << 20

// combinedLine is a line of Apache's combined log format for the request
// checkAccessLog sends.
var combinedLine = regexp.MustCompile(`(?m)^\S+ - alice \[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} \+0000\] ` +
	`"GET /logged\?x=1 HTTP/1\.1" 200 \d+ "https://referrer\.example/" "settings-test/1\.0"$`)

func testSettings(t *testing.T, s *server, tc settingsCase) {
	t.Run("body limit", func(t *testing.T) {
		if tc.limit > 0 {
			for _, size := range []int{tc.limit, tc.limit + 1} {
				resp, body := do(t, request{method: http.MethodPost, path: "/ok", body: strings.Repeat("x", size),
					header: map[string]string{"Content-Type": "application/octet-stream"}})
				want := http.StatusOK
				if size > tc.limit {
					want = http.StatusRequestEntityTooLarge
				}
				assert.Equal(t, want, resp.StatusCode, "a body of %d bytes: %s", size, body)
			}
		}
		resp, body := do(t, request{path: "/context"})
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var ctx map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &ctx))
		assert.Equal(t, tc.contextLimit, ctx["body-size-limit"])
	})
	if tc.threads > 0 {
		t.Run("handler calls at once", func(t *testing.T) { checkThreads(t, tc.threads) })
	}
	t.Run("access log", func(t *testing.T) { checkAccessLog(t, s, tc.accessLog) })
	if tc.stderr != "" {
		assert.Contains(t, s.stderr.String(), tc.stderr)
	}
}

// checkThreads sends more slow calls at once than the server may run, and
// asks the handler how many it saw running together.
func checkThreads(t *testing.T, threads int) {
	calls := threads + 4
	var wg sync.WaitGroup
	statuses := make([]int, calls)
	for i := range calls {
		wg.Go(func() {
			resp, err := client.Get(baseURL + "/slow")
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
				statuses[i] = resp.StatusCode
			}
		})
	}
	wg.Wait()
	for i, s := range statuses {
		assert.Equal(t, http.StatusOK, s, "call %d", i)
	}
	_, body := do(t, request{path: "/peak"})
	assert.Equal(t, strconv.Itoa(threads), body, "calls running at the same time")
}

func checkAccessLog(t *testing.T, s *server, want bool) {
	resp, _ := do(t, request{path: "/logged?x=1", header: map[string]string{
		"Referer": "https://referrer.example/", "User-Agent": "settings-test/1.0",
		"Authorization": "Basic YWxpY2U6c2VjcmV0", // alice:secret
	}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	if !want {
		// The line would be written when the answer is; give it a moment.
		time.Sleep(300 * time.Millisecond)
		assert.NotContains(t, s.stdout.String(), "/logged", "no access log")
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for !combinedLine.MatchString(s.stdout.String()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := s.stdout.String()
	assert.Regexp(t, combinedLine, out)
	assert.NotContains(t, out, "secret", "the password is never logged")
}

const nodeSettingsHandler = `
module.exports = {
  main(event, context) {
    const path = event.extensions.request.path;
    if (path === '/context') return context;
    return 'ok';
  },
};
`

func TestNodejsSettings(t *testing.T) {
	tests := []settingsCase{
		{name: "defaults: 1 MiB, no access log", limit: mib, contextLimit: 1},
		{name: "REQ_MB_LIMIT and KYMA_INTERNAL_LOGGER_ENABLED, the names of Kyma's nodejs20 to 24",
			env: []string{"REQ_MB_LIMIT=2", "KYMA_INTERNAL_LOGGER_ENABLED=true"}, limit: 2 * mib, contextLimit: 2, accessLog: true},
		{name: "FUNC_BODY_MB_LIMIT and SERVER_INTERNAL_LOGGER, the names of Kyma's docs",
			env: []string{"FUNC_BODY_MB_LIMIT=2", "SERVER_INTERNAL_LOGGER=true"}, limit: 2 * mib, contextLimit: 2, accessLog: true},
		{name: "both limits: REQ_MB_LIMIT wins; any logger value turns the log on",
			env: []string{"REQ_MB_LIMIT=1", "FUNC_BODY_MB_LIMIT=3", "KYMA_INTERNAL_LOGGER_ENABLED=false"}, limit: mib, contextLimit: 1, accessLog: true},
		{name: "a limit that is no number: the default, and a line on stderr",
			env: []string{"REQ_MB_LIMIT=lots"}, limit: mib, contextLimit: 1, stderr: `REQ_MB_LIMIT="lots" is not a positive number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startNode(t, map[string]string{"handler.js": nodeSettingsHandler}, tc.env...)
			testSettings(t, s, tc)
		})
	}
}

const pythonSettingsHandler = `
import threading
import time

lock = threading.Lock()
running = 0
peak = 0


def main(event, context):
    global running, peak
    path = event['extensions']['request'].path
    if path == '/context':
        return dict(context)
    if path == '/slow':
        with lock:
            running += 1
            peak = max(peak, running)
        # long enough that calls whose connection waited for the accept
        # queue (a retried SYN comes 1 s later) still overlap
        time.sleep(2)
        with lock:
            running -= 1
    if path == '/peak':
        return str(peak)
    return 'ok'
`

func TestPythonSettings(t *testing.T) {
	tests := []settingsCase{
		{name: "defaults: 100 MiB, 50 calls at once, no access log", contextLimit: 100 * mib, threads: 50},
		{name: "FUNC_MEMFILE_MAX, CHERRYPY_NUMTHREADS and KYMA_INTERNAL_LOGGER_ENABLED, the names of Kyma's python312",
			env:   []string{"FUNC_MEMFILE_MAX=2000", "CHERRYPY_NUMTHREADS=2", "KYMA_INTERNAL_LOGGER_ENABLED=true"},
			limit: 2000, contextLimit: 2000, threads: 2, accessLog: true},
		{name: "FUNC_BODY_MB_LIMIT, SERVER_NUMTHREADS and SERVER_INTERNAL_LOGGER, the names of Kyma's docs",
			env:   []string{"FUNC_BODY_MB_LIMIT=1", "SERVER_NUMTHREADS=3", "SERVER_INTERNAL_LOGGER=true"},
			limit: mib, contextLimit: mib, threads: 3, accessLog: true},
		{name: "both names: python312's win; any logger value turns the log on",
			env: []string{"FUNC_MEMFILE_MAX=1500", "FUNC_BODY_MB_LIMIT=1", "CHERRYPY_NUMTHREADS=2", "SERVER_NUMTHREADS=4",
				"KYMA_INTERNAL_LOGGER_ENABLED=false"},
			limit: 1500, contextLimit: 1500, threads: 2, accessLog: true},
		{name: "values that are no positive numbers: the defaults, and a line on stderr each",
			env:          []string{"FUNC_MEMFILE_MAX=lots", "CHERRYPY_NUMTHREADS=0"},
			contextLimit: 100 * mib, threads: 50, stderr: "FUNC_MEMFILE_MAX='lots' is not a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startPython(t, pythonSettingsHandler, tc.env...)
			testSettings(t, s, tc)
			if strings.Contains(tc.name, "no positive numbers") {
				assert.Contains(t, s.stderr.String(), "CHERRYPY_NUMTHREADS='0' is not a positive number")
			}
		})
	}
}
