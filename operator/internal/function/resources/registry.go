package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the registry Secret the controller reads
// (docs/contributor/upstream-contract.md#registry-secret).
const (
	RegistryKeyIsInternal       = "isInternal"
	RegistryKeyPushAddress      = "pushRegAddr"
	RegistryKeyPullAddress      = "pullRegAddr"
	RegistryKeyAddress          = "registryAddress"
	RegistryKeyDockerConfigJSON = corev1.DockerConfigJsonKey
)

// Registry is where images are pushed (the build step's destination) and
// pulled from (Deployment image).
type Registry struct {
	PushAddress string
	PullAddress string
	Internal    bool
}

// RegistryFromSecret reads the registry addresses from the registry Secret
// (the copy in the Function's namespace). isInternal exactly "true" selects
// pushRegAddr/pullRegAddr, anything else registryAddress for both, as 1.8.4.
// A missing or empty address is an error naming the key: an image reference
// without a registry would be pushed elsewhere.
func RegistryFromSecret(s *corev1.Secret) (Registry, error) {
	if s == nil {
		return Registry{}, fmt.Errorf("registry secret is missing")
	}
	get := func(key string) (string, error) {
		v := string(s.Data[key])
		if v == "" {
			return "", fmt.Errorf("registry secret %s/%s: key %q is missing or empty", s.Namespace, s.Name, key)
		}
		return v, nil
	}
	if string(s.Data[RegistryKeyIsInternal]) == "true" {
		push, err := get(RegistryKeyPushAddress)
		if err != nil {
			return Registry{}, err
		}
		pull, err := get(RegistryKeyPullAddress)
		if err != nil {
			return Registry{}, err
		}
		return Registry{PushAddress: push, PullAddress: pull, Internal: true}, nil
	}
	addr, err := get(RegistryKeyAddress)
	if err != nil {
		return Registry{}, err
	}
	return Registry{PushAddress: addr, PullAddress: addr}, nil
}

// PackageConfigDigest identifies a package registry config Secret's content
// (every key and value, in key order) without revealing it.
func PackageConfigDigest(secret *corev1.Secret) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(secret.Data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(secret.Data[k]))
		h.Write(secret.Data[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
