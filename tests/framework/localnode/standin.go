package localnode

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// PushStandIns puts a stand-in (framework.StandIn) in place of every runtime
// base image the module in namespace builds from whose registry is a
// Service routed here and which is not there yet, with the module's
// registry credentials. Runtime images cannot be pulled on these machines;
// pointing them at the internal registry (the manager's IMAGE_<KEY>
// overrides, as for a mirror) and filling it with stand-ins lets builds run
// for real. It returns the references pushed.
func (n *Node) PushStandIns(ctx context.Context, namespace string) ([]string, error) {
	var cms corev1.ConfigMapList
	if err := n.Client.List(ctx, &cms, client.InNamespace(namespace), client.MatchingLabels{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}); err != nil {
		return nil, fmt.Errorf("listing runtime ConfigMaps in %s: %w", namespace, err)
	}
	secret := &corev1.Secret{}
	if err := n.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: module.RegistrySecretName}, secret); err != nil {
		return nil, fmt.Errorf("reading the registry credentials: %w", err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(n.Network.Transport()),
		remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])})}
	var pushed []string
	for _, cm := range cms.Items {
		base, err := build.BaseImageOf(cm.Data["Dockerfile"])
		if err != nil {
			return pushed, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
		}
		ref, err := name.ParseReference(strings.TrimSpace(base), name.Insecure)
		if err != nil {
			return pushed, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
		}
		if !n.Network.Reaches(withPort(ref.Context().RegistryStr())) {
			continue
		}
		if _, err := remote.Head(ref, opts...); err == nil {
			continue
		}
		img, err := framework.StandIn(ref.Context().RepositoryStr())
		if err != nil {
			return pushed, err
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return pushed, fmt.Errorf("pushing a stand-in for %s: %w", ref, err)
		}
		pushed = append(pushed, ref.String())
	}
	return pushed, nil
}

func withPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(host, "80")
}
