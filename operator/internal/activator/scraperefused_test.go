package activator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/support/loopback"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

func TestPlaintextRefusal(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: "http://10.1.0.1:8080/metrics", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &os.SyscallError{Syscall: "connect", Err: errno}}}
	}
	read := func(errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: "http://10.1.0.1:8080/metrics", Err: &net.OpError{Op: "read", Net: "tcp",
			Err: &os.SyscallError{Syscall: "read", Err: errno}}}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "no error", err: nil, want: ""},
		{name: "connection refused", err: dial(syscall.ECONNREFUSED), want: refusedConnection},
		{name: "reset while connecting", err: dial(syscall.ECONNRESET), want: resetConnection},
		{name: "reset while reading", err: read(syscall.ECONNRESET), want: resetConnection},
		{name: "broken pipe", err: read(syscall.EPIPE), want: resetConnection},
		{name: "closed without an answer", err: &url.Error{Op: "Get", URL: "http://x", Err: io.EOF}, want: closedConnection},
		{name: "closed in the middle of the answer", err: fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), want: closedConnection},
		{name: "a 400 of a TLS server", err: fmt.Errorf("status 400 Bad Request: %w", errAnswersTLS), want: answersTLS},
		{name: "a TLS alert instead of a status line",
			err:  errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x15\x03\x01\x00\x02\x02P"`),
			want: answersTLS},
		{name: "a TLS handshake instead of a status line",
			err:  errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x16\x03\x03\x00z\x02"`),
			want: answersTLS},
		{name: "another malformed answer", err: errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "SSH-2.0"`), want: ""},
		{name: "a timeout", err: &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, want: ""},
		{name: "no route to the replica", err: dial(syscall.EHOSTUNREACH), want: ""},
		{name: "a status other than 200", err: errors.New("status 500 Internal Server Error"), want: ""},
		{name: "wrapped in a ScrapeError", err: &ScrapeError{Replica: "10.1.0.1:8080", Err: dial(syscall.ECONNREFUSED)}, want: refusedConnection},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PlaintextRefusal(tc.err))
		})
	}
}

// resetAfterRequest reads the request and resets the connection, as a
// sidecar that refuses plaintext does.
func resetAfterRequest(c net.Conn) {
	_, _ = c.Read(make([]byte, 512))
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
}

// The scrape of a replica that refuses plaintext as a mesh does gives an
// error that PlaintextRefusal names; other failures give none.
func TestScrapeRefusedByReplica(t *testing.T) {
	tlsOnly := httptest.NewUnstartedServer(http.NotFoundHandler())
	// The server logs each plaintext request as a handshake error.
	tlsOnly.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsOnly.StartTLS()
	t.Cleanup(tlsOnly.Close)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := closed.Addr().String()
	require.NoError(t, closed.Close())
	tests := []struct {
		name string
		host string
		want string
	}{
		{name: "a TLS-only listener answers 400", host: tlsOnly.Listener.Addr().String(), want: answersTLS},
		{name: "nobody listens", host: nobody, want: refusedConnection},
		{name: "a proxy that resets", host: loopback.Serve(t, "127.0.0.1", resetAfterRequest), want: resetConnection},
		{name: "a proxy that closes", host: loopback.Serve(t, "127.0.0.1", func(c net.Conn) {
			_, _ = c.Read(make([]byte, 512))
			_ = c.Close()
		}), want: closedConnection},
		{name: "a TLS alert", host: loopback.Serve(t, "127.0.0.1", func(c net.Conn) {
			_, _ = c.Read(make([]byte, 512))
			_, _ = c.Write([]byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x50})
			_ = c.Close()
		}), want: answersTLS},
		{name: "a plaintext 404 is no refusal", host: notFound.Listener.Addr().String(), want: ""},
	}
	s, err := NewScaleDowns(ScaleDowns{}, nil)
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.scrapeOne(t.Context(), Replica{URL: &url.URL{Scheme: "http", Host: tc.host}})
			require.Error(t, err)
			var se *ScrapeError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.host, se.Replica)
			assert.Equal(t, tc.want, PlaintextRefusal(err), "error: %v", err)
		})
	}
}

// The note names the replica, the Function, the cause and the fix, and
// points to a guide that exists; it fits an event's note (1 KiB).
func TestScrapeRefusedNote(t *testing.T) {
	note := scrapeRefusedNote("ns/hello", "10.1.0.7:8080", resetConnection)
	for _, want := range []string{"10.1.0.7:8080", "ns/hello", "connection reset", "STRICT mutual TLS", "PERMISSIVE", "port 8080", ScrapeRefusedGuide} {
		assert.Contains(t, note, want)
	}
	assert.LessOrEqual(t, len(note), 1024)
	page := strings.TrimPrefix(ScrapeRefusedGuide, "https://kyma-project.io/#/serverless-manager/")
	require.NotEqual(t, ScrapeRefusedGuide, page)
	_, err := os.Stat(filepath.Join(repo.MustRoot(), "docs", filepath.FromSlash(page)+".md"))
	assert.NoError(t, err, "the guide the event points to")
}
