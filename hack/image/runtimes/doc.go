// Package runtimes holds the Function runtime servers of the local runtime
// images (nodejs/server.mjs for nodejs20/22/24, python/server.py for
// python312), written from Kyma's published runtime contract with each
// language's standard library only, and the tests that start them as
// processes and hold them to that contract.
package runtimes
