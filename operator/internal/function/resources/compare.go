package resources

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// coveredBy tells whether every field set in desired has the same value in
// live: maps may hold more keys in live, lists must have the same length and
// be covered element by element. It compares what this package sets against
// an object the API server has defaulted (probe timeouts, HTTP scheme,
// dnsPolicy, … are filled in live but unset in desired), so defaults never
// look like a change. Fields cleared in desired are not compared; use an
// exact comparison for those (env values, labels, annotations).
func coveredBy(desired, live any) bool {
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false
	}
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false
	}
	return covers(d, l)
}

func covers(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			if !covers(dv, l[k]) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !covers(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(desired, live)
	}
}

// cloneMap copies a map; nil stays nil.
func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
