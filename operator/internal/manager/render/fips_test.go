package render_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
)

// moduleImages name the images of the module's own binaries, which check
// FIPS mode at start; the registry and its init container are upstream's.
var moduleImages = []string{"/serverless-function-controller:", "/serverless-activator:", "/serverless-registry-agent:"}

func isModuleImage(image string) bool {
	for _, m := range moduleImages {
		if strings.Contains(image, m) {
			return true
		}
	}
	return false
}

// podContainers are the containers and init containers of every Pod
// template rendered.
func podContainers(t *testing.T, objs []*unstructured.Unstructured) []corev1.Container {
	t.Helper()
	var out []corev1.Container
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		spec := typed[appsv1.Deployment](t, o).Spec.Template.Spec
		out = append(append(out, spec.InitContainers...), spec.Containers...)
	}
	return out
}

// In FIPS mode every container of a module binary gets the switch and
// GODEBUG=fips140=only, without which it would refuse to start; nothing
// else gets them, and outside FIPS mode nothing does.
func TestFIPSModeRunsEveryModuleBinaryFIPSOnly(t *testing.T) {
	r := renderer(t)
	byName := map[string]variant{}
	for _, v := range variants() {
		byName[v.name] = v
	}
	for _, tc := range []struct {
		variant string
		fips    bool
		modules int
	}{
		{variant: "fips", fips: true, modules: 3},
		{variant: "fips-buildless", fips: true, modules: 2},
		{variant: "everything", fips: true, modules: 3},
		{variant: "internal-registry", modules: 3},
		{variant: "buildless", modules: 2},
		{variant: "default", modules: 2},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			v, ok := byName[tc.variant]
			require.True(t, ok)
			modules := 0
			for _, c := range podContainers(t, v.render(t, r)) {
				got := map[string]string{}
				for _, e := range c.Env {
					if e.Name == fips.EnvMode || e.Name == fips.EnvGODEBUG {
						got[e.Name] = e.Value
					}
				}
				if !isModuleImage(c.Image) {
					assert.Empty(t, got, "%s (%s) is not a module binary", c.Name, c.Image)
					continue
				}
				modules++
				if tc.fips {
					assert.Equal(t, map[string]string{fips.EnvMode: "true", fips.EnvGODEBUG: fips.GODEBUG}, got, c.Name)
				} else {
					assert.Empty(t, got, c.Name)
				}
			}
			assert.Equal(t, tc.modules, modules, "containers of module binaries")
		})
	}
}

// A 1.13 installation in FIPS mode runs its Functions on the images its
// operator's IMAGE_FUNCTION_RUNTIME_<RUNTIME>_FIPS name
// (docs/contributor/upstream-contract.md#fips-mode; no such variable: the
// chart's image). A manager in FIPS mode gives the Function controller the
// same references, so that every Function Deployment stays as it is; an
// IMAGE_ override still wins.
func TestFIPSModeKeeps113sFIPSRuntimeImages(t *testing.T) {
	const prod, restricted = "europe-docker.pkg.dev/kyma-project/prod/", "europe-docker.pkg.dev/kyma-project/restricted-prod/"
	r := renderer(t)
	for _, tc := range []struct {
		name      string
		fips      bool
		overrides map[string]string
		want      map[v1alpha2.Runtime]string
	}{
		{name: "FIPS mode: 1.13's FIPS images", fips: true, want: map[v1alpha2.Runtime]string{
			v1alpha2.RuntimeNodejs20:  prod + "function-runtime-nodejs20:1.13.0",
			v1alpha2.RuntimeNodejs22:  restricted + "function-runtime-nodejs22-fips:1.13.0",
			v1alpha2.RuntimeNodejs24:  restricted + "function-runtime-nodejs24-fips:1.13.0",
			v1alpha2.RuntimePython312: prod + "function-runtime-python312:1.13.0",
		}},
		{name: "not FIPS mode: 1.13's images", want: map[v1alpha2.Runtime]string{
			v1alpha2.RuntimeNodejs20:  prod + "function-runtime-nodejs20:1.13.0",
			v1alpha2.RuntimeNodejs22:  prod + "function-runtime-nodejs22:1.13.0",
			v1alpha2.RuntimeNodejs24:  prod + "function-runtime-nodejs24:1.13.0",
			v1alpha2.RuntimePython312: prod + "function-runtime-python312:1.13.0",
		}},
		{name: "FIPS mode with a mirror", fips: true, overrides: map[string]string{"function_runtime_nodejs24": "mirror.example/node24-fips:1"},
			want: map[v1alpha2.Runtime]string{
				v1alpha2.RuntimeNodejs22: restricted + "function-runtime-nodejs22-fips:1.13.0",
				v1alpha2.RuntimeNodejs24: "mirror.example/node24-fips:1",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := variant{spec: v1alpha1.ServerlessSpec{FunctionMode: v1alpha1.FunctionModeBuildless},
				facts: values.Facts{Nodes: 3, FIPSMode: tc.fips, ImageOverrides: tc.overrides}}
			objs := v.render(t, r)
			e := env(find(t, objs, "Deployment", "serverless-ctrl-mngr"))
			for rt, want := range tc.want {
				assert.Equal(t, want, e[config.EnvRuntimeImage(rt)], rt)
			}
			assert.Equal(t, prod+"function-buildless-init:1.13.0", e[config.EnvBuildlessInitImage],
				"1.13's FIPS init image is its init image")
		})
	}
}
