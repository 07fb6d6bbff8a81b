package runtimes

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// The port is fixed (docs/contributor/runtime-contract.md#process), so servers
// of every test (and of any other package testing them) take turns on it
// through this lock file.
const (
	baseURL  = "http://127.0.0.1:8080"
	lockName = "serverless-runtime-8080.lock"
)

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}

// output collects a process's stdout or stderr.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *output) tail() string {
	s := o.String()
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

type server struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	exited         chan struct{}
}

// exitCode waits up to d for the process to end.
func (s *server) exitCode(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("process still running after %s; stderr:\n%s", d, s.stderr.tail())
		return -1
	}
}

// launch starts a server process while holding the port lock until the
// process has ended.
func launch(t *testing.T, dir string, env []string, name string, args ...string) *server {
	t.Helper()
	bin, err := exec.LookPath(name)
	require.NoError(t, err, "%s must be on PATH to test the runtime servers", name)

	lock, err := os.OpenFile(filepath.Join(os.TempDir(), lockName), os.O_CREATE|os.O_RDWR, 0o666)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() { _ = lock.Close() }) // closing releases the lock; runs last

	l, err := net.Listen("tcp", ":8080")
	require.NoError(t, err, "port 8080 is used by something that does not take %s", lockName)
	require.NoError(t, l.Close())

	s := &server{stdout: &output{}, stderr: &output{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = dir
	s.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	// Its own process group: a server started through sh and npm is a
	// child's child, and the cleanup must stop it too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		group := -s.cmd.Process.Pid
		_ = syscall.Kill(group, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(group, syscall.SIGKILL)
			<-s.exited
		}
		// The group's other members (npm's child) end with it; kill what
		// is left so the port is free for the next server.
		_ = syscall.Kill(group, syscall.SIGKILL)
	})
	return s
}

// start launches a server and waits until it answers /healthz.
func start(t *testing.T, dir string, env []string, name string, args ...string) *server {
	t.Helper()
	s := launch(t, dir, env, name, args...)
	// buildless mode runs npm install and npm start first
	const wait = 30 * time.Second
	deadline := time.Now().Add(wait)
	last := "nothing"
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			t.Fatalf("server exited with %s before answering /healthz; stderr:\n%s", s.cmd.ProcessState, s.stderr.tail())
		default:
		}
		resp, err := client.Get(baseURL + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "OK" {
				return s
			}
			last = fmt.Sprintf("%d %q", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("/healthz not OK within %s, last seen: %s; stderr:\n%s", wait, last, s.stderr.tail())
	return nil
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// nodeMode is how a Node.js Function's Pod starts the runtime server.
type nodeMode struct {
	name string
	// function are the files of function/ besides handler.js.
	function map[string]string
	// command and its arguments, run in dir (the server's directory) or
	// in its function/.
	command    []string
	inFunction bool
}

// nodeModes are build mode (the image holds the Function's code and its
// installed dependencies in function/, the image's command starts the
// server in /usr/src/app) and buildless mode (the Pod writes handler.js
// and package.json into function/, its mounted volume and working
// directory, installs the dependencies there, and starts the server with
// `cd ..; npm start`).
func nodeModes() []nodeMode {
	return []nodeMode{
		{
			name: "build",
			function: map[string]string{
				"package.json":                      `{"name":"fn","version":"1.0.0","dependencies":{"tinydep":"1.0.0"}}`,
				"node_modules/tinydep/index.js":     `module.exports = () => 'from tinydep';`,
				"node_modules/tinydep/package.json": `{"name":"tinydep","version":"1.0.0","main":"index.js"}`,
			},
			command: []string{"node", "server.mjs"},
		},
		{
			name:       "buildless",
			function:   map[string]string{"package.json": `{"name":"fn","version":"1.0.0","dependencies":{}}`},
			command:    []string{"sh", "-c", "npm install --prefer-offline --no-audit --progress=false --no-fund && cd .. && exec npm start"},
			inFunction: true,
		},
	}
}

// serverModules is the runtime server's node_modules as the image build
// installs it (from package-lock.json, kept in the repository's bin/cache).
func serverModules(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	require.NoError(t, err)
	dir, err := localimage.NodeServerModules(t.Context(), "nodejs", filepath.Join(root, "bin", "cache"))
	require.NoError(t, err, "the runtime server's dependencies come from the npm registry")
	return dir
}

// copyTree copies the files below src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
	}))
}

// startNode lays the Node server out as the image does (server.mjs, its
// package files and node_modules in a directory, the Function's files in
// its function/) and starts it in build mode.
func startNode(t *testing.T, function map[string]string, env ...string) *server {
	t.Helper()
	return startNodeMode(t, nodeModes()[0], function, env...)
}

