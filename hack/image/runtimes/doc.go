// Package runtimes holds the Function runtime servers of the local runtime
// images (nodejs/server.mjs for nodejs20/22/24, python/server.py for
// python312), written to docs/contributor/runtime-contract.md with each
// language's standard library only, and the tests that start them as
// processes and hold them to it.
package runtimes
