package localnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Network gives processes here what cluster DNS and kube-proxy give a Pod:
// a Service's name reaches the process that serves it. It is an HTTP proxy
// (plain requests and CONNECT tunnels) on a loopback port; a process that
// should resolve Service names gets Env. Loopback addresses never go
// through a proxy, so the API server and local test servers stay direct.
type Network struct {
	addr string
	srv  *http.Server

	mu      sync.Mutex
	routes  map[string]string // "name.namespace.svc.cluster.local:port" → loopback address
	observe func(hostport string, r *http.Request)
}

// Observe has f see every plain HTTP request routed to a process here
// (not those inside CONNECT tunnels), before it is forwarded: a bench
// counts a Service's requests with it. nil stops observing.
func (n *Network) Observe(f func(hostport string, r *http.Request)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.observe = f
}

// StartNetwork starts the proxy.
func StartNetwork() (*Network, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &Network{addr: l.Addr().String(), routes: map[string]string{}}
	n.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.srv.Serve(l) }()
	return n, nil
}

// Close stops the proxy.
func (n *Network) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.srv.Shutdown(ctx)
}

// URL is the proxy's.
func (n *Network) URL() string { return "http://" + n.addr }

// Env makes a process send its HTTP(S) requests through the network.
func (n *Network) Env() []string {
	url := n.URL()
	return []string{"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url}
}

// Transport is an HTTP transport that resolves Service names here.
func (n *Network) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: n.addr})
	return tr
}

// ServiceNames are the names a Pod resolves a Service by from another
// namespace, the fully qualified one first.
func ServiceNames(svc *corev1.Service) []string {
	base := svc.Name + "." + svc.Namespace
	return []string{base + ".svc.cluster.local", base + ".svc", base}
}

// RouteService sends the Service's ports to the process whose Pod template
// has podLabels, when the Service selects it: each port's targetPort
// (number or name) is looked up in the process's loopback addresses. It
// reports whether the Service selects the Pod.
func (n *Network) RouteService(svc *corev1.Service, podLabels map[string]string, byNumber map[int32]string, byName map[string]string) bool {
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, port := range svc.Spec.Ports {
		target := byName[port.TargetPort.StrVal]
		if port.TargetPort.IntVal != 0 {
			target = byNumber[port.TargetPort.IntVal]
		}
		if port.TargetPort.IntVal == 0 && port.TargetPort.StrVal == "" {
			target = byNumber[port.Port]
		}
		if target == "" {
			continue
		}
		for _, host := range ServiceNames(svc) {
			n.routes[net.JoinHostPort(host, strconv.Itoa(int(port.Port)))] = target
		}
	}
	return true
}

// Forget drops every route to the loopback address (its process stopped).
func (n *Network) Forget(local string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, v := range n.routes {
		if v == local {
			delete(n.routes, k)
		}
	}
}

// Reaches tells whether host:port reaches a process here.
func (n *Network) Reaches(hostport string) bool {
	_, ok := n.route(hostport)
	return ok
}

func (n *Network) route(hostport string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	local, ok := n.routes[hostport]
	return local, ok
}

func (n *Network) serve(w http.ResponseWriter, r *http.Request) {
	hostport := r.Host
	if r.Method != http.MethodConnect {
		hostport = r.URL.Host
		if r.URL.Port() == "" {
			hostport = net.JoinHostPort(r.URL.Hostname(), "80")
		}
	}
	local, ok := n.route(hostport)
	if !ok {
		http.Error(w, fmt.Sprintf("no process on this machine serves %s (only Services of Deployments run here resolve)", hostport), http.StatusBadGateway)
		return
	}
	if r.Method == http.MethodConnect {
		n.tunnel(w, local)
		return
	}
	n.mu.Lock()
	observe := n.observe
	n.mu.Unlock()
	if observe != nil {
		observe(hostport, r)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", local
		pr.Out.Host = r.Host // the name the client asked for, as the server would see it
	}}
	proxy.ServeHTTP(w, r)
}

func (n *Network) tunnel(w http.ResponseWriter, local string) {
	upstream, err := net.DialTimeout("tcp", local, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	client, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(upstream, buf)
		closeWrite(upstream)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(client, upstream)
		closeWrite(client)
	}()
	wg.Wait()
	_ = errors.Join(client.Close(), upstream.Close())
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}
