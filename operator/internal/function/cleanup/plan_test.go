package cleanup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseRef(t *testing.T) {
	const push, pull = "serverless-docker-registry.kyma-system.svc.cluster.local:5000", "localhost:32137"
	tests := []struct {
		ref  string
		want Ref
		ok   bool
	}{
		{pull + "/ns-fn:abc@sha256:1", Ref{Repository: "ns-fn", Tag: "abc", Digest: "sha256:1"}, true},
		{push + "/ns-fn:abc", Ref{Repository: "ns-fn", Tag: "abc"}, true},
		{push + "/stand-in/function-runtime-nodejs22:local", Ref{Repository: "stand-in/function-runtime-nodejs22", Tag: "local"}, true},
		{pull + "/ns-fn@sha256:2", Ref{Repository: "ns-fn", Digest: "sha256:2"}, true},
		{pull + "/ns-fn", Ref{Repository: "ns-fn", Tag: "latest"}, true},
		{"europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:1.8.4", Ref{}, false},
		{"localhost:321370/ns-fn:abc", Ref{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, ok := ParseRef(tt.ref, push, pull)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Deployments of 1.8.4 pull its images through localhost at the NodePort
// it had; the Service is known by every name cluster DNS resolves.
func TestParseRefInternalAddresses(t *testing.T) {
	const push, pull = "serverless-docker-registry.kyma-system.svc.cluster.local:5000", "localhost:32137"
	addresses := InternalAddresses(push, pull)
	tests := []struct {
		ref  string
		want Ref
		ok   bool
	}{
		{"localhost:32137/fns-old:1a2b", Ref{Repository: "fns-old", Tag: "1a2b"}, true},
		{"localhost:30999/fns-old:1a2b", Ref{Repository: "fns-old", Tag: "1a2b"}, true},
		{"127.0.0.1:32137/fns-old:1a2b", Ref{Repository: "fns-old", Tag: "1a2b"}, true},
		{push + "/fns-old:1a2b", Ref{Repository: "fns-old", Tag: "1a2b"}, true},
		{"serverless-docker-registry.kyma-system.svc:5000/fns-old:1a2b", Ref{Repository: "fns-old", Tag: "1a2b"}, true},
		{"serverless-docker-registry.kyma-system:5000/fns-old@sha256:3", Ref{Repository: "fns-old", Digest: "sha256:3"}, true},
		{"localhost/fns-old:1a2b", Ref{}, false},
		{"localhost:port/fns-old:1a2b", Ref{}, false},
		{"localhost:32137", Ref{}, false},
		{"serverless-docker-registry.other-ns.svc:5000/fns-old:1a2b", Ref{}, false},
		{"docker.io/library/fns-old:1a2b", Ref{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, ok := ParseRef(tt.ref, addresses...)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPlan(t *testing.T) {
	const deps = "serverless-dependencies"
	img := func(repo, digest string, tags []string, layers ...string) Image {
		return Image{Repository: repo, Digest: digest, Tags: tags, Layers: layers}
	}
	current := img("ns-a", "sha256:a2", []string{"t2"}, "base", "depA", "srcA2")
	previous := img("ns-a", "sha256:a1", []string{"t1"}, "base", "depA", "srcA1")
	older := img("ns-a", "sha256:a0", []string{"t0"}, "base", "depOld", "srcA0")
	deletedFn := img("ns-gone", "sha256:g", []string{"t"}, "base", "depGone", "srcG")
	depA := img(deps, "sha256:dA", []string{"keyA"}, "depA")
	depOld := img(deps, "sha256:dO", []string{"keyO"}, "depOld")
	depGone := img(deps, "sha256:dG", []string{"keyG"}, "depGone")
	base := img("stand-in/runtime", "sha256:b", []string{"local"}, "base")
	kanikoCache := img("ns-a/cache", "sha256:k", []string{"x"}, "k")

	tests := []struct {
		name        string
		stored      []Image
		keep        []Ref
		wantKept    []Image
		wantDeleted []Image
	}{
		{
			name:     "current and previous image of a Function stay, the older one and a deleted Function's go",
			stored:   []Image{current, previous, older, deletedFn},
			keep:     []Ref{{Repository: "ns-a", Tag: "t2", Digest: "sha256:a2"}, {Repository: "ns-a", Tag: "t1"}},
			wantKept: []Image{current, previous}, wantDeleted: []Image{older, deletedFn},
		},
		{
			name:     "the digest decides over the tag",
			stored:   []Image{current, previous},
			keep:     []Ref{{Repository: "ns-a", Tag: "t1", Digest: "sha256:a2"}},
			wantKept: []Image{current}, wantDeleted: []Image{previous},
		},
		{
			name:     "a dependency layer stays while a kept image has it",
			stored:   []Image{current, older, depA, depOld, depGone},
			keep:     []Ref{{Repository: "ns-a", Tag: "t2"}},
			wantKept: []Image{current, depA}, wantDeleted: []Image{older, depOld, depGone},
		},
		{
			name:     "base images builds use and leftovers of other builders",
			stored:   []Image{base, kanikoCache},
			keep:     []Ref{{Repository: "stand-in/runtime", Tag: "local"}},
			wantKept: []Image{base}, wantDeleted: []Image{kanikoCache},
		},
		{name: "nothing stored", keep: []Ref{{Repository: "ns-a", Tag: "t2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, deleted := Plan(tt.stored, tt.keep, deps)
			assert.Equal(t, tt.wantKept, kept)
			assert.Equal(t, tt.wantDeleted, deleted)
		})
	}
}
