package scope

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
)

// Client is c reading the module's namespaced kinds from s and everything
// else as c does (the manager's cache); writes go to c.
func Client(c client.Client, s *Scope) client.Client {
	return routed{Client: c, scope: s, namespaced: namespacedKinds()}
}

type routed struct {
	client.Client
	scope      *Scope
	namespaced map[schema.GroupKind]bool
}

func (r routed) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.inScope(obj) {
		return r.scope.Get(ctx, key, obj, opts...)
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

func (r routed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if r.inScope(list) {
		return r.scope.List(ctx, list, opts...)
	}
	return r.Client.List(ctx, list, opts...)
}

// inScope tells whether obj (or a list of) is of a namespaced managed kind.
func (r routed) inScope(obj runtime.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return false
	}
	gk := gvk.GroupKind()
	if meta.IsListType(obj) {
		gk.Kind = strings.TrimSuffix(gk.Kind, "List")
	}
	return r.namespaced[gk]
}

func namespacedKinds() map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, k := range kinds.Managed() {
		if k.Namespaced {
			out[k.GVK.GroupKind()] = true
		}
	}
	return out
}
