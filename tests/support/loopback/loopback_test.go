package loopback

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every connection reaches the handler, and the test's end waits for a
// handler still running.
func TestServeHandlesEveryConnectionAndWaitsForHandlers(t *testing.T) {
	served := make(chan string, 3)
	finished := make(chan struct{})
	t.Run("serving", func(t *testing.T) {
		addr := Serve(t, "127.0.0.1", func(c net.Conn) {
			defer c.Close()
			b, _ := io.ReadAll(c)
			served <- string(b)
			if string(b) == "last" {
				time.Sleep(100 * time.Millisecond)
				close(finished)
			}
		})
		for _, msg := range []string{"one", "two", "last"} {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			_, err = c.Write([]byte(msg))
			require.NoError(t, err)
			require.NoError(t, c.Close())
		}
		got := map[string]bool{}
		for range 3 {
			select {
			case msg := <-served:
				got[msg] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("after 10 s the handler had seen %v of one, two and last", got)
			}
		}
		assert.Equal(t, map[string]bool{"one": true, "two": true, "last": true}, got)
	})
	select {
	case <-finished:
	default:
		t.Fatal("the subtest ended before its last handler returned")
	}
}

// After the test, the address refuses connections.
func TestServeStopsListeningWithTheTest(t *testing.T) {
	var addr string
	t.Run("serving", func(t *testing.T) {
		addr = Serve(t, "127.0.0.1", func(c net.Conn) { _ = c.Close() })
	})
	_, err := net.Dial("tcp", addr)
	assert.Error(t, err, "%s still accepts after the test that served it ended", addr)
}
