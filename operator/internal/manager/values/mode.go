package values

import "github.com/kyma-project/serverless-manager/operator/api/v1alpha1"

// ModeFacts are what the Function mode depends on besides the spec.
type ModeFacts struct {
	// Annotation is the CR's serverless.kyma-project.io/buildless-mode value.
	Annotation string
	// InEffect is the mode the manager last installed (status.functionMode).
	InEffect string
	// TakenOver is the mode of the serverless-operator installation being
	// taken over; empty when there is none.
	TakenOver string
}

// FunctionMode decides how Functions run, the one place this is decided:
// the spec, else upstream's annotation with the meaning it had there, else
// the mode in effect (a CR that says nothing keeps what it has), else the
// mode of the installation being taken over, so that its Functions keep
// running as they do, else build.
func FunctionMode(spec string, f ModeFacts) string {
	switch {
	case spec != "":
		return spec
	case f.Annotation == "enabled":
		return v1alpha1.FunctionModeBuildless
	case f.Annotation == "disabled":
		return v1alpha1.FunctionModeBuild
	case f.InEffect != "":
		return f.InEffect
	case f.TakenOver != "":
		return f.TakenOver
	}
	return v1alpha1.FunctionModeBuild
}
