package registryagent

import (
	"testing"

	"github.com/stretchr/testify/assert"

	api "github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

func TestCountRepoFile(t *testing.T) {
	const rev = "sha256/" + "ab12"
	tests := []struct {
		rel      string
		wantRepo string
		want     api.Usage
	}{
		{"ns-a/_manifests/tags/1/current/link", "ns-a", api.Usage{TaggedImages: 1}},
		{"ns-a/_manifests/tags/1/index/" + rev + "/link", "ns-a", api.Usage{}},
		{"ns-a/_manifests/revisions/" + rev + "/link", "ns-a", api.Usage{Manifests: 1}},
		{"library/base/_manifests/tags/v1/current/link", "library/base", api.Usage{TaggedImages: 1}},
		{"ns-a/_layers/" + rev + "/link", "", api.Usage{}},
		{"ns-a/_uploads/uuid/data", "", api.Usage{}},
		{"_manifests/tags/1/current/link", "", api.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			repos := map[string]bool{}
			var u api.Usage
			countRepoFile(tt.rel, repos, &u)
			assert.Equal(t, tt.want, u)
			if tt.wantRepo == "" {
				assert.Empty(t, repos)
			} else {
				assert.Equal(t, map[string]bool{tt.wantRepo: true}, repos)
			}
		})
	}
}

func TestMeasureEmptyRoot(t *testing.T) {
	u, err := Measure(t.TempDir())
	assert.NoError(t, err)
	assert.Zero(t, u.UsedBytes)
	assert.Zero(t, u.Repositories)
	assert.Positive(t, u.TotalBytes)
}
