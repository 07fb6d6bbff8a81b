package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// crPolicy names the install manifest's admission policy for the
// Serverless CR, and its binding.
const crPolicy = "serverless-cr-warnings"

// installCRPolicy creates the policy and its binding as the install
// manifest holds them (config/admission, part of config/default), and
// returns a client whose requests collect its warnings. The API server
// compiles a new policy asynchronously: the client is returned once the
// policy warns.
func installCRPolicy(t *testing.T, env *testenv.Env) (client.Client, *testenv.PolicyWarnings) {
	t.Helper()
	c := env.Client
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "config", "admission", "serverless-warnings.yaml"))
	require.NoError(t, err)
	objs, err := manifest.Decode(data)
	require.NoError(t, err)
	require.Len(t, objs, 2, "the policy and its binding")
	for _, o := range objs {
		require.NoError(t, c.Create(ctx, o), "%s %s", o.GetKind(), o.GetName())
	}
	collected := &testenv.PolicyWarnings{Policy: crPolicy}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = collected
	wc, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	require.NoError(t, err)
	probe := newCR("policy-probe", v1alpha1.ServerlessSpec{LogLevel: "probe"})
	eventually(t, 30*time.Second, "the policy to warn", func() (bool, string) {
		probe.ResourceVersion = ""
		if err := wc.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		got := collected.Take()
		return len(got) > 0, fmt.Sprintf("warnings: %q", got)
	})
	return wc, collected
}

// Release 1.13's "Configuring Logging" page changes the Function
// controller's logs with merge patches of the Serverless CR and names the
// levels dpanic, panic and fatal and the format console. Each patch, as the
// page writes it, is accepted; the API server warns where a value is not
// taken as written; and the log configuration the Function controller reads
// (the ConfigMap the manager applies, read with the controller's own
// reader), its Pod template's format, the status and the Configured
// condition are what the mapping says. Unknown values get the default and
// the state Warning, and the install goes on.
func TestLogSettingsOfRelease113(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	wc, collected := installCRPolicy(t, env)
	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	require.NoError(t, wc.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	assert.Empty(t, collected.Take(), "no warning about a CR without log settings")

	steps := []struct {
		name       string
		patch      string // as `kubectl patch serverless -n kyma-system default --type merge -p` takes it
		wantLevel  string
		wantFormat string
		// wantCause of the Configured condition (Configured: none).
		wantCause    string
		wantState    v1alpha1.State
		wantWarnings []string
	}{
		{"level, as 1.13's page changes it", `{"spec":{"logLevel":"debug"}}`, "debug", "json",
			v1alpha1.ReasonConfigured, v1alpha1.StateReady, nil},
		{"format, as 1.13's page changes it", `{"spec":{"logFormat":"console"}}`, "debug", "text",
			v1alpha1.ReasonConfigured, v1alpha1.StateReady, nil},
		{"both, as 1.13's page changes them", `{"spec":{"logLevel":"debug","logFormat":"console"}}`, "debug", "text",
			v1alpha1.ReasonConfigured, v1alpha1.StateReady, nil},
		{"dpanic", `{"spec":{"logLevel":"dpanic"}}`, "error", "text", v1alpha1.ReasonLogLevelMapped, v1alpha1.StateReady,
			[]string{`spec.logLevel "dpanic" is logged at error, the nearest level the Function controller has: error entries show as well; fatal shows fewer`}},
		{"panic", `{"spec":{"logLevel":"panic"}}`, "error", "text", v1alpha1.ReasonLogLevelMapped, v1alpha1.StateReady,
			[]string{values.MappedLogLevelMessage("panic")}},
		{"fatal", `{"spec":{"logLevel":"fatal"}}`, "fatal", "text", v1alpha1.ReasonConfigured, v1alpha1.StateReady, nil},
		{"unknown level", `{"spec":{"logLevel":"verbose"}}`, "info", "text", v1alpha1.ReasonLogSettingUnknown, v1alpha1.StateWarning,
			[]string{`spec.logLevel "verbose" is not a log level: the Function controller logs at info, the default; use debug, info, warn, error or fatal`}},
		{"unknown format too", `{"spec":{"logFormat":"XML"}}`, "info", "json", v1alpha1.ReasonLogSettingUnknown, v1alpha1.StateWarning,
			[]string{values.UnknownLogLevelMessage("verbose"),
				`spec.logFormat "XML" is not a log format: the Function controller logs json, the default; use json, or text (also called console)`}},
		{"back to the defaults", `{"spec":{"logLevel":null,"logFormat":null}}`, "info", "json", v1alpha1.ReasonConfigured, v1alpha1.StateReady, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			cr := &v1alpha1.Serverless{}
			cr.Namespace, cr.Name = ns, "default"
			require.NoError(t, wc.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(st.patch))), "the API server accepts %s", st.patch)
			if st.wantWarnings == nil {
				st.wantWarnings = []string{}
			}
			got := collected.Take()
			if got == nil {
				got = []string{}
			}
			assert.Equal(t, st.wantWarnings, got, "kubectl's warnings")

			var last *v1alpha1.Serverless
			eventually(t, 60*time.Second, fmt.Sprintf("the state %s with logLevel %s and logFormat %s", st.wantState, st.wantLevel, st.wantFormat), func() (bool, string) {
				last = getCR(t, c, "default")
				if last.Status.State == v1alpha1.StateProcessing {
					markChartAvailable(t, c)
				}
				return last.Status.ObservedGeneration == last.Generation && last.Status.State == st.wantState &&
					last.Status.LogLevel == st.wantLevel && last.Status.LogFormat == st.wantFormat, describe(last)
			})
			configured := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.ConditionConfigured)
			require.NotNil(t, configured)
			assert.Equal(t, metav1.ConditionTrue, configured.Status)
			assert.Equal(t, v1alpha1.ReasonConfigured, configured.Reason, "upstream's reason")
			assert.Equal(t, st.wantCause, v1alpha1.Cause(*configured), configured.Message)
			for _, w := range st.wantWarnings {
				assert.Contains(t, configured.Message, w, "the condition says what kubectl said")
			}

			// What the Function controller reads, with its own reader.
			cm := &corev1.ConfigMap{}
			require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-configuration"}, cm))
			file := filepath.Join(t.TempDir(), "log-config.yaml")
			require.NoError(t, os.WriteFile(file, []byte(cm.Data["log-config.yaml"]), 0o600))
			logCfg, err := config.ReadLogConfig(file)
			require.NoError(t, err, "the Function controller starts with %q", cm.Data["log-config.yaml"])
			assert.Equal(t, config.LogConfig{Level: st.wantLevel, Format: st.wantFormat}, logCfg)

			// A new format restarts the controller through its Pod template.
			d := &appsv1.Deployment{}
			require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-ctrl-mngr"}, d))
			assert.Equal(t, st.wantFormat, d.Spec.Template.Annotations["serverless.kyma-project.io/log-format"])
		})
	}

	// The spec keeps what was written: nothing is rewritten or lost.
	require.NoError(t, wc.Patch(ctx, &v1alpha1.Serverless{ObjectMeta: getCR(t, c, "default").ObjectMeta},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"logLevel":"Loud","logFormat":"console"}}`))))
	assert.Equal(t, []string{values.UnknownLogLevelMessage("Loud")}, collected.Take())
	cr := getCR(t, c, "default")
	assert.Equal(t, "Loud", cr.Spec.LogLevel)
	assert.Equal(t, "console", cr.Spec.LogFormat)
}
