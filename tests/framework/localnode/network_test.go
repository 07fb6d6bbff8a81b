package localnode

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNetworkRoutesServiceNames(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.Path)
	}))
	defer backend.Close()
	local := strings.TrimPrefix(backend.URL, "http://")

	n, err := StartNetwork()
	require.NoError(t, err)
	defer func() { assert.NoError(t, n.Close()) }()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "reg"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "reg"}, Ports: []corev1.ServicePort{
			{Port: 5000, TargetPort: intstr.FromString("http")},
			{Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Port: 9000, TargetPort: intstr.FromInt32(9999)}, // nothing listens for it here
		}}}
	assert.False(t, n.RouteService(svc, map[string]string{"app": "other"}, map[int32]string{8080: local}, nil), "selects another Pod")
	require.True(t, n.RouteService(svc, map[string]string{"app": "reg", "x": "y"}, map[int32]string{8080: local}, map[string]string{"http": local}))

	c := &http.Client{Transport: n.Transport()}
	get := func(url string) (int, string) {
		resp, err := c.Get(url)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	tests := []struct {
		url      string
		wantCode int
		wantBody string
	}{
		{"http://reg.kyma-system.svc.cluster.local:5000/v2/", 200, "host=reg.kyma-system.svc.cluster.local:5000 path=/v2/"},
		{"http://reg.kyma-system.svc/a", 200, "host=reg.kyma-system.svc path=/a"},
		{"http://reg.kyma-system:5000/b", 200, "host=reg.kyma-system:5000 path=/b"},
		{"http://reg.kyma-system.svc:9000/", 502, "no process on this machine serves reg.kyma-system.svc:9000"},
		{"http://reg.other.svc:5000/", 502, "no process on this machine serves reg.other.svc:5000"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			code, body := get(tt.url)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, body, tt.wantBody)
		})
	}

	t.Run("CONNECT tunnels to the process", func(t *testing.T) {
		conn, err := net.Dial("tcp", n.addr)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		fmt.Fprint(conn, "CONNECT reg.kyma-system.svc.cluster.local:5000 HTTP/1.1\r\nHost: reg.kyma-system.svc.cluster.local:5000\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		fmt.Fprint(conn, "GET /tunnelled HTTP/1.1\r\nHost: inside\r\nConnection: close\r\n\r\n")
		resp, err = http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "host=inside path=/tunnelled", string(body))
	})

	n.Forget(local)
	code, _ := get("http://reg.kyma-system.svc:5000/")
	assert.Equal(t, 502, code, "a stopped process is no longer reached")
	assert.False(t, n.Reaches("reg.kyma-system.svc:5000"))
}
