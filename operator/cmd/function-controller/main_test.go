package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func get(url string) (int, string) {
	resp, err := http.Get(url) //nolint:gosec // test URL
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The binary as the chart runs it: configured by APP_* and the log file,
// serving probes and metrics, reconciling Functions.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts an API server")
	}
	dir := t.TempDir()
	bin := compileBinary(t)

	t.Run("--help prints the environment and exits 0", func(t *testing.T) {
		out, err := exec.Command(bin, "--help").CombinedOutput()
		require.NoError(t, err)
		assert.Contains(t, string(out), "APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS")
	})
	t.Run("an unknown subcommand exits 2 without starting", func(t *testing.T) {
		cmd := exec.Command(bin, "registry-agent")
		cmd.Env = []string{"KUBECONFIG=/nonexistent"}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "output: %s", out)
		assert.Equal(t, 2, exit.ExitCode(), "output: %s", out)
		assert.Contains(t, string(out), `unknown subcommand "registry-agent"`)
	})

	te := testenv.Start(t, "charts/serverless/crds")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"env": {Server: te.Config.Host, CertificateAuthorityData: te.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"env": {ClientCertificateData: te.Config.CertData, ClientKeyData: te.Config.KeyData, Token: te.Config.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"env": {Cluster: "env", AuthInfo: "env"}},
		CurrentContext: "env",
	}, kubeconfig))
	logConfig := filepath.Join(dir, "log-config.yaml")
	require.NoError(t, os.WriteFile(logConfig, []byte("logLevel: info\nlogFormat: json\n"), 0o600))
	metrics, health := freeAddress(t), freeAddress(t)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "APP_LOG_CONFIG_PATH="+logConfig,
		"APP_METRICS_ADDRESS="+metrics, "APP_HEALTHZ_ADDRESS="+health, "APP_KUBERNETES_BASE_NAMESPACE=kyma-system")
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})

	t.Run("probes and metrics", func(t *testing.T) {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, path := range []string{"/healthz", "/healthz/", "/readyz", "/readyz/"} {
				code, body := get("http://" + health + path)
				assert.Equal(c, http.StatusOK, code, "%s: %s", path, body)
			}
		}, 30*time.Second, 100*time.Millisecond)
		// Controller metrics appear once the controllers have started.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body := get("http://" + metrics + "/metrics")
			assert.Equal(c, http.StatusOK, code)
			for _, m := range []string{"serverless_function_builds_started_total", "serverless_function_build_queue_length",
				"serverless_function_build_duration_seconds", `controller_runtime_reconcile_errors_total{controller="function"}`} {
				assert.True(c, strings.Contains(body, m), "metric %s", m)
			}
		}, 30*time.Second, 200*time.Millisecond)
	})

	t.Run("a Function without its namespace copies says so", func(t *testing.T) {
		scheme, err := app.NewScheme()
		require.NoError(t, err)
		c, err := client.New(te.Config, client.Options{Scheme: scheme})
		require.NoError(t, err)
		require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
		require.NoError(t, c.Create(context.Background(), &v1alpha2.Function{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "kyma-system"},
			Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22, Replicas: ptr.To[int32](1),
				Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = {}"}}},
		}))
		require.EventuallyWithT(t, func(col *assert.CollectT) {
			fn := &v1alpha2.Function{}
			require.NoError(col, c.Get(context.Background(), client.ObjectKey{Namespace: "kyma-system", Name: "hello"}, fn))
			if assert.NotEmpty(col, fn.Status.Conditions) {
				assert.Equal(col, v1alpha2.ReasonPrerequisitesMissing, fn.Status.Conditions[0].Reason)
				assert.Contains(col, fn.Status.Conditions[0].Message, fmt.Sprintf("registry Secret %s not found", module.RegistrySecretName))
			}
		}, 30*time.Second, 200*time.Millisecond)
	})
}
