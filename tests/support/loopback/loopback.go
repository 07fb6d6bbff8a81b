// Package loopback serves TCP connections on an address of this machine for
// as long as a test runs: the accept loop that stand-in servers, proxies and
// misbehaving peers in tests share.
package loopback

import (
	"net"
	"sync"
	"testing"
)

// Serve listens at host on a free port and calls handle with every
// connection, each in a goroutine of its own, until t ends; then it closes
// the listener and waits for the handlers that are still running, so none
// outlives the test. It returns the address it listens at (host:port).
func Serve(t testing.TB, host string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening at %s: %v", host, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(conn)
			}()
		}
	}()
	return ln.Addr().String()
}
