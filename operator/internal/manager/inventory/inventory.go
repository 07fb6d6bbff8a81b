// Package inventory identifies rendered objects, digests them, and keeps the
// record of what the manager applied.
package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// ID names an object uniquely: "<group>/<kind>/<namespace>/<name>".
func ID(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	return strings.Join([]string{gvk.Group, gvk.Kind, u.GetNamespace(), u.GetName()}, "/")
}

// Ref is a parsed ID.
type Ref struct {
	GroupKind schema.GroupKind
	Namespace string
	Name      string
}

// ID is the ID of the object ref names.
func (r Ref) ID() string {
	return strings.Join([]string{r.GroupKind.Group, r.GroupKind.Kind, r.Namespace, r.Name}, "/")
}

// ParseID reverses ID; ok is false for a malformed ID.
func ParseID(id string) (ref Ref, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return Ref{}, false
	}
	return Ref{GroupKind: schema.GroupKind{Group: parts[0], Kind: parts[1]}, Namespace: parts[2], Name: parts[3]}, true
}

// Digest is a short, stable hash of the object's content. encoding/json sorts
// map keys, so equal objects always hash equally.
func Digest(u *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12]), nil
}

// Inventory is the set of applied objects by ID.
type Inventory map[string]v1alpha1.InventoryEntry

// FromEntries indexes status entries.
func FromEntries(entries []v1alpha1.InventoryEntry) Inventory {
	inv := make(Inventory, len(entries))
	for _, e := range entries {
		inv[e.ID] = e
	}
	return inv
}

// Entries lists the inventory sorted by ID, for a stable status.
func (inv Inventory) Entries() []v1alpha1.InventoryEntry {
	out := make([]v1alpha1.InventoryEntry, 0, len(inv))
	for _, e := range inv {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
