package copies

import (
	"bytes"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Op is the kind of write an Action makes.
type Op string

// Writes a pass can make.
const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	// OpRecreate deletes and creates a Secret copy whose type differs: the
	// type of a Secret cannot be changed.
	OpRecreate Op = "recreate"
	OpDelete   Op = "delete"
)

// Action is one write of a pass. Object is what is written: the desired
// copy (create, recreate), the live copy with the desired fields applied
// (update), or the live copy (delete). Live is the copy as cached, nil for a
// create.
type Action struct {
	Op     Op
	Object client.Object
	Live   client.Object
}

// Plan compares the desired copies of a namespace with the live ones (the
// copies the cache holds there) and returns the writes that make them equal,
// none when they are. Copies are matched by kind and name. A copy being
// deleted is left to go; it is created anew once it is gone.
func Plan(desired, live []client.Object) []Action {
	byKey := make(map[[2]string]client.Object, len(live))
	for _, l := range live {
		byKey[[2]string{kindOf(l), l.GetName()}] = l
	}
	var out []Action
	for _, d := range desired {
		k := [2]string{kindOf(d), d.GetName()}
		l, ok := byKey[k]
		delete(byKey, k)
		switch {
		case !ok:
			out = append(out, Action{Op: OpCreate, Object: d})
		case l.GetDeletionTimestamp() != nil:
			// Someone's finalizer holds it; its removal brings another pass.
		case mustRecreate(l, d):
			out = append(out, Action{Op: OpRecreate, Object: d, Live: l})
		default:
			if u, changed := update(l, d); changed {
				out = append(out, Action{Op: OpUpdate, Object: u, Live: l})
			}
		}
	}
	var gone []client.Object
	for _, l := range byKey {
		if l.GetDeletionTimestamp() == nil {
			gone = append(gone, l)
		}
	}
	sortObjects(gone)
	for _, l := range gone {
		out = append(out, Action{Op: OpDelete, Object: l, Live: l})
	}
	return out
}

// mustRecreate reports a Secret copy whose type differs from the base's.
func mustRecreate(live, desired client.Object) bool {
	l, ok1 := live.(*corev1.Secret)
	d, ok2 := desired.(*corev1.Secret)
	return ok1 && ok2 && l.Type != d.Type
}

// update returns a copy of live with the copied fields of desired, and true,
// when any of them differs; (nil, false) otherwise. Fields that are not
// copied (finalizers, a ServiceAccount's token secrets, …) are kept.
func update(live, desired client.Object) (client.Object, bool) {
	switch l := live.(type) {
	case *corev1.ConfigMap:
		d := desired.(*corev1.ConfigMap)
		if sameMeta(l, d) && sameStrings(l.Data, d.Data) && sameBytes(l.BinaryData, d.BinaryData) {
			return nil, false
		}
		out := l.DeepCopy()
		setMeta(out, d)
		out.Data, out.BinaryData = d.Data, d.BinaryData
		return out, true
	case *corev1.Secret:
		d := desired.(*corev1.Secret)
		if sameMeta(l, d) && sameBytes(l.Data, d.Data) && l.Type == d.Type {
			return nil, false
		}
		out := l.DeepCopy()
		setMeta(out, d)
		out.Data, out.Type = d.Data, d.Type
		return out, true
	case *corev1.ServiceAccount:
		d := desired.(*corev1.ServiceAccount)
		if sameMeta(l, d) && slices.Equal(l.ImagePullSecrets, d.ImagePullSecrets) &&
			ptr.Equal(l.AutomountServiceAccountToken, d.AutomountServiceAccountToken) {
			return nil, false
		}
		out := l.DeepCopy()
		setMeta(out, d)
		out.ImagePullSecrets, out.AutomountServiceAccountToken = d.ImagePullSecrets, d.AutomountServiceAccountToken
		return out, true
	}
	return nil, false
}

// sameMeta compares labels and annotations exactly: a copy carries the
// base's (plus managed-by) and nothing else, as 1.8.4's copies did.
func sameMeta(live, desired client.Object) bool {
	return sameStrings(live.GetLabels(), desired.GetLabels()) && sameStrings(live.GetAnnotations(), desired.GetAnnotations())
}

func setMeta(out, desired client.Object) {
	out.SetLabels(desired.GetLabels())
	out.SetAnnotations(desired.GetAnnotations())
}

// sameStrings treats nil and empty as equal (the API server drops empty maps).
func sameStrings(a, b map[string]string) bool { return maps.Equal(a, b) }

func sameBytes(a, b map[string][]byte) bool { return maps.EqualFunc(a, b, bytes.Equal) }
