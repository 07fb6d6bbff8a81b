package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
)

// Environment of `function-controller fetch`, the build Job's init
// container (1.8.4's names, docs/contributor/upstream-contract.md#build-job;
// KNOWN_HOSTS and BASE_DIR are new and optional).
const (
	envRepositoryURL        = "APP_REPOSITORY_URL"
	envRepositoryCommit     = "APP_REPOSITORY_COMMIT"
	envMountPath            = "APP_MOUNT_PATH"
	envRepositoryAuthType   = "APP_REPOSITORY_AUTH_TYPE"
	envRepositoryUsername   = "APP_REPOSITORY_USERNAME"
	envRepositoryPassword   = "APP_REPOSITORY_PASSWORD"
	envRepositoryKey        = "APP_REPOSITORY_KEY"
	envRepositoryKnownHosts = "APP_REPOSITORY_KNOWN_HOSTS"
	envRepositoryBaseDir    = "APP_REPOSITORY_BASE_DIR"
)

// terminationLog is where Kubernetes takes a container's termination
// message from: the fetch error shows in the Pod status.
const terminationLog = "/dev/termination-log"

// runFetch is `function-controller fetch`: it writes the files of
// APP_REPOSITORY_COMMIT of APP_REPOSITORY_URL into APP_MOUNT_PATH (only
// APP_REPOSITORY_BASE_DIR when set) and exits 0, or prints the cause and exits
// 1 — also on authentication errors (1.8.4's fetcher exited 0 there, so its
// build failed later with an unrelated message). The error also goes to termLog
// when that file exists.
func runFetch(ctx context.Context, lookup func(string) (string, bool), stdout, stderr io.Writer, termLog string) int {
	opts, err := fetchOptions(lookup)
	if err == nil {
		if err = (git.Resolver{}).Fetch(ctx, opts); err != nil {
			err = fmt.Errorf("fetching commit %s of %s: %w", opts.Commit, opts.URL, err)
		}
	}
	if err != nil {
		return fail(stderr, "fetch", termLog, err)
	}
	fmt.Fprintf(stdout, "fetched commit %s of %s into %s\n", opts.Commit, opts.URL, opts.Dir)
	return 0
}

// fail reports the error of a build Job step on stderr and, when the file
// exists, as the container's termination message; it returns the exit code.
func fail(stderr io.Writer, step, termLog string, err error) int {
	msg := err.Error()
	fmt.Fprintln(stderr, "function-controller "+step+":", msg)
	if _, statErr := os.Stat(termLog); statErr == nil {
		_ = os.WriteFile(termLog, []byte(msg), 0o644)
	}
	return 1
}

func fetchOptions(lookup func(string) (string, bool)) (git.FetchOptions, error) {
	get := func(name string) string { v, _ := lookup(name); return v }
	o := git.FetchOptions{
		URL:     get(envRepositoryURL),
		Commit:  get(envRepositoryCommit),
		Dir:     get(envMountPath),
		BaseDir: get(envRepositoryBaseDir),
	}
	var missing []error
	for _, n := range []string{envRepositoryURL, envRepositoryCommit, envMountPath} {
		if get(n) == "" {
			missing = append(missing, fmt.Errorf("environment variable %s is not set", n))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return o, err
	}
	if t := get(envRepositoryAuthType); t != "" {
		o.Auth = &git.Auth{
			Type:       t,
			Username:   get(envRepositoryUsername),
			Password:   get(envRepositoryPassword),
			Key:        get(envRepositoryKey),
			KnownHosts: get(envRepositoryKnownHosts),
		}
	}
	return o, nil
}
