package podrun

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// registryPod is a container of an image that is not ours: no command, its
// config file mounted, its storage on a claim.
func registryPod(p *corev1.PodSpec) {
	p.Containers[0] = corev1.Container{
		Name:  "registry",
		Image: "europe-docker.pkg.dev/kyma-project/prod/external/library/registry:3.0.0",
		Args:  []string{"serve", "/etc/distribution/config.yml"},
		Env:   []corev1.EnvVar{{Name: "ROOT", Value: "/var/lib/registry"}},
		Ports: []corev1.ContainerPort{{Name: "http-registry", ContainerPort: 5000}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "configuration", MountPath: "/etc/distribution"},
			{Name: "data", MountPath: "/var/lib/registry/"},
		},
	}
	p.Volumes = append(p.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "storage"}}})
}

func claim(uid, phase, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "storage", UID: apitypes.UID("uid-" + uid)},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.PersistentVolumeClaimPhase(phase)},
	}
}

func hostPathVolume(path string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}}
}

func TestPrepareRunsAnImageThatIsNotOurs(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(deployment(registryPod), settings("info"),
		claim("a", "Bound", "pv-1"), hostPathVolume(host)).Build()
	images := map[string]Image{"registry": {
		Entrypoint: []string{"/assets/registry"},
		ListenEnv:  map[int32]string{5000: "REGISTRY_HTTP_ADDR", 5001: "REGISTRY_HTTP_DEBUG_ADDR"},
	}}
	p, err := Prepare(context.Background(), c, Spec{Namespace: "kyma-system", Deployment: "ctrl", Dir: dir, FreePort: ports(41000, 41001), Images: images})
	require.NoError(t, err)

	assert.Equal(t, "/assets/registry", p.Path)
	assert.Equal(t, []string{"serve", filepath.Join(dir, "etc", "distribution", "config.yml")}, p.Args, "a path argument inside a mount is local")
	assert.Equal(t, []string{"ROOT=" + host, "REGISTRY_HTTP_ADDR=127.0.0.1:41000", "REGISTRY_HTTP_DEBUG_ADDR=127.0.0.1:41001"}, p.Env,
		"the claim is its volume's host path; listen addresses from the config file are overridden")
	assert.Equal(t, map[string]string{"http-registry": "127.0.0.1:41000", "5001": "127.0.0.1:41001"}, p.Addresses)
	assert.Equal(t, map[int32]string{5000: "127.0.0.1:41000", 5001: "127.0.0.1:41001"}, p.Ports)
	assert.Equal(t, host, p.Mounts["/var/lib/registry/"])

	_, err = Prepare(context.Background(), c, Spec{Namespace: "kyma-system", Deployment: "ctrl", Dir: dir, FreePort: ports(1, 2)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the entrypoint of image europe-docker.pkg.dev/kyma-project/prod/external/library/registry:3.0.0 is not known here")
}

func TestClaimVolumes(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	mount := func(objs ...client.Object) (string, error) {
		c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
		return claimPath(ctx, c, "kyma-system", "storage")
	}
	_, err := mount(claim("a", "Pending", ""))
	require.ErrorIs(t, err, ErrClaimNotBound)

	got, err := mount(claim("a", "Bound", "pv-1"), hostPathVolume(host))
	require.NoError(t, err)
	assert.Equal(t, host, got)
	require.NoError(t, os.WriteFile(filepath.Join(host, "blob"), []byte("data"), 0o644))

	_, err = mount(claim("a", "Bound", "pv-1"), hostPathVolume(host))
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(host, "blob"), "the same claim keeps its data")

	_, err = mount(claim("b", "Bound", "pv-1"), hostPathVolume(host))
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(host, "blob"), "a volume handed to a new claim starts empty")

	_, err = mount(claim("b", "Bound", "pv-1"), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no host path")
}
