package scaletozero

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Mesh mode (docs/contributor/scale-to-zero.md, Mesh Mode): the activator
// runs with Istio's sidecar, and reaches a Function's replicas at their Pod
// addresses with the Host of the Function's private Service, a headless
// Service of its Pods. Istio routes HTTP by the Host, and sends a request
// for a headless Service to the address it was dialled at, wrapped in the
// mesh's mutual TLS: the activator keeps choosing the replica, the sidecar
// adds the TLS.

// PrivateServiceSuffix ends the name of a Function's private Service.
const PrivateServiceSuffix = "-private"

// maxServiceName is the longest Service name (a DNS-1035 label).
const maxServiceName = 63

// PrivateServiceName names the private Service of the Function named
// function: <function>-private, or, where that is longer than a Service
// name may be, the name's first characters, a hash of the whole name and
// the suffix.
func PrivateServiceName(function string) string {
	if len(function)+len(PrivateServiceSuffix) <= maxServiceName {
		return function + PrivateServiceSuffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(function))
	hash := fmt.Sprintf("%08x", h.Sum32())
	prefix := strings.TrimRight(function[:maxServiceName-len(PrivateServiceSuffix)-len(hash)-1], "-")
	return prefix + "-" + hash + PrivateServiceSuffix
}

// MeshAuthority is the Host the activator sends to the replicas of the
// Function namespace/function in mesh mode: its private Service's name in
// its namespace, which Istio's sidecars route by in every namespace and
// cluster domain.
func MeshAuthority(namespace, function string) string {
	return PrivateServiceName(function) + "." + namespace
}
