// Package runtimes holds the Function runtime servers of the local runtime
// images (nodejs/server.mjs for nodejs20/22/24, python/server.py for
// python312), written to docs/contributor/runtime-contract.md, and the tests
// that start them as processes and hold them to it. The Node.js
// server runs on Express, as Kyma's does (nodejs/package-lock.json, installed
// into the image by hack/cluster/localimage); the Python server uses the
// standard library only and rebuilds the Bottle request that Kyma's hands
// to a handler, as Bottle cannot be installed where the images are built.
package runtimes
