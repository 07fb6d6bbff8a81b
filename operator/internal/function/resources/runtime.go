package resources

import (
	"strings"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func isPython(rt v1alpha2.Runtime) bool { return strings.HasPrefix(string(rt), "python") }

// DockerfileConfigMapName is the runtime's Dockerfile ConfigMap (the copy in
// the Function's namespace), key DockerfileKey.
func DockerfileConfigMapName(rt v1alpha2.Runtime) string { return "dockerfile-" + string(rt) }

// DockerfileKey is the Dockerfile's key in that ConfigMap.
const DockerfileKey = "Dockerfile"
