package activator

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// TestClusterMeshMode runs the leader's rounds in mesh mode against a real
// API server and the stand-in for the activator's sidecar (mesh_test.go):
// a Function whose private Service lists its replica is scraped by that
// Service's Host and scaled to zero once idle; one without a private
// Service is refused by the replica's sidecar, kept running, and gets one
// ScrapeRefused event that names what mesh mode needs.
func TestClusterMeshMode(t *testing.T) {
	k := startCluster(t)
	ns := k.namespace(t, "mesh")
	window := map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "10s"}
	tests := []struct {
		name       string
		private    bool
		want       int32
		wantEvents int
	}{
		{name: "listed by its private Service: scraped, scaled to zero", private: true, want: 0},
		{name: "no private Service: refused, kept, a warning", private: false, want: 1, wantEvents: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "fn-" + strconv.Itoa(i)
			fn := client.ObjectKeyFromObject(k.caseFunction(t, ns, name, 1, ptr.To[int32](0), window))
			ip := "10.3.0." + strconv.Itoa(i+1)
			k.slice(t, ns, name+"-abcde", name, false, 8080, endpoint{ip: ip, uid: "pod-" + name})
			if tc.private {
				s := clusterSlice(ns, name+"-private-fghij", scaletozero.PrivateServiceName(name), name, true,
					endpoint{ip: ip, ready: ptr.To(true)})
				require.NoError(t, k.c.Create(context.Background(), s))
				eventually(t, "the cache has the private Service's slice", func() (bool, string) {
					err := k.cache.Get(context.Background(), client.ObjectKeyFromObject(s), &discoveryv1.EndpointSlice{})
					return err == nil, fmt.Sprint(err)
				})
			}

			metrics := &replicaMetrics{}
			side := newMeshSidecar(t, scaletozero.MeshAuthority(ns, name), metrics)
			// The API server admits no loopback endpoint: the replica's
			// address is made up, and dialled at the sidecar.
			hc := &http.Client{Transport: side.transport()}
			rec := &events{}
			s, err := NewScaleDowns(ScaleDowns{Cache: k.cache, Client: k.c, Log: testr.New(t), HTTP: hc,
				Kube: &Kube{Cache: k.cache, Client: k.c, Events: rec, Mesh: v1alpha1.MeshIstio}}, nil)
			require.NoError(t, err)
			start := time.Now()
			for r := 0; r <= 5; r++ {
				require.NoError(t, s.Round(context.Background(), start.Add(time.Duration(r)*2*time.Second)))
			}
			assert.Equal(t, tc.want, k.scale(t, fn))
			seen, refused := side.requests()
			if tc.private {
				require.NotEmpty(t, seen)
				for _, r := range seen {
					assert.Equal(t, seenRequest{host: name + "-private." + ns, path: "/metrics"}, r)
				}
				assert.Empty(t, refused)
				assert.Empty(t, rec.got)
				return
			}
			assert.Empty(t, seen)
			assert.NotEmpty(t, refused)
			require.Len(t, rec.got, tc.wantEvents, "events: %v", rec.got)
			assert.Equal(t, event{regarding: ns + "/" + name, kind: corev1.EventTypeWarning, reason: ReasonScrapeRefused,
				action: "Scrape", note: meshScrapeRefusedNote(fn, ip+":8080", sidecarCannot)}, rec.got[0])
			assert.Zero(t, counterValue(t, s.scaleDowns.WithLabelValues(scaleDownScaled)), "never scaled to zero")
		})
	}
}
