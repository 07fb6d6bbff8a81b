// Package fips is the module's FIPS 140-3 mode (docs/contributor/fips.md).
//
// Every binary is built with Go's frozen FIPS 140-3 Cryptographic Module
// (GOFIPS140=v1.0.0). Kyma switches an installation to FIPS mode with the
// environment variable KYMA_FIPS_MODE_ENABLED=true (its runtime bootstrapper
// sets it on Pods annotated rt-cfg.kyma-project.io/set-fips-mode); in that
// mode a binary must run with GODEBUG=fips140=only, in which Go refuses
// every non-approved algorithm, and refuses to start without it.
package fips

import (
	"crypto/fips140"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

const (
	// EnvMode switches FIPS mode on: Kyma's name, which release 1.13's
	// operator reads too.
	EnvMode = "KYMA_FIPS_MODE_ENABLED"
	// EnvGODEBUG is Go's run-time settings variable.
	EnvGODEBUG = "GODEBUG"
	// GODEBUG is what the module's binaries run with in FIPS mode.
	GODEBUG = "fips140=only"
	// UpstreamGODEBUG is release 1.13's value for its own binaries. Its Git
	// init container (the function-buildless-init image) refuses to start
	// in FIPS mode unless GODEBUG holds both settings, so the buildless
	// Pods carry exactly this (docs/contributor/upstream-contract.md#fips-mode).
	UpstreamGODEBUG = "fips140=only,tlsmlkem=0"
	// UpstreamEnvMode is the variable 1.13's Git init container reads.
	UpstreamEnvMode = "APP_KYMA_FIPS_MODE_ENABLED"
	// Module is the GOFIPS140 version every binary is built with.
	Module = "v1.0.0"
)

// Requested reports whether the environment switches FIPS mode on. Unset
// or empty is off; anything strconv.ParseBool does not read is an error,
// so that a typo never runs an installation outside FIPS mode unnoticed.
func Requested(lookup func(string) (string, bool)) (bool, error) {
	v, ok := lookup(EnvMode)
	if !ok || strings.TrimSpace(v) == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false: %w", EnvMode, v, err)
	}
	return on, nil
}

// Check is nil unless FIPS mode is requested and enforced is false; the
// error names what is missing.
func Check(lookup func(string) (string, bool), enforced func() bool) error {
	on, err := Requested(lookup)
	if err != nil {
		return fmt.Errorf("FIPS mode: %w", err)
	}
	if !on || enforced() {
		return nil
	}
	godebug, _ := lookup(EnvGODEBUG)
	return fmt.Errorf("FIPS mode: %s=true, but Go does not enforce FIPS 140-3: %s=%s is missing (%s=%q); refusing to start",
		EnvMode, EnvGODEBUG, GODEBUG, EnvGODEBUG, godebug)
}

// RefuseUnlessEnforced is the first thing every main does: with FIPS mode
// requested but not enforced it writes one line to stderr and ends the
// process with status 1, before any connection is opened.
func RefuseUnlessEnforced(binary string) {
	if code := refuse(binary, os.LookupEnv, fips140.Enforced, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

func refuse(binary string, lookup func(string) (string, bool), enforced func() bool, stderr io.Writer) int {
	if err := Check(lookup, enforced); err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", binary, err)
		return 1
	}
	return 0
}
