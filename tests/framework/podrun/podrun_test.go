package podrun

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func deployment(mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "ctrl"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ServiceAccountName: "ctrl-sa",
			Containers: []corev1.Container{{
				Name:    "manager",
				Command: []string{"/function-controller"},
				Args:    []string{"--flag"},
				Env: []corev1.EnvVar{
					{Name: "APP_METRICS_ADDRESS", Value: ":8080"},
					{Name: "APP_HEALTHZ_ADDRESS", Value: "0.0.0.0:8090"},
					{Name: "OTHER_ADDRESS", Value: ":9999"}, // no such container port: left alone
					{Name: "APP_LOG_CONFIG_PATH", Value: "/appconfig/log-config.yaml"},
					{Name: "TMP", Value: "/tmp"},
					{Name: "NOT_A_MOUNT", Value: "/appconfigs/x"},
					{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "FROM_CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "log-config.yaml"}}},
				},
				Ports: []corev1.ContainerPort{{Name: "http-metrics", ContainerPort: 8080}, {Name: "health", ContainerPort: 8090}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "configuration", MountPath: "/appconfig"},
					{Name: "tmpdir", MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "configuration", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "tmpdir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		}}},
	}
	if mutate != nil {
		mutate(&d.Spec.Template.Spec)
	}
	return d
}

func settings(level string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "settings"},
		Data: map[string]string{"log-config.yaml": "logLevel: " + level + "\n"}}
}

func ports(seq ...int) func() (int, error) {
	return func() (int, error) { p := seq[0]; seq = seq[1:]; return p, nil }
}

func TestPrepareRunsTheContainerAsItsPodWould(t *testing.T) {
	dir := t.TempDir()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(deployment(nil), settings("info")).Build()
	p, err := Prepare(context.Background(), c, Spec{Namespace: "kyma-system", Deployment: "ctrl", BinDir: "/repo/bin", Dir: dir, FreePort: ports(40001, 40002)})
	require.NoError(t, err)

	assert.Equal(t, "/repo/bin/function-controller", p.Path)
	assert.Equal(t, []string{"--flag"}, p.Args)
	assert.Equal(t, "ctrl-sa", p.ServiceAccount)
	assert.Equal(t, "kyma-system", p.Namespace)
	assert.Equal(t, []string{
		"APP_METRICS_ADDRESS=127.0.0.1:40001",
		"APP_HEALTHZ_ADDRESS=127.0.0.1:40002",
		"OTHER_ADDRESS=:9999",
		"APP_LOG_CONFIG_PATH=" + filepath.Join(dir, "appconfig", "log-config.yaml"),
		"TMP=" + filepath.Join(dir, "tmp"),
		"NOT_A_MOUNT=/appconfigs/x",
		"NS=kyma-system",
		"FROM_CM=logLevel: info\n",
	}, p.Env)
	assert.Equal(t, map[string]string{"http-metrics": "127.0.0.1:40001", "health": "127.0.0.1:40002"}, p.Addresses)

	got, err := os.ReadFile(filepath.Join(dir, "appconfig", "log-config.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "logLevel: info\n", string(got))
	info, err := os.Stat(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	assert.True(t, info.IsDir())
}

func TestPrepareRefusesWhatCannotRunHere(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*corev1.PodSpec)
		objects []client.Object
		wantErr string
	}{
		{name: "no command", mutate: func(p *corev1.PodSpec) { p.Containers[0].Command = nil }, wantErr: "no command"},
		{name: "host path volume", mutate: func(p *corev1.PodSpec) {
			p.Volumes[1].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}
		}, wantErr: "only ConfigMap, Secret, emptyDir and hostPath-backed claim volumes"},
		{name: "unknown container", mutate: func(p *corev1.PodSpec) { p.Containers[0].Name = "other" }, wantErr: `no container "manager"`},
		{name: "missing ConfigMap", objects: []client.Object{}, wantErr: "reading ConfigMap kyma-system/settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := tt.objects
			if objs == nil {
				objs = []client.Object{settings("info")}
			}
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(append(objs, deployment(tt.mutate))...).Build()
			_, err := Prepare(context.Background(), c, Spec{Namespace: "kyma-system", Deployment: "ctrl", Container: "manager", Dir: t.TempDir(), FreePort: ports(1, 2)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// Sync follows the ConfigMap as kubelet does: a changed object swaps the
// ..data link at once, an unchanged one touches nothing, removed keys go.
func TestSyncFollowsTheConfigMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cm := settings("info")
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(deployment(nil), cm).Build()
	p, err := Prepare(ctx, c, Spec{Namespace: "kyma-system", Deployment: "ctrl", Dir: dir, FreePort: ports(1, 2)})
	require.NoError(t, err)
	mount := filepath.Join(dir, "appconfig")
	first, err := os.Readlink(filepath.Join(mount, "..data"))
	require.NoError(t, err)

	changed, err := p.Sync(ctx, c)
	require.NoError(t, err)
	assert.False(t, changed, "nothing changed")
	same, _ := os.Readlink(filepath.Join(mount, "..data"))
	assert.Equal(t, first, same)

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	cm.Data = map[string]string{"log-config.yaml": "logLevel: debug\n", "extra.yaml": "a: b\n"}
	require.NoError(t, c.Update(ctx, cm))
	changed, err = p.Sync(ctx, c)
	require.NoError(t, err)
	assert.True(t, changed)
	second, _ := os.Readlink(filepath.Join(mount, "..data"))
	assert.NotEqual(t, first, second)
	got, err := os.ReadFile(filepath.Join(mount, "log-config.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "logLevel: debug\n", string(got))
	_, err = os.Stat(filepath.Join(mount, first))
	assert.True(t, os.IsNotExist(err), "the previous generation is removed")

	cm.Data = map[string]string{"log-config.yaml": "logLevel: warn\n"}
	require.NoError(t, c.Update(ctx, cm))
	_, err = p.Sync(ctx, c)
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(mount, "extra.yaml"))
	assert.True(t, os.IsNotExist(err), "a key that left the ConfigMap leaves the volume")
	entries, err := os.ReadDir(mount)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Len(t, names, 3, "..data, one generation and log-config.yaml: %v", names)
}
