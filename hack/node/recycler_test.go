package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestScrub(t *testing.T) {
	// fill writes a claim's files into dir: nested, hidden, and a link to
	// a file outside the pool that must survive.
	fill := func(t *testing.T, dir, outside string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
		for _, f := range []string{"data", ".hidden", "..dots", "sub/deeper/x"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("the claim's"), 0o600))
		}
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	}
	tests := []struct {
		name    string
		dir     func(root, outside string) string
		wantErr string
		// emptied is the directory that must be empty afterwards; kept the
		// one whose files must all be there.
		emptied, kept func(root, outside string) string
	}{
		{name: "a volume of the pool is emptied, the directory stays",
			dir:     func(root, _ string) string { return filepath.Join(root, "pv-0") },
			emptied: func(root, _ string) string { return filepath.Join(root, "pv-0") }},
		{name: "an unclean path that names a volume of the pool",
			dir:     func(root, _ string) string { return root + "/x/../pv-0/" },
			emptied: func(root, _ string) string { return filepath.Join(root, "pv-0") }},
		{name: "the pool's root itself is refused",
			dir:     func(root, _ string) string { return root },
			wantErr: "not a directory directly below",
			kept:    func(root, _ string) string { return filepath.Join(root, "pv-0") }},
		{name: "a path outside the pool is refused",
			dir:     func(_, outside string) string { return outside },
			wantErr: "not a directory directly below",
			kept:    func(_, outside string) string { return outside }},
		{name: "a path that climbs out of the pool is refused",
			dir: func(root, outside string) string {
				return filepath.Join(root, "pv-0", "..", "..", filepath.Base(outside))
			},
			wantErr: "not a directory directly below",
			kept:    func(_, outside string) string { return outside }},
		{name: "a link in the pool to a directory elsewhere is refused",
			dir:     func(root, _ string) string { return filepath.Join(root, "pv-link") },
			wantErr: "not a directory",
			kept:    func(_, outside string) string { return outside }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "volumes"), filepath.Join(base, "elsewhere")
			require.NoError(t, os.MkdirAll(outside, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(outside, "precious"), []byte("not the pool's"), 0o600))
			fill(t, filepath.Join(root, "pv-0"), filepath.Join(outside, "precious"))
			require.NoError(t, os.Symlink(outside, filepath.Join(root, "pv-link")))

			err := scrub(root, tt.dir(root, outside))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			if tt.emptied != nil {
				entries, err := os.ReadDir(tt.emptied(root, outside))
				require.NoError(t, err)
				assert.Empty(t, entries)
			}
			if tt.kept != nil {
				entries, err := os.ReadDir(tt.kept(root, outside))
				require.NoError(t, err)
				assert.NotEmpty(t, entries)
			}
			data, err := os.ReadFile(filepath.Join(outside, "precious"))
			require.NoError(t, err, "a link's target outside the pool survives")
			assert.Equal(t, "not the pool's", string(data))
		})
	}

	t.Run("a volume whose directory is gone needs nothing", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, scrub(root, filepath.Join(root, "pv-9")))
	})
}

func TestRecycle(t *testing.T) {
	claim := &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data", UID: "1"}
	volume := func(name string, phase corev1.PersistentVolumePhase, path string, claim *corev1.ObjectReference) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{poolLabel: "static"}, ResourceVersion: "7"},
			Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef:                      claim,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
			},
			Status: corev1.PersistentVolumeStatus{Phase: phase},
		}
	}
	tests := []struct {
		name      string
		phase     corev1.PersistentVolumePhase
		outside   bool
		unclaimed bool
		wantErr   string
		wantFree  bool
		wantEmpty bool
	}{
		{name: "a released volume is scrubbed and handed back", phase: corev1.VolumeReleased, wantFree: true, wantEmpty: true},
		{name: "a bound volume is left alone", phase: corev1.VolumeBound},
		{name: "an available volume is left alone", phase: corev1.VolumeAvailable},
		{name: "a released volume already handed back is not scrubbed again", phase: corev1.VolumeReleased, unclaimed: true},
		{name: "a released volume outside the pool keeps its claim and files", phase: corev1.VolumeReleased, outside: true, wantErr: "refusing to scrub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "volumes")
			dir := filepath.Join(root, "pv-0")
			if tt.outside {
				dir = filepath.Join(base, "elsewhere")
			}
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "data"), []byte("the claim's"), 0o600))
			ref := claim.DeepCopy()
			if tt.unclaimed {
				ref = nil
			}
			pv := volume("local-pv-0", tt.phase, dir, ref)
			cs := fake.NewClientset(pv)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			require.NoError(t, indexer.Add(pv))
			var logged []string
			r := recycler{client: cs, lister: corelisters.NewPersistentVolumeLister(indexer), root: root,
				log: func(format string, _ ...any) { logged = append(logged, format) }}

			err := r.recycle(t.Context(), pv.Name)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			got, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), pv.Name, metav1.GetOptions{})
			require.NoError(t, err)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			if tt.wantFree {
				assert.Nil(t, got.Spec.ClaimRef)
				assert.Len(t, logged, 1)
			} else {
				assert.Equal(t, ref, got.Spec.ClaimRef)
				assert.Empty(t, logged)
			}
			assert.Equal(t, tt.wantEmpty, len(entries) == 0, "files left: %v", entries)
		})
	}
}
