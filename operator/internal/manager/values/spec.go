package values

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// The CRD rejects what would break the Function controller, but a CR stored
// before this CRD (upstream's typed numbers as free strings and checked
// nothing) reaches the manager unchecked: these checks keep such a value
// out of the controller's configuration and name it in the condition.

// wholeNumber reads an int-or-string spec number: nil and "" give def, an
// integer or a string of decimal digits gives its value (as upstream's
// operator passed "50" on to the controller as 50), within 1..MaxInt32.
func wholeNumber(field string, v *intstr.IntOrString, def int32) (int32, error) {
	if v == nil || (v.Type == intstr.String && v.StrVal == "") {
		return def, nil
	}
	n := int64(v.IntVal)
	if v.Type == intstr.String {
		parsed, err := strconv.ParseInt(v.StrVal, 10, 64)
		if err != nil || v.StrVal[0] < '0' || v.StrVal[0] > '9' || (v.StrVal[0] == '0' && len(v.StrVal) > 1) {
			return 0, invalid(field, v.StrVal, "a whole number written in decimal digits without sign or leading zero")
		}
		n = parsed
	}
	if n < 1 || n > math.MaxInt32 {
		return 0, invalid(field, strconv.FormatInt(n, 10), "1 to 2147483647")
	}
	return int32(n), nil
}

// positiveDuration checks a Go duration the controller parses at start.
func positiveDuration(field, v string) error {
	if v == "" {
		return nil
	}
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		return invalid(field, v, "a Go duration above zero with a unit, e.g. 5m")
	}
	return nil
}

// oneOf checks a value the controller only accepts from a fixed list.
func oneOf(field, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return invalid(field, v, fmt.Sprintf("one of %v", allowed))
}

func invalid(field, v, want string) error {
	return &ConfigError{Reason: v1alpha1.ReasonConfigurationInvalid,
		Message: fmt.Sprintf("spec.%s is %q, it must be %s: the Function controller cannot work with it", field, v, want)}
}

// checkSpec runs the checks of the fields that are passed on as strings.
// The log fields are not among them: an unknown value gets the default and
// a warning (logSettings), as release 1.13's CRD took any string.
func checkSpec(spec v1alpha1.ServerlessSpec) error {
	for _, err := range []error{
		positiveDuration("functionRequeueDuration", spec.FunctionRequeueDuration),
		positiveDuration("healthzLivenessTimeout", spec.HealthzLivenessTimeout),
		oneOf("defaultBuildJobPreset", spec.DefaultBuildJobPreset, "local-dev", "slow", "normal", "fast"),
		oneOf("defaultRuntimePodPreset", spec.DefaultRuntimePodPreset, "XS", "S", "M", "L", "XL"),
		oneOf("scaleToZero.mesh", scaleToZeroMesh(spec), v1alpha1.MeshIstio),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}
