// Package localimage builds the images the local cluster's real node runs
// besides the module's own (hack/image builds those): the node's sandbox
// (pause) and a busybox, and local stand-ins for the chart's images that no
// registry reachable here serves: the Function runtimes (with a runtime
// server of our own, hack/image/runtimes), the registry (distribution,
// built from its module), registry-init and buildless-init. Like the
// module's images they are data (go-containerregistry), built without a
// container engine from what this machine has or can download from the
// package registries it reaches.
//
// The node's registry holds them under local/<name>:local; the manager gets
// the runtime, registry and init images through the chart's image keys
// (ManagerEnv), the node the rest by name (Ref).
package localimage

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// PublishedRegistry is the host of Kyma's published images, which the local
// node mirrors to its own registry: the module's images are built here
// under their published names.
const PublishedRegistry = "europe-docker.pkg.dev"

// Names of the local images.
const (
	Pause         = "pause"
	Busybox       = "busybox"
	Registry      = "registry"
	RegistryInit  = "registry-init"
	BuildlessInit = "function-buildless-init"
	// Runtime images are named after their runtime: RuntimeImage(runtime).
	runtimePrefix = "function-runtime-"
)

// tag of every local image: the node pulls an image whose tag it has
// cached only when `hack/node load` removed it after a change.
const tag = "local"

// repositoryPrefix keeps the local images apart from the mirrored ones in
// the node's registry.
const repositoryPrefix = "local/"

// Ref is the reference of the local image name in the registry (host:port).
func Ref(registry, name string) string {
	return registry + "/" + Repository(name) + ":" + tag
}

// Repository is the path of the local image name in any registry.
func Repository(name string) string { return repositoryPrefix + name }

// IsLocal says whether a repository path (without host) is a local image's.
func IsLocal(repository string) bool { return strings.HasPrefix(repository, repositoryPrefix) }

// RuntimeImage is the name of a runtime's local image (nodejs22 →
// function-runtime-nodejs22), as the chart's image key names it.
func RuntimeImage(runtime string) string { return runtimePrefix + runtime }

// chartKeys maps the chart's image keys (charts/serverless/values.yaml
// global.images) to the local images that stand in for them.
func chartKeys() map[string]string {
	keys := map[string]string{
		"registry":                Registry,
		"registry_init":           RegistryInit,
		"function_buildless_init": BuildlessInit,
	}
	for _, rt := range Runtimes() {
		keys["function_runtime_"+rt.Name] = RuntimeImage(rt.Name)
	}
	return keys
}

// ManagerEnv is the manager's environment that points the chart's image
// keys at the local images in registry: IMAGE_<KEY>=<reference>.
func ManagerEnv(registry string) []string {
	var env []string
	for key, name := range chartKeys() {
		env = append(env, "IMAGE_"+strings.ToUpper(key)+"="+Ref(registry, name))
	}
	sort.Strings(env)
	return env
}

// LayoutRef is the name a local image's OCI layout gives it (hack/image):
// its repository path and tag, no registry.
func LayoutRef(name string) string { return Repository(name) + ":" + tag }

// NodeRef is where an image built here goes in the node's registry
// (host:port): a published image's repository path there (the node mirrors
// PublishedRegistry to it), a local image's own; local says which.
func NodeRef(registry, layoutRef string) (target string, local bool, err error) {
	ref, err := name.ParseReference(layoutRef)
	if err != nil {
		return "", false, err
	}
	repository := ref.Context().RepositoryStr()
	// a name without a host parses as Docker Hub's
	local = ref.Context().RegistryStr() == name.DefaultRegistry && IsLocal(repository)
	if !local && ref.Context().RegistryStr() != PublishedRegistry {
		return "", false, fmt.Errorf("%s is neither a local image nor one of %s, which the node mirrors", layoutRef, PublishedRegistry)
	}
	return registry + "/" + repository + ":" + ref.Identifier(), local, nil
}