func startNodeMode(t *testing.T, mode nodeMode, function map[string]string, env ...string) *server {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"server.mjs", "package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("nodejs", name))
		require.NoError(t, err)
		writeFiles(t, dir, map[string]string{name: string(b)})
	}
	copyTree(t, serverModules(t), filepath.Join(dir, "node_modules"))
	files := map[string]string{}
	for name, content := range mode.function {
		files[filepath.Join("function", name)] = content
	}
	for name, content := range function {
		files[filepath.Join("function", name)] = content
	}
	writeFiles(t, dir, files)
	workDir := dir
	if mode.inFunction {
		workDir = filepath.Join(dir, "function")
	}
	return start(t, workDir, append(env, "HANDLER_PATH=./function/handler.js"), mode.command[0], mode.command[1:]...)
}

func pythonEnv(t *testing.T, handler string, env ...string) (string, []string) {
	t.Helper()
	fn := t.TempDir()
	writeFiles(t, fn, map[string]string{"handler.py": handler})
	src, err := filepath.Abs("python")
	require.NoError(t, err)
	return src, append(env, "FUNCTION_PATH="+fn, "PYTHONUNBUFFERED=TRUE", "PYTHONDONTWRITEBYTECODE=1")
}

func startPython(t *testing.T, handler string, env ...string) *server {
	t.Helper()
	src, env := pythonEnv(t, handler, env...)
	return start(t, src, env, "python3", "server.py")
}

type request struct {
	method, path string
	header       map[string]string
	body         string
}

func do(t *testing.T, r request) (*http.Response, string) {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, baseURL+r.path, strings.NewReader(r.body))
	require.NoError(t, err)
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

type testCase struct {
	name   string
	req    request
	status int
	body   string            // exact body unless empty; see emptyBody
	json   string            // JSON body (compared semantically) unless empty
	header map[string]string // header prefixes
	// emptyBody asserts an empty body.
	emptyBody bool
}

func runCases(t *testing.T, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.req)
			require.Equal(t, tc.status, resp.StatusCode, "body: %s", body)
			if tc.body != "" {
				require.Equal(t, tc.body, body)
			}
			if tc.emptyBody {
				require.Empty(t, body)
			}
			if tc.json != "" {
				require.JSONEq(t, tc.json, body)
			}
			for k, v := range tc.header {
				require.True(t, strings.HasPrefix(resp.Header.Get(k), v), "header %s = %q, want prefix %q", k, resp.Header.Get(k), v)
			}
		})
	}
}

// metric sums a metric's samples over its labels.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, body := do(t, request{path: "/metrics"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"))
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			require.NoError(t, err, line)
			sum += f
		}
	}
	return sum
}

func testMetrics(t *testing.T, durationMetric string) {
	calls, failures := metric(t, "function_calls_total"), metric(t, "function_failures_total")
	do(t, request{path: "/string"})
	do(t, request{method: http.MethodPost, path: "/string"})
	do(t, request{path: "/throw"})
	require.Equal(t, calls+3, metric(t, "function_calls_total"))
	require.Equal(t, failures+1, metric(t, "function_failures_total"))
	require.Positive(t, metric(t, durationMetric+"_count"))
}

// publisher stands in for the eventing publisher proxy.
type publisher struct {
	*httptest.Server
	received chan publishedEvent
}

type publishedEvent struct {
	contentType string
	body        map[string]any
}

func newPublisher(t *testing.T) *publisher {
	p := &publisher{received: make(chan publishedEvent, 10)}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev publishedEvent
		ev.contentType = r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&ev.body)
		p.received <- ev
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(p.Close)
	return p
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func testEmit(t *testing.T, p *publisher, source string, want map[string]any) {
	resp, body := do(t, request{path: "/emit"})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var ev publishedEvent
	select {
	case ev = <-p.received:
	case <-time.After(5 * time.Second):
		t.Fatal("no CloudEvent reached the publisher")
	}
	require.Equal(t, "application/cloudevents+json", ev.contentType)
	require.Equal(t, "1.0", ev.body["specversion"])
	require.Equal(t, "sap.test.emitted", ev.body["type"])
	require.Equal(t, source, ev.body["source"])
	require.Equal(t, "v1", ev.body["eventtypeversion"])
	require.Equal(t, map[string]any{"n": 1.0}, ev.body["data"])
	require.Regexp(t, uuidPattern, ev.body["id"])
	ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(ev.body["time"]))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), ts, time.Minute)
	for k, v := range want {
		require.Equal(t, v, ev.body[k], k)
	}
}

