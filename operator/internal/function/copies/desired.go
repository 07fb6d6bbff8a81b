package copies

import (
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Bases are the base objects of the base namespace that Function namespaces
// get copies of. Objects being deleted are left out: their copies go with them.
type Bases struct {
	// ConfigMaps labelled config=runtime (the runtime Dockerfiles).
	ConfigMaps []corev1.ConfigMap
	// Secret is the registry Secret (base name and label config=credentials);
	// nil when there is none.
	Secret *corev1.Secret
	// ServiceAccounts labelled config=service-account.
	ServiceAccounts []corev1.ServiceAccount
}

// Desired returns the copies of all bases for namespace, sorted by kind and
// name. They carry exactly 1.8.4's copied fields
// (docs/contributor/upstream-contract.md#per-namespace-copies): name, labels
// plus managed-by=function-controller (the label the controller's cache selects
// copies by), annotations, and the kind's content.
func Desired(b Bases, namespace string) []client.Object {
	var out []client.Object
	for i := range b.ConfigMaps {
		out = append(out, copyConfigMap(&b.ConfigMaps[i], namespace))
	}
	if b.Secret != nil {
		out = append(out, copySecret(b.Secret, namespace))
	}
	for i := range b.ServiceAccounts {
		out = append(out, copyServiceAccount(&b.ServiceAccounts[i], namespace))
	}
	sortObjects(out)
	return out
}

// sortObjects orders by kind, then name: a stable order keeps the writes of
// a pass predictable.
func sortObjects(objs []client.Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		ki, kj := kindOf(objs[i]), kindOf(objs[j])
		if ki != kj {
			return ki < kj
		}
		return objs[i].GetName() < objs[j].GetName()
	})
}

func copyMeta(base metav1.Object, namespace string) metav1.ObjectMeta {
	labels := maps.Clone(base.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha2.LabelManagedBy] = v1alpha2.ManagedByController
	return metav1.ObjectMeta{
		Name:        base.GetName(),
		Namespace:   namespace,
		Labels:      labels,
		Annotations: maps.Clone(base.GetAnnotations()),
	}
}

func copyConfigMap(base *corev1.ConfigMap, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: copyMeta(base, namespace),
		Data:       maps.Clone(base.Data),
		BinaryData: cloneBytes(base.BinaryData),
	}
}

func copySecret(base *corev1.Secret, namespace string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: copyMeta(base, namespace),
		Data:       cloneBytes(base.Data),
		Type:       base.Type,
	}
}

func copyServiceAccount(base *corev1.ServiceAccount, namespace string) *corev1.ServiceAccount {
	var automount *bool
	if base.AutomountServiceAccountToken != nil {
		v := *base.AutomountServiceAccountToken
		automount = &v
	}
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   copyMeta(base, namespace),
		ImagePullSecrets:             append([]corev1.LocalObjectReference(nil), base.ImagePullSecrets...),
		AutomountServiceAccountToken: automount,
	}
}

func cloneBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// kindOf names the kind of a copy (or base); "" for other types.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Secret:
		return "Secret"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	}
	return ""
}

// configValue is the value of the config label each kind's bases and copies
// carry (the registry Secret is further selected by name).
func configValue(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return v1alpha2.ConfigRuntime
	case *corev1.Secret:
		return v1alpha2.ConfigCredentials
	case *corev1.ServiceAccount:
		return v1alpha2.ConfigServiceAccount
	}
	return ""
}

// IsCopy tells a per-namespace copy from everything else the controller
// caches: copies carry managed-by=function-controller and their kind's
// config label; a Function's own children (which carry the Function's
// labels, whatever they are) are excluded by their function-name label and
// owner reference.
func IsCopy(obj client.Object) bool {
	l := obj.GetLabels()
	want := configValue(obj)
	return want != "" &&
		l[v1alpha2.LabelManagedBy] == v1alpha2.ManagedByController &&
		l[v1alpha2.LabelConfig] == want &&
		l[v1alpha2.LabelFunctionName] == "" &&
		len(obj.GetOwnerReferences()) == 0
}

// isTakenOver tells a copy its user took over: the kind's config label and
// managed-by=user.
func isTakenOver(obj client.Object) bool {
	l := obj.GetLabels()
	want := configValue(obj)
	return want != "" && l[v1alpha2.LabelManagedBy] == v1alpha2.ManagedByUser && l[v1alpha2.LabelConfig] == want
}
