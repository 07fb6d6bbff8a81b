// Package registryagent is the interface of the internal registry's
// sidecar, the registry agent (binary registry-agent, implemented in
// operator/internal/registryagent): its environment, port and endpoints,
// the answers of GET /usage and POST /gc, and Client, how the Function
// controller and the manager call it. It links none of the registry's
// storage code, so its callers stay small.
//
// Both endpoints require HTTP basic auth with the registry's own
// credentials; GET /healthz answers without.
package registryagent

import (
	"time"
)

// Environment of the registry-agent binary.
const (
	EnvAddress         = "APP_REGISTRY_AGENT_ADDRESS"
	EnvStorageRoot     = "APP_REGISTRY_AGENT_STORAGE_ROOT"
	EnvCredentialsDir  = "APP_REGISTRY_AGENT_CREDENTIALS_DIR"
	DefaultAddress     = ":5002"
	DefaultStorageRoot = "/var/lib/registry"
	// DefaultCredentialsDir holds UsernameFile and PasswordFile, the keys
	// username and password of the registry Secret as the registry's init
	// container mounts them.
	DefaultCredentialsDir = "/regcred"
	UsernameFile          = "username.txt"
	PasswordFile          = "password.txt"
)

// The agent's port on the registry Pod and Service (chart: registry.yaml).
const (
	Port     = 5002
	PortName = "http-agent"
)

// Endpoints. PathHealthz answers without credentials, for the probes.
const (
	PathUsage   = "/usage"
	PathGC      = "/gc"
	PathHealthz = "/healthz"
)

// Usage is the answer of GET /usage.
type Usage struct {
	// UsedBytes is the size of every file under the storage root.
	UsedBytes int64 `json:"usedBytes"`
	// TotalBytes and AvailableBytes are the volume's (statfs), available to
	// the registry's unprivileged user.
	TotalBytes     int64 `json:"totalBytes"`
	AvailableBytes int64 `json:"availableBytes"`
	// Repositories counts the repositories that hold a manifest,
	// TaggedImages their tags (repository:tag pairs).
	Repositories int `json:"repositories"`
	TaggedImages int `json:"taggedImages"`
	// Manifests counts stored manifest revisions, Blobs stored blobs
	// (layers, configs and manifests).
	Manifests int `json:"manifests"`
	Blobs     int `json:"blobs"`
}

// ErrorAnswer is the body of every answer other than 200 OK.
type ErrorAnswer struct {
	Error string `json:"error"`
}

// GCResult is the answer of POST /gc.
type GCResult struct {
	BlobsDeleted     int   `json:"blobsDeleted"`
	ManifestsDeleted int   `json:"manifestsDeleted"`
	BytesBefore      int64 `json:"bytesBefore"`
	BytesAfter       int64 `json:"bytesAfter"`
	DurationMillis   int64 `json:"durationMillis"`
}

// Duration is how long the GC took, measurements included.
func (r GCResult) Duration() time.Duration {
	return time.Duration(r.DurationMillis) * time.Millisecond
}
