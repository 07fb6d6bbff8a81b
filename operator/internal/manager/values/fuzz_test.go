package values

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// FuzzBuild: whatever the spec holds, Build does not panic, and every string
// the user gave reaches the values byte for byte (no parsing on the way).
func FuzzBuild(f *testing.F) {
	f.Add("--insecure,--cache=true", "5m", "10s", "debug", "json", "L", "fast", int32(50), "5", "http://a/b", true, "sec", 3)
	f.Add("--a=1,2,3", "1h", "", "", "", "", "", int32(0), "-1", "", false, "", 0)
	f.Add("", "", "", "info", "text", "XS", "slow", int32(100), "1000", "https://x:1/y?z=1,2", true, "", 2)
	f.Fuzz(func(t *testing.T, args, requeue, liveness, level, format, podPreset, buildPreset string, cpu int32, jobs string, endpoint string, internal bool, secretName string, nodes int) {
		for _, s := range []string{jobs, args, requeue, liveness, level, format, podPreset, buildPreset, endpoint, secretName} {
			if !utf8.ValidString(s) {
				t.Skip("the API server only carries valid UTF-8")
			}
		}
		spec := v1alpha1.ServerlessSpec{
			FunctionBuildExecutorArgs:        args,
			FunctionRequeueDuration:          requeue,
			HealthzLivenessTimeout:           liveness,
			LogLevel:                         level,
			LogFormat:                        format,
			DefaultRuntimePodPreset:          podPreset,
			DefaultBuildJobPreset:            buildPreset,
			TargetCPUUtilizationPercentage:   ptr.To(intstr.FromInt32(cpu)),
			FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromString(jobs)),
			Eventing:                         &v1alpha1.Endpoint{Endpoint: endpoint},
			DockerRegistry:                   &v1alpha1.DockerRegistry{EnableInternal: ptr.To(internal), SecretName: ptr.To(secretName)},
		}
		facts := Facts{Namespace: "kyma-system", Nodes: nodes, NewSecret: counter(),
			RegistrySecret: map[string][]byte{"username": []byte(args), "password": []byte(endpoint), "serverAddress": []byte("s"), "registryAddress": []byte("r")}}
		res, err := Build(spec, facts)
		if err != nil {
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			return
		}
		m, err := res.Values.Map()
		require.NoError(t, err)
		data, err := json.Marshal(m)
		require.NoError(t, err)
		var back Values
		require.NoError(t, json.Unmarshal(data, &back))
		assert.Equal(t, res.Values, back, "values survive the trip to the engine")
		c := back.Controller.Configuration
		if args != "" {
			assert.Equal(t, args, c.FunctionBuildExecutorArgs)
		}
		assert.Equal(t, endpoint, c.FunctionPublisherProxyAddress)
		assert.Equal(t, cpu, c.TargetCPUUtilizationPercentage)
		assert.Equal(t, jobs, strconv.Itoa(int(c.FunctionBuildMaxSimultaneousJobs)), "a number given as text arrives as that number")
	})
}
