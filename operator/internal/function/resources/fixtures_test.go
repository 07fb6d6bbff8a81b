package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

const (
	testUID  = "5b2c3bd6-2bd7-4e0a-9d0c-5b0bd1e1f2a3"
	testBase = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.8.4"
	testSrc  = "module.exports = { main: function (event, context) { return 'Hello World!' } }"
)

// newFunction is an inline Function as the dump's: namespace fn-test-1, own labels, no dependencies.
func newFunction(rt v1alpha2.Runtime, mutate ...func(*v1alpha2.Function)) *v1alpha2.Function {
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{
			Name: "hello", Namespace: "fn-test-1", UID: types.UID(testUID),
			Labels: map[string]string{"app": "hello"},
		},
		Spec: v1alpha2.FunctionSpec{
			Runtime: rt,
			Source:  v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: testSrc}},
		},
	}
	for _, m := range mutate {
		m(fn)
	}
	return fn
}

func gitFunction(mutate ...func(*v1alpha2.Function)) *v1alpha2.Function {
	return newFunction(v1alpha2.RuntimeNodejs22, append([]func(*v1alpha2.Function){func(fn *v1alpha2.Function) {
		fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
			URL:        "https://github.com/kyma-project/examples.git",
			Repository: v1alpha2.Repository{BaseDir: "/orders-service/function", Reference: "main"},
		}}
		fn.Status.Commit = "9f0c4e5a2b1d3c4e5f60718293a4b5c6d7e8f901"
		fn.Status.BaseDir = "/orders-service/function"
		fn.Status.Reference = "main"
	}}, mutate...)...)
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// testConfig is the chart's configuration as far as the builders read it.
func testConfig() *config.Config {
	return &config.Config{
		PublisherProxyAddress:                      "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish",
		ImageRegistryDefaultDockerConfigSecretName: "serverless-registry-config-default",
		PackageRegistryConfigSecretName:            "serverless-package-registry-config",
		ImagePullAccountName:                       "serverless-function",
		TargetCPUUtilizationPercentage:             50,
		Resources: config.ResourceConfig{
			Function: config.Presets{
				DefaultPreset: "L",
				Presets: map[string]config.Preset{"L": {
					RequestCPU: quantity("400m"), RequestMemory: quantity("512Mi"),
					LimitCPU: quantity("800m"), LimitMemory: quantity("1024Mi"),
				}},
			},
			BuildJob: config.Presets{
				DefaultPreset: "normal",
				Presets: map[string]config.Preset{"normal": {
					RequestCPU: quantity("500m"), RequestMemory: quantity("700Mi"),
					LimitCPU: quantity("1100m"), LimitMemory: quantity("1100Mi"),
				}},
			},
		},
		Build: config.BuildConfig{
			ExecutorArgs:     config.DefaultExecutorArgs(),
			RepoFetcherImage: "europe-docker.pkg.dev/kyma-project/prod/serverless-function-controller:0.1.0",
		},
	}
}

func inputs(fn *v1alpha2.Function) Inputs {
	return Inputs{
		Function:  fn,
		Config:    testConfig(),
		Registry:  Registry{PushAddress: "k3d-kyma-registry:5000", PullAddress: "k3d-kyma-registry:5000"},
		BaseImage: testBase,
	}
}

func envNames(env []corev1.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

func validateLabel(s string) []string { return validation.IsDNS1123Label(s) }
