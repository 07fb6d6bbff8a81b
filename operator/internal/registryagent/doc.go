// Package registryagent is the internal registry's sidecar (binary
// registry-agent, operator/cmd/registry-agent): it shares the registry Pod's
// data volume and tells, over HTTP, how full the registry is (GET /usage)
// and reclaims the space of deleted images (POST /gc) with distribution's
// own mark-and-sweep, which distribution offers only offline. The Function
// controller deletes manifests through the registry API and then asks for a
// GC. Its interface (env, port, endpoints, answers, client) is
// operator/pkg/registryagent; only this package links distribution's
// storage code, so only the agent's binary carries it.
//
// The sweep deletes every blob no tagged manifest references. A push that
// runs meanwhile may upload a blob before its manifest exists, and lose it:
// the caller guarantees that no push runs during a GC (the controller pauses
// builds). Pulls are not affected beyond images deleted on purpose.
//
// The endpoints but /healthz require HTTP basic auth with the registry's
// own credentials, read from the mounted Secret at every request (a new
// Secret takes effect without a restart).
package registryagent
