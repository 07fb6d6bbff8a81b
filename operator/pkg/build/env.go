package build

import (
	"errors"
	"fmt"
	"strconv"
)

// Environment of our build steps (`function-controller build prepare` and
// `build image`); the Job builder sets them, the steps read them.
const (
	EnvRuntime             = "APP_BUILD_RUNTIME"
	EnvBaseImage           = "APP_BUILD_BASE_IMAGE"
	EnvDestination         = "APP_BUILD_DESTINATION"
	EnvCacheRepository     = "APP_BUILD_CACHE_REPOSITORY"
	EnvSourceDir           = "APP_BUILD_SOURCE_DIR"
	EnvDependenciesDir     = "APP_BUILD_DEPENDENCIES_DIR"
	EnvStateDir            = "APP_BUILD_STATE_DIR"
	EnvPackageConfigDigest = "APP_BUILD_PACKAGE_CONFIG_DIGEST"
	EnvInsecure            = "APP_BUILD_INSECURE"
	EnvSkipTLSVerify       = "APP_BUILD_SKIP_TLS_VERIFY"
	EnvCache               = "APP_BUILD_CACHE"
	// EnvTerminationLog is the file of the container's termination
	// message (its terminationMessagePath; /dev/termination-log unset).
	EnvTerminationLog = "APP_BUILD_TERMINATION_LOG"
	// EnvDockerConfig is the directory of config.json with the registry
	// credentials, as Docker and go-containerregistry read it.
	EnvDockerConfig = "DOCKER_CONFIG"
)

// Default directories of the build Pod's volumes.
const (
	DefaultSourceDir       = "/workspace/src"
	DefaultDependenciesDir = "/deps"
	DefaultStateDir        = "/state"
)

// OptionsFromEnv reads the build's Options from the environment.
func OptionsFromEnv(lookup func(string) (string, bool)) (Options, error) {
	get := func(n, def string) string {
		if v, ok := lookup(n); ok && v != "" {
			return v
		}
		return def
	}
	var errs []error
	flag := func(n string, def bool) bool {
		v := get(n, strconv.FormatBool(def))
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a boolean", n, v))
		}
		return b
	}
	o := Options{
		Runtime:             get(EnvRuntime, ""),
		BaseImage:           get(EnvBaseImage, ""),
		Destination:         get(EnvDestination, ""),
		CacheRepository:     get(EnvCacheRepository, ""),
		SourceDir:           get(EnvSourceDir, DefaultSourceDir),
		DependenciesDir:     get(EnvDependenciesDir, DefaultDependenciesDir),
		StateDir:            get(EnvStateDir, DefaultStateDir),
		PackageConfigDigest: get(EnvPackageConfigDigest, ""),
		Insecure:            flag(EnvInsecure, false),
		SkipTLSVerify:       flag(EnvSkipTLSVerify, false),
		Cache:               flag(EnvCache, true),
	}
	for _, n := range []string{EnvRuntime, EnvBaseImage, EnvDestination, EnvCacheRepository} {
		if get(n, "") == "" {
			errs = append(errs, fmt.Errorf("environment variable %s is not set", n))
		}
	}
	if _, err := RuntimeOf(o.Runtime); o.Runtime != "" && err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvRuntime, err))
	}
	return o, errors.Join(errs...)
}
