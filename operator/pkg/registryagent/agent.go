// Package registryagent is the internal registry's sidecar
// (`function-controller registry-agent`): it shares the registry Pod's data
// volume and tells, over HTTP, how full the registry is (GET /usage) and
// reclaims the space of deleted images (POST /gc) with distribution's own
// mark-and-sweep, which distribution offers only offline. The Function
// controller deletes manifests through the registry API and then asks for a
// GC; Client is how it calls.
//
// The sweep deletes every blob no tagged manifest references. A push that
// runs meanwhile may upload a blob before its manifest exists, and lose it:
// the caller guarantees that no push runs during a GC (the controller pauses
// builds). Pulls are not affected beyond images deleted on purpose.
//
// Both endpoints require HTTP basic auth with the registry's own
// credentials, read from the mounted Secret at every request (a new Secret
// takes effect without a restart).
package registryagent

import (
	"time"
)

// Environment of `function-controller registry-agent`.
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
