package cleanup

import (
	"slices"
	"strings"
)

// Image is one manifest stored in the registry.
type Image struct {
	Repository string
	Digest     string
	Tags       []string
	// Layers are the digests of its layers.
	Layers []string
}

// Ref is an image a cluster object refers to, in the registry: by tag, by
// digest, or both (tag@digest, where the digest decides).
type Ref struct {
	Repository, Tag, Digest string
}

// anyPort in an address matches every port of its host.
const anyPort = "*"

// InternalAddresses are the addresses the internal registry is known by in
// image references: its push address (the Service) in every form cluster
// DNS resolves, its pull address, and localhost at any port — Deployments
// of 1.8.4, or of a NodePort since changed, pull through another
// NodePort. Keeping an image for a reference that was meant elsewhere
// costs its space; deleting one that runs breaks the Function.
func InternalAddresses(push, pull string) []string {
	out := []string{push, pull, "localhost:" + anyPort, "127.0.0.1:" + anyPort}
	host, port, ok := strings.Cut(push, ":")
	if short, found := strings.CutSuffix(host, ".svc.cluster.local"); ok && found {
		out = append(out, short+".svc:"+port, short+":"+port)
	}
	return out
}

// ParseRef reads a reference to an image of the registry known by any of
// addresses (push and pull address; host:* for any port of host); ok is
// false for other registries.
func ParseRef(ref string, addresses ...string) (Ref, bool) {
	for _, addr := range addresses {
		rest, found := cutAddress(ref, addr)
		if addr == "" || !found {
			continue
		}
		r := Ref{}
		rest, r.Digest, _ = strings.Cut(rest, "@")
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			rest, r.Tag = rest[:i], rest[i+1:]
		}
		r.Repository = rest
		if r.Tag == "" && r.Digest == "" {
			r.Tag = "latest"
		}
		return r, true
	}
	return Ref{}, false
}

func cutAddress(ref, addr string) (string, bool) {
	host, ok := strings.CutSuffix(addr, ":"+anyPort)
	if !ok {
		return strings.CutPrefix(ref, addr+"/")
	}
	rest, found := strings.CutPrefix(ref, host+":")
	if !found {
		return "", false
	}
	port, rest, found := strings.Cut(rest, "/")
	if !found || port == "" || strings.Trim(port, "0123456789") != "" {
		return "", false
	}
	return rest, true
}

func (r Ref) matches(img Image) bool {
	if r.Repository != img.Repository {
		return false
	}
	if r.Digest != "" {
		return r.Digest == img.Digest
	}
	return slices.Contains(img.Tags, r.Tag)
}

// Plan splits the stored images into those to keep and those to delete.
// An image is kept when a cluster object refers to it (keep). An image of
// the dependency repository holds one layer; it is kept while a kept image
// has that layer. Everything else goes: images of deleted Functions, images
// newer builds replaced, pushes of builds that ended otherwise, leftovers
// of other builders (1.8.4's kaniko cache).
func Plan(stored []Image, keep []Ref, dependencyRepository string) (kept, deleted []Image) {
	var deps []Image
	used := map[string]bool{}
	for _, img := range stored {
		if img.Repository == dependencyRepository {
			deps = append(deps, img)
			continue
		}
		if slices.ContainsFunc(keep, func(r Ref) bool { return r.matches(img) }) {
			kept = append(kept, img)
			for _, l := range img.Layers {
				used[l] = true
			}
		} else {
			deleted = append(deleted, img)
		}
	}
	for _, dep := range deps {
		if len(dep.Layers) > 0 && !slices.ContainsFunc(dep.Layers, func(l string) bool { return !used[l] }) {
			kept = append(kept, dep)
		} else {
			deleted = append(deleted, dep)
		}
	}
	return kept, deleted
}
