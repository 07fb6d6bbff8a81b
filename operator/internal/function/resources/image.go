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
}

// ImageTag is the image tag: lowercase hex SHA-256 of the string 1.8.4
// hashes (contract §2.4), byte-for-byte, so its images are reused:
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

// PushImage is the reference kaniko pushes to (--destination).
func PushImage(in Inputs) string { return image(in.Registry.PushAddress, in) }

// PullImage is the reference the Deployment runs.
func PullImage(in Inputs) string { return image(in.Registry.PullAddress, in) }

func image(address string, in Inputs) string {
	return address + "/" + in.Function.Namespace + "-" + in.Function.Name + ":" + ImageTag(in)
}
