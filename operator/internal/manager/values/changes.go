package values

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// Changes describes each value that differs between two effective
// configurations, e.g. "logLevel set from info to debug". An empty old value
// (first install) reports nothing.
func Changes(old, updated v1alpha1.EffectiveConfiguration) []string {
	if old == (v1alpha1.EffectiveConfiguration{}) {
		return nil
	}
	var out []string
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(updated)
	t := ov.Type()
	for i := range t.NumField() {
		a, b := ov.Field(i).String(), nv.Field(i).String()
		if a == b {
			continue
		}
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		out = append(out, fmt.Sprintf("%s set from %s to %s", name, quoteEmpty(a), quoteEmpty(b)))
	}
	return out
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
