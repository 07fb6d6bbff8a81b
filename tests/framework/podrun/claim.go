package podrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimMarker, in a volume's root, names the claim the volume last served.
const claimMarker = ".podrun-claim"

// ErrClaimNotBound is returned while a Pod's claim waits for a volume: the
// Pod would not start yet either.
var ErrClaimNotBound = errors.New("claim not bound yet")

// claimPath is the host path of the volume bound to the claim, as kubelet
// mounts a hostPath PersistentVolume. The local cluster's pool hands a
// released volume back without scrubbing it (hack/cluster/stages.yaml,
// pv-reuse), so the first mount for a new claim empties it, as the Recycle
// reclaim policy would; the same claim keeps its data across restarts.
func claimPath(ctx context.Context, c client.Reader, namespace, claim string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: claim}, pvc); err != nil {
		return "", fmt.Errorf("reading PersistentVolumeClaim %s/%s: %w", namespace, claim, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("PersistentVolumeClaim %s/%s is %s: %w", namespace, claim, pvc.Status.Phase, ErrClaimNotBound)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", fmt.Errorf("reading PersistentVolume %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("PersistentVolume %s of claim %s/%s has no host path to mount here", pv.Name, namespace, claim)
	}
	dir := pv.Spec.HostPath.Path
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	marker := filepath.Join(dir, claimMarker)
	if last, err := os.ReadFile(marker); err == nil && string(last) == string(pvc.UID) {
		return dir, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return "", fmt.Errorf("scrubbing volume %s for claim %s/%s: %w", pv.Name, namespace, claim, err)
		}
	}
	return dir, os.WriteFile(marker, []byte(pvc.UID), 0o644)
}
