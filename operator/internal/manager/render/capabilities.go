package render

import (
	"fmt"
	"path"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/discovery"
)

// DiscoverCapabilities asks the API server for its version and API versions,
// so that templates see the live cluster (.Capabilities) as `helm install`
// would. It costs a handful of discovery requests; call it once at start.
func DiscoverCapabilities(dc discovery.DiscoveryInterface) (*chartutil.Capabilities, error) {
	info, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the API server version: %w", err)
	}
	kubeVersion, err := chartutil.ParseKubeVersion(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing API server version %q: %w", info.GitVersion, err)
	}
	// Partial results are fine: an aggregated API that is down must not stop us.
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering API versions: %w", err)
	}
	seen := map[string]bool{}
	var versions chartutil.VersionSet
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			versions = append(versions, v)
		}
	}
	for _, g := range groups {
		for _, gv := range g.Versions {
			add(gv.GroupVersion)
		}
	}
	for _, list := range resources {
		for _, r := range list.APIResources {
			add(path.Join(list.GroupVersion, r.Kind))
		}
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	if len(versions) > 0 {
		caps.APIVersions = versions
	}
	return caps, nil
}