// cloudEventCases send one event in binary and one in structured mode to
// /ce, whose handler returns the attributes and data it was given.
func cloudEventCases() []testCase {
	return []testCase{
		{
			name: "CloudEvent binary mode",
			req: request{method: http.MethodPost, path: "/ce", body: `{"order":42}`, header: map[string]string{
				"Content-Type":        "application/json",
				"ce-type":             "sap.kyma.order.created",
				"ce-source":           "shop",
				"ce-specversion":      "1.0",
				"ce-id":               "A234-1234-1234",
				"ce-eventtypeversion": "v1",
			}},
			status: http.StatusOK,
			json: `{"type":"sap.kyma.order.created","source":"shop","specversion":"1.0","id":"A234-1234-1234",
				"eventtypeversion":"v1","data":{"order":42}}`,
		},
		{
			name: "CloudEvent structured mode",
			req: request{method: http.MethodPost, path: "/ce", header: map[string]string{"Content-Type": "application/cloudevents+json"},
				body: `{"specversion":"1.0","type":"sap.kyma.order.paid","source":"billing","id":"B-77","eventtypeversion":"v2",
					"datacontenttype":"application/json","data":{"order":43}}`},
			status: http.StatusOK,
			json: `{"type":"sap.kyma.order.paid","source":"billing","specversion":"1.0","id":"B-77",
				"eventtypeversion":"v2","data":{"order":43}}`,
		},
	}
}

// testSIGTERM holds an idle keep-alive connection open while stopping the
// server: it still answers new requests for its drain (a terminating Pod
// gets traffic until kube-proxy has removed it), then exits 0 promptly.
func testSIGTERM(t *testing.T, s *server) {
	resp, body := do(t, request{path: "/healthz"})
	require.Equal(t, "OK", body)
	require.False(t, resp.Close, "the connection should stay open")
	begin := time.Now()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	time.Sleep(500 * time.Millisecond)
	_, body = do(t, request{path: "/healthz"})
	require.Equal(t, "OK", body, "answers while draining")
	require.Equal(t, 0, s.exitCode(t, 5*time.Second), "stderr:\n%s", s.stderr.tail())
	t.Logf("exited %s after SIGTERM", time.Since(begin))
}

const nodeHandler = `
const dep = require('tinydep');

const routes = {
  '/echo': (event) => event.data,
  '/string': () => 'hello from node',
  '/status': (event) => {
    event.setResponseStatus(201);
    event.setResponseHeader('X-Test', 'yes');
    return { created: true };
  },
  '/throw': () => { throw new Error('boom'); },
  '/reject-string': async () => { throw 'custom failure'; },
  '/sleep': () => new Promise((resolve) => setTimeout(() => resolve('late'), 2000)),
  '/context': (event, context) => context,
  '/dep': () => dep(),
  '/ce': (event) => ({
    type: event['ce-type'], source: event['ce-source'], specversion: event['ce-specversion'],
    id: event['ce-id'], eventtypeversion: event['ce-eventtypeversion'], data: event.data,
  }),
  '/emit': async (event) => {
    const resp = await event.emitCloudEvent('sap.test.emitted', 'node-test', { n: 1 }, { eventtypeversion: 'v1' });
    return { status: resp.status };
  },
  '/callback': (event, context, callback) => callback(undefined, 202),
  '/raw': (event) => {
    const res = event.extensions.response;
    res.writeHead(203, { 'X-Raw': '1' });
    res.end('raw');
    return 'ignored';
  },
  '/tracer': (event) => {
    const span = event.tracer.startSpan('work');
    span.setAttribute('a', 1);
    span.end();
    return 'traced';
  },
};

module.exports = {
  main(event, context, callback) {
    const path = new URL(event.extensions.request.url, 'http://x').pathname;
    return (routes[path] || (() => 'default'))(event, context, callback);
  },
};
`

