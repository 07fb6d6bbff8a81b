// Package activator is the core of scale to zero
// (docs/contributor/scale-to-zero.md): it holds requests for a Function
// without a ready replica while the Function is woken, forwards them once a
// replica is ready, and tells from the replicas' own request counters when a
// Function has been idle long enough to be scaled to zero.
//
// Everything that talks to the API server is behind the small interfaces
// the Holder is built with; this package neither watches nor writes objects.
package activator
