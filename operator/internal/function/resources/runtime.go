package resources

import (
	"strings"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// runtimeFiles are the build-context file names a runtime's Dockerfile expects.
type runtimeFiles struct {
	handler, dependencies, packageConfig string
	python                               bool
}

func filesOf(rt v1alpha2.Runtime) runtimeFiles {
	if isPython(rt) {
		return runtimeFiles{handler: "handler.py", dependencies: "requirements.txt", packageConfig: "pip.conf", python: true}
	}
	return runtimeFiles{handler: "handler.js", dependencies: "package.json", packageConfig: ".npmrc"}
}

func isPython(rt v1alpha2.Runtime) bool { return strings.HasPrefix(string(rt), "python") }

// DockerfileConfigMapName is the runtime's Dockerfile ConfigMap (the copy in
// the Function's namespace), key DockerfileKey.
func DockerfileConfigMapName(rt v1alpha2.Runtime) string { return "dockerfile-" + string(rt) }

// DockerfileKey is the Dockerfile's key in that ConfigMap.
const DockerfileKey = "Dockerfile"