func TestNodejs(t *testing.T) {
	p := newPublisher(t)
	s := startNode(t, map[string]string{"handler.js": nodeHandler},
		"FUNC_NAME=fn-test", "SERVICE_NAMESPACE=ns-test", "FUNC_RUNTIME=nodejs20", "FUNC_TIMEOUT=1", "REQ_MB_LIMIT=2",
		"PUBLISHER_PROXY_ADDRESS="+p.URL+"/publish", "KYMA_INTERNAL_LOGGER_ENABLED=true")

	runCases(t, append([]testCase{
		{name: "healthz", req: request{path: "/healthz"}, status: 200, body: "OK"},
		{name: "favicon ends with 204", req: request{path: "/favicon.ico"}, status: 204, emptyBody: true},
		{
			name:   "JSON body echoed through event.data",
			req:    request{method: http.MethodPost, path: "/echo", body: `{"a":[1,2],"b":"c"}`, header: map[string]string{"Content-Type": "application/json"}},
			status: 200, json: `{"a":[1,2],"b":"c"}`,
			header: map[string]string{"Content-Type": "application/json", "Access-Control-Allow-Origin": "*"},
		},
		{
			name:   "text body echoed as a string",
			req:    request{method: http.MethodPost, path: "/echo", body: "plain words", header: map[string]string{"Content-Type": "text/plain"}},
			status: 200, body: "plain words",
		},
		{
			name:   "form body parsed into an object",
			req:    request{method: http.MethodPost, path: "/echo", body: "x=1&y=two", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
			status: 200, json: `{"x":"1","y":"two"}`,
		},
		{
			name:   "form keys with brackets give nested objects",
			req:    request{method: http.MethodPost, path: "/echo", body: "a[b]=1&a[c]=2", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
			status: 200, json: `{"a":{"b":"1","c":"2"}}`,
		},
		{
			name:   "any JSON value is parsed, not only objects",
			req:    request{method: http.MethodPost, path: "/echo", body: `"just a string"`, header: map[string]string{"Content-Type": "application/json"}},
			status: 200, body: "just a string",
		},
		{
			name:   "bad JSON is 400",
			req:    request{method: http.MethodPost, path: "/echo", body: `{"a":`, header: map[string]string{"Content-Type": "application/json"}},
			status: 400,
		},
		{
			name:   "body over REQ_MB_LIMIT is 413",
			req:    request{method: http.MethodPost, path: "/echo", body: strings.Repeat("x", 3<<20), header: map[string]string{"Content-Type": "text/plain"}},
			status: 413,
		},
		{name: "string return", req: request{path: "/string"}, status: 200, body: "hello from node"},
		{name: "POST /healthz reaches the handler", req: request{method: http.MethodPost, path: "/healthz"}, status: 200, body: "default"},
		{
			name: "object with setResponseStatus and setResponseHeader", req: request{path: "/status"},
			status: 201, json: `{"created":true}`, header: map[string]string{"X-Test": "yes", "Content-Type": "application/json"},
		},
		{name: "thrown error is 500", req: request{path: "/throw"}, status: 500, body: "Internal server error"},
		{name: "rejected string is the 500 body", req: request{path: "/reject-string"}, status: 500, body: "custom failure"},
		{name: "timeout is 408", req: request{path: "/sleep"}, status: 408, body: "Request Timeout"},
		{
			name: "context from env", req: request{path: "/context"}, status: 200,
			json: `{"function-name":"fn-test","namespace":"ns-test","runtime":"nodejs20","timeout":1,"body-size-limit":2}`,
		},
		{name: "dependency from function/node_modules", req: request{path: "/dep"}, status: 200, body: "from tinydep"},
		{name: "callback with a status and no body sends its reason", req: request{path: "/callback"}, status: 202, body: "Accepted"},
		{name: "response ended by the handler", req: request{path: "/raw"}, status: 203, body: "raw", header: map[string]string{"X-Raw": "1"}},
		{name: "no-op tracer", req: request{path: "/tracer"}, status: 200, body: "traced"},
		{
			name: "OPTIONS preflight skips the handler",
			req: request{method: http.MethodOptions, path: "/string", header: map[string]string{
				"Origin": "https://example.com", "Access-Control-Request-Method": "PATCH", "Access-Control-Request-Headers": "x-custom",
			}},
			status: 200, emptyBody: true,
			header: map[string]string{
				"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "PATCH", "Access-Control-Allow-Headers": "x-custom",
			},
		},
	}, cloudEventCases()...))

	t.Run("an over-limit body is answered, never reset", func(t *testing.T) { testOverLimitAnswered(t, 3<<20) })
	t.Run("metrics count calls and failures", func(t *testing.T) { testMetrics(t, "function_duration_miliseconds") })
	t.Run("emitCloudEvent posts a structured event", func(t *testing.T) {
		testEmit(t, p, "node-test", map[string]any{"datacontenttype": "application/json"})
	})
	t.Run("access log", func(t *testing.T) {
		require.Contains(t, s.stdout.String(), `"GET /string HTTP/1.1" 200`)
	})
}

// expressHandler uses what Express gives a handler written for Kyma: the
// request's query, params, get(), body and path, the response's status(),
// send(), json() and set().
const expressHandler = `
const path = require('node:path');

module.exports = {
  main(event) {
    const req = event.extensions.request;
    const res = event.extensions.response;
    switch (req.path) {
      case '/hello':
        return 'Hello ' + req.query.name + '!';
      case '/send':
        res.status(202).send('accepted ' + req.get('X-Test'));
        return;
      case '/not-found':
        res.status(404).set('X-Reason', 'none').json({ error: 'no ' + req.query.id });
        return 'ignored: the response has ended';
      case '/resolve':
        // the runtime's Express, found from function/ by Node's parent lookup
        return path.relative(path.dirname(__dirname), require.resolve('express'));
      default:
        res.json({
          method: req.method, path: req.path, query: req.query, params: req.params,
          header: req.get('x-test'), isJSON: req.is('application/json'), body: req.body,
          data: event.data, hostname: req.hostname, protocol: req.protocol,
        });
    }
  },
};
`

// expressCases hold the Express API handlers use to the runtime: the
// handler is mounted on Express 5's "*path" as in Kyma's server, so
// params.path is the path's segments.
func expressCases() []testCase {
	return []testCase{
		{name: "query.name answered", req: request{path: "/hello?name=Kyma"}, status: 200, body: "Hello Kyma!"},
		{
			name: "query, params, get(), is(), body through req",
			req: request{method: http.MethodPost, path: "/echo/a/b?x=1&tag=p&tag=q", body: `{"n":7}`,
				header: map[string]string{"Content-Type": "application/json", "X-Test": "abc"}},
			status: 200,
			json: `{"method":"POST","path":"/echo/a/b","query":{"x":"1","tag":["p","q"]},"params":{"path":["","echo","a","b"]},
				"header":"abc","isJSON":"application/json","body":{"n":7},"data":{"n":7},"hostname":"127.0.0.1","protocol":"http"}`,
			header: map[string]string{"Content-Type": "application/json", "Access-Control-Allow-Origin": "*", "X-Powered-By": "Express"},
		},
		{
			name: "params of the root path", req: request{path: "/"}, status: 200,
			json: `{"method":"GET","path":"/","query":{},"params":{"path":["",""]},"isJSON":null,"hostname":"127.0.0.1","protocol":"http"}`,
		},
		{
			name: "status().send()", req: request{path: "/send", header: map[string]string{"X-Test": "yes"}},
			status: 202, body: "accepted yes", header: map[string]string{"Content-Type": "text/html"},
		},
		{
			name: "status().set().json() wins over the return value", req: request{path: "/not-found?id=7"},
			status: 404, json: `{"error":"no 7"}`, header: map[string]string{"X-Reason": "none", "Content-Type": "application/json"},
		},
		{name: "Express resolves from the server's node_modules", req: request{path: "/resolve"}, status: 200, body: "node_modules/express/index.js"},
	}
}

// TestNodejsExpress runs a handler written against Express's request and
// response in both modes.
func TestNodejsExpress(t *testing.T) {
	for _, mode := range nodeModes() {
		t.Run(mode.name, func(t *testing.T) {
			startNodeMode(t, mode, map[string]string{"handler.js": expressHandler})
			runCases(t, expressCases())
		})
	}
}

func TestNodejsMissingMain(t *testing.T) {
	s := startNode(t, map[string]string{"handler.js": `module.exports = { other: () => 'x' };`})
	runCases(t, []testCase{
		{name: "handler request", req: request{path: "/"}, status: 500, body: "User function not loaded"},
		{name: "healthz", req: request{path: "/healthz"}, status: 200, body: "OK"},
	})
	require.Contains(t, s.stderr.String(), `does not export a function "main"`)
}

func TestNodejsSIGTERM(t *testing.T) {
	testSIGTERM(t, startNode(t, map[string]string{"handler.js": `exports.main = () => 'ok';`}))
}

const pythonHandler = `
import time


def main(event, context):
    req = event['extensions']['request']
    path = req.path
    if path == '/echo':
        return event['data']
    if path == '/string':
        return 'hello from python'
    if path == '/throw':
        raise RuntimeError('boom')
    if path == '/sleep':
        time.sleep(2)
        return 'late'
    if path == '/context':
        return dict(context)
    if path == '/request':
        return {'method': req.method, 'path': req.path, 'query': dict(req.query), 'header': req.headers['X-Test'],
                'body': req.body.read().decode(), 'has_data': 'data' in event}
    if path == '/hello':
        return 'Hello ' + req.query.name + '!'
    if path.startswith('/bottle'):
        return {
            'query_item': req.query['x'], 'query_attr': req.query.x, 'query_missing': req.query.nothing,
            'query_all': req.query.getall('tag'), 'query_get': req.query.get('tag'), 'query_int': req.query.get('x', type=int),
            'query_utf8': req.query.name, 'query_string': req.query_string, 'form_attr': req.forms.field,
            'params': dict(req.params), 'forms': dict(req.forms.decode()),
            'files': {k: [f.filename, f.content_type, f.file.read().decode()] for k, f in req.files.items()},
            'json': req.json, 'body_twice': [req.body.read().decode(), req.body.read().decode()],
            'url': req.url, 'path': req.path, 'fullpath': req.fullpath,
            'get_header': req.get_header('x-test'), 'header_missing': req.get_header('x-none', 'dflt'),
            'header_names': sorted(k for k in req.headers if k.startswith('X-')),
            'content_type': req.content_type, 'content_length': req.content_length,
            'cookie': req.get_cookie('session'), 'cookies': dict(req.cookies),
            'remote_addr': req.remote_addr, 'is_xhr': req.is_xhr, 'auth': req.auth,
            'environ': req['REQUEST_METHOD'], 'method': req.method,
        }
    if path == '/ce':
        return {'type': event['ce-type'], 'source': event['ce-source'], 'specversion': event['ce-specversion'],
                'id': event['ce-id'], 'eventtypeversion': event['ce-eventtypeversion'], 'data': event['data']}
    if path == '/emit':
        event.emitCloudEvent('sap.test.emitted', 'python-test', {'n': 1}, {'eventtypeversion': 'v1'})
        return 'emitted'
    if path == '/tracer':
        with event.tracer.start_as_current_span('work') as span:
            span.set_attribute('a', 1)
        return 'traced'
    if path == '/none':
        return None
    return 'default'
`

// multipartBody is a form with a field and a file.
const multipartBody = "--XX\r\n" +
	"Content-Disposition: form-data; name=\"field\"\r\n\r\nvälue\r\n--XX\r\n" +
	"Content-Disposition: form-data; name=\"upload\"; filename=\"dir/a.txt\"\r\nContent-Type: text/plain\r\n\r\nfile text\r\n--XX--\r\n"

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestPython(t *testing.T) {
	p := newPublisher(t)
	s := startPython(t, pythonHandler,
		"FUNC_NAME=fn-test", "SERVICE_NAMESPACE=ns-test", "FUNC_RUNTIME=python312", "FUNC_TIMEOUT=1",
		"FUNC_MEMFILE_MAX=100000", "FUNC_MEMORY_LIMIT=128Mi",
		"PUBLISHER_PROXY_ADDRESS="+p.URL+"/publish", "KYMA_INTERNAL_LOGGER_ENABLED=true")

	runCases(t, append([]testCase{
		{name: "healthz", req: request{path: "/healthz"}, status: 200, body: "OK"},
		{name: "favicon ends with 204", req: request{path: "/favicon.ico"}, status: 204, emptyBody: true},
		{
			name:   "JSON body echoed through event data",
			req:    request{method: http.MethodPost, path: "/echo", body: `{"a":[1,2],"b":"c"}`, header: map[string]string{"Content-Type": "application/json"}},
			status: 200, json: `{"a":[1,2],"b":"c"}`, header: map[string]string{"Content-Type": "application/json"},
		},
		{
			name:   "bad JSON is 400",
			req:    request{method: http.MethodPatch, path: "/echo", body: `{"a":`, header: map[string]string{"Content-Type": "application/json"}},
			status: 400,
		},
		{
			name:   "body over FUNC_MEMFILE_MAX is 413",
			req:    request{method: http.MethodPost, path: "/string", body: strings.Repeat("x", 200000)},
			status: 413,
		},
		{name: "string return", req: request{path: "/string"}, status: 200, body: "hello from python"},
		{name: "None return is an empty 200", req: request{method: http.MethodDelete, path: "/none"}, status: 200, emptyBody: true},
		{
			name: "request object; data only for application/json",
			req: request{method: http.MethodPost, path: "/request?x=1&y=two", body: "raw text",
				header: map[string]string{"Content-Type": "text/plain", "X-Test": "abc"}},
			status: 200,
			json:   `{"method":"POST","path":"/request","query":{"x":"1","y":"two"},"header":"abc","body":"raw text","has_data":false}`,
		},
		{name: "query.name answered", req: request{path: "/hello?name=Kyma"}, status: 200, body: "Hello Kyma!"},
		{
			name: "Bottle request: query, JSON body, headers, URL, cookies, auth",
			req: request{method: http.MethodPost, path: "/bottle/a%20b?x=1&tag=p&tag=q&name=J%C3%BCrgen", body: `{"n":7}`,
				header: map[string]string{"Content-Type": "application/json", "X-Test": "abc", "X-Requested-With": "XMLHttpRequest",
					"Cookie": "session=s1; theme=dark", "Authorization": "Basic dXNlcjpwdw=="}},
			status: 200,
			json: `{"query_item":"1","query_attr":"1","query_missing":"","query_all":["p","q"],"query_get":"q","query_int":1,
				"query_utf8":"Jürgen","query_string":"x=1&tag=p&tag=q&name=J%C3%BCrgen","form_attr":"",
				"params":{"x":"1","tag":"q","name":"JÃ¼rgen","{\"n\":7}":""},"forms":{"{\"n\":7}":""},"files":{},
				"json":{"n":7},"body_twice":["{\"n\":7}","{\"n\":7}"],
				"url":"http://127.0.0.1:8080/bottle/a%20b?x=1&tag=p&tag=q&name=J%C3%BCrgen","path":"/bottle/a b","fullpath":"/bottle/a b",
				"get_header":"abc","header_missing":"dflt","header_names":["X-Requested-With","X-Test"],
				"content_type":"application/json","content_length":7,"cookie":"s1","cookies":{"session":"s1","theme":"dark"},
				"remote_addr":"127.0.0.1","is_xhr":true,"auth":["user","pw"],"environ":"POST","method":"POST"}`,
		},
		{
			name: "Bottle request: urlencoded form in forms and params",
			req: request{method: http.MethodPatch, path: "/bottle?x=2", body: "f=1&g=J%C3%BCrgen+K",
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
			status: 200,
			json: `{"query_item":"2","query_attr":"2","query_missing":"","query_all":[],"query_get":null,"query_int":2,
				"query_utf8":"","query_string":"x=2","form_attr":"","params":{"x":"2","f":"1","g":"JÃ¼rgen K"},"forms":{"f":"1","g":"Jürgen K"},"files":{},
				"json":null,"body_twice":["f=1&g=J%C3%BCrgen+K","f=1&g=J%C3%BCrgen+K"],
				"url":"http://127.0.0.1:8080/bottle?x=2","path":"/bottle","fullpath":"/bottle",
				"get_header":null,"header_missing":"dflt","header_names":[],
				"content_type":"application/x-www-form-urlencoded","content_length":19,"cookie":null,"cookies":{},
				"remote_addr":"127.0.0.1","is_xhr":false,"auth":null,"environ":"PATCH","method":"PATCH"}`,
		},
		{
			name: "Bottle request: multipart fields in forms, uploads in files",
			req: request{method: http.MethodPost, path: "/bottle?x=3", body: multipartBody,
				header: map[string]string{"Content-Type": "multipart/form-data; boundary=XX"}},
			status: 200,
			json: fmt.Sprintf(`{"query_item":"3","query_attr":"3","query_missing":"","query_all":[],"query_get":null,"query_int":3,
				"query_utf8":"","query_string":"x=3","form_attr":"välue","params":{"x":"3","field":"välue"},"forms":{"field":"välue"},
				"files":{"upload":["a.txt","text/plain","file text"]},"json":null,"body_twice":[%[1]s,%[1]s],
				"url":"http://127.0.0.1:8080/bottle?x=3","path":"/bottle","fullpath":"/bottle",
				"get_header":null,"header_missing":"dflt","header_names":[],
				"content_type":"multipart/form-data; boundary=xx","content_length":184,"cookie":null,"cookies":{},
				"remote_addr":"127.0.0.1","is_xhr":false,"auth":null,"environ":"POST","method":"POST"}`, jsonString(multipartBody)),
		},
		{
			name:   "request.json of a body that is no JSON is 400",
			req:    request{method: http.MethodPost, path: "/bottle?x=4", body: "{", header: map[string]string{"Content-Type": "application/json-rpc"}},
			status: 400, body: "Invalid JSON",
		},
		{name: "PUT is 405", req: request{method: http.MethodPut, path: "/string"}, status: 405},
		{name: "OPTIONS is 405", req: request{method: http.MethodOptions, path: "/string"}, status: 405},
		{name: "thrown error is 500", req: request{path: "/throw"}, status: 500, body: "Internal server error"},
		{name: "timeout is 408", req: request{path: "/sleep"}, status: 408, body: "Timeout while processing the function"},
		{
			name: "context from env", req: request{path: "/context"}, status: 200,
			json: `{"function-name":"fn-test","namespace":"ns-test","runtime":"python312","timeout":1,
				"body-size-limit":100000,"memory-limit":"128Mi"}`,
		},
		{name: "no-op tracer", req: request{path: "/tracer"}, status: 200, body: "traced"},
	}, cloudEventCases()...))

	t.Run("an over-limit body is answered, never reset", func(t *testing.T) { testOverLimitAnswered(t, 200000) })
	t.Run("metrics count calls and failures", func(t *testing.T) { testMetrics(t, "function_duration_seconds") })
	t.Run("emitCloudEvent posts a structured event", func(t *testing.T) { testEmit(t, p, "python-test", nil) })
	t.Run("access log", func(t *testing.T) {
		require.Contains(t, s.stdout.String(), `"GET /string HTTP/1.1" 200`)
		require.Contains(t, s.stderr.String(), "RuntimeError: boom", "the traceback goes to stderr")
	})
}

// testOverLimitAnswered sends a body of size bytes, over the server's
// limit, many times: each must get its 413. A server that closes the
// connection with the body unread resets it, and the client then sees a
// broken pipe instead of the answer, on about one request in a hundred.
func testOverLimitAnswered(t *testing.T, size int) {
	body := strings.Repeat("x", size)
	for i := range 100 {
		resp, err := client.Post(baseURL+"/string", "text/plain", strings.NewReader(body))
		require.NoError(t, err, "request %d", i)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "request %d", i)
	}
}

func TestPythonMissingMain(t *testing.T) {
	s := startPython(t, "def other(event, context):\n    return 'x'\n")
	runCases(t, []testCase{
		{name: "handler request", req: request{path: "/"}, status: 500, body: "User function not loaded"},
		{name: "healthz", req: request{path: "/healthz"}, status: 200, body: "OK"},
	})
	require.Contains(t, s.stderr.String(), "AttributeError")
}

func TestPythonModNameServer(t *testing.T) {
	src, env := pythonEnv(t, "def main(event, context):\n    return 'x'\n", "MOD_NAME=server")
	s := launch(t, src, env, "python3", "server.py")
	require.Equal(t, 2, s.exitCode(t, 10*time.Second))
	require.Contains(t, s.stderr.String(), "MOD_NAME")
}

func TestPythonSIGTERM(t *testing.T) {
	testSIGTERM(t, startPython(t, "def main(event, context):\n    return 'ok'\n"))
}

// The nodejs22 image as hack/cluster/localimage builds it: every package of
// the server's package-lock.json is in /usr/src/app/node_modules, and the
// server taken from the unpacked image, run by the image's own node,
// serves the Express handler.
func TestNodejsImage(t *testing.T) {
	root, err := repo.Root()
	require.NoError(t, err)
	b := localimage.Builder{Root: root, Cache: filepath.Join(root, "bin", "cache")}
	img, err := b.Build(t.Context(), localimage.RuntimeImage("nodejs22"))
	require.NoError(t, err)
	files, err := ociimage.Files(img)
	require.NoError(t, err)

	data, err := os.ReadFile(filepath.Join("nodejs", "package-lock.json"))
	require.NoError(t, err)
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(data, &lock))
	require.Contains(t, lock.Packages, "node_modules/express")
	for name, pkg := range lock.Packages {
		if name == "" {
			continue // the server itself
		}
		f, ok := files["usr/src/app/"+name+"/package.json"]
		if !assert.True(t, ok, "%s is in the image", name) {
			continue
		}
		var manifest struct{ Version string }
		require.NoError(t, json.Unmarshal(f.Data, &manifest), name)
		assert.Equal(t, pkg.Version, manifest.Version, name)
	}

	// The server's tree and node, the rest (busybox's links) is not needed.
	unpacked := t.TempDir()
	for name, f := range files {
		if !strings.HasPrefix(name, "usr/src/app/") && name != "usr/local/bin/node" {
			continue
		}
		target := filepath.Join(unpacked, filepath.FromSlash(name))
		switch f.Header.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(target, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
			require.NoError(t, os.WriteFile(target, f.Data, fs.FileMode(f.Header.Mode).Perm()))
		default:
			t.Fatalf("%s: a %c, not a file or directory", name, f.Header.Typeflag)
		}
	}
	app := filepath.Join(unpacked, "usr", "src", "app")
	writeFiles(t, app, map[string]string{"function/handler.js": expressHandler})
	start(t, app, []string{"HANDLER_PATH=./function/handler.js"}, filepath.Join(unpacked, "usr", "local", "bin", "node"), "server.mjs")
	runCases(t, expressCases())
}
