package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

// Inputs is everything a Function's children are derived from besides the
// Function: the controller configuration, the registry of its namespace and
// the runtime base image of its namespace's Dockerfile ConfigMap.
type Inputs struct {
	Function  *v1alpha2.Function
	Config    *config.Config
	Registry  Registry
	BaseImage string
	// PackageConfigDigest identifies the package registry configuration in
	// the Function's namespace ("" for none): part of the dependency key.
	PackageConfigDigest string
	// Digest is the built image's digest when its build reported one: the
	// Deployment then runs exactly that image. "" runs it by tag (images
	// built by 1.8.4 and simulated builds).
	Digest string
}

// ImageTag is the image tag: lowercase hex SHA-256 of the string 1.8.4 hashes
// (docs/contributor/upstream-contract.md#image-tag), byte-for-byte, so its
// images are reused:
//
//	inline: <uid>-{<source> <raw dependencies>}-<effective runtime>-<base image>
//	Git:    <uid>-<status.commit>-<status.baseDir>-<effective runtime>-<base image>
//
// The braces and the single space are Go's default formatting of the
// {source, dependencies} struct 1.8.4 hashes; dependencies are the raw spec
// text (not the "{}" written to the ConfigMap for blank Node dependencies).
// The base image is the Dockerfile's even when an override is set.
func ImageTag(in Inputs) string {
	fn := in.Function
	var b strings.Builder
	b.WriteString(string(fn.UID))
	b.WriteByte('-')
	if inline := fn.Spec.Source.Inline; inline != nil {
		b.WriteByte('{')
		b.WriteString(inline.Source)
		b.WriteByte(' ')
		b.WriteString(inline.Dependencies)
		b.WriteByte('}')
	} else {
		b.WriteString(fn.Status.Commit)
		b.WriteByte('-')
		b.WriteString(fn.Status.BaseDir)
	}
	b.WriteByte('-')
	b.WriteString(EffectiveRuntime(fn))
	b.WriteByte('-')
	b.WriteString(in.BaseImage)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// EffectiveRuntime is spec.runtimeImageOverride when set, else spec.runtime.
func EffectiveRuntime(fn *v1alpha2.Function) string {
	if fn.Spec.RuntimeImageOverride != "" {
		return fn.Spec.RuntimeImageOverride
	}
	return string(fn.Spec.Runtime)
}

// PushImage is the reference the build step pushes to.
func PushImage(in Inputs) string { return image(in.Registry.PushAddress, in) }

// PullImage is the reference of the built image in the Function registry,
// by tag.
func PullImage(in Inputs) string { return image(in.Registry.PullAddress, in) }

// RunImage is the reference the Deployment runs: PullImage, pinned to the
// digest when the build reported one (tag@digest: readable, and the digest
// decides what runs).
func RunImage(in Inputs) string {
	if in.Digest == "" {
		return PullImage(in)
	}
	return PullImage(in) + "@" + in.Digest
}

// BuiltForFunction reports whether ref is an image of the Function's
// repository in its registry (any build of it, by tag or digest).
func BuiltForFunction(ref string, in Inputs) bool {
	return strings.HasPrefix(ref, in.Registry.PullAddress+"/"+in.Function.Namespace+"-"+in.Function.Name+":")
}

// SameImage reports whether ref is image by tag, pinned to a digest or not.
func SameImage(ref, image string) bool {
	return ref == image || strings.HasPrefix(ref, image+"@")
}

// DigestOf is the digest a reference is pinned to ("" for none).
func DigestOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	return ""
}

func image(address string, in Inputs) string {
	return address + "/" + Repository(in.Function) + ":" + ImageTag(in)
}

// Repository is where a Function's images go, under the registry address:
// <namespace>-<name> (1.8.4's naming).
func Repository(fn *v1alpha2.Function) string { return fn.Namespace + "-" + fn.Name }
