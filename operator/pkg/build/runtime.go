// Package build is the build Job of a Function without a Dockerfile
// interpreter: `function-controller build prepare` decides whether the
// Function's dependencies must be installed (their layer is kept in the
// Function registry under a key of what determines it), the dependency step
// installs them in the runtime image itself, and `function-controller build
// image` appends the dependency and source layers to the runtime base image,
// sets the configuration 1.8.4's Dockerfiles gave it and pushes the result.
// Images are data here (go-containerregistry): no daemon, no root.
package build

import "fmt"

// Runtime is where a runtime's Function lives in its image, as the chart's
// build Dockerfiles put it there (1.8.4's layout, which the runtime images'
// servers load from).
type Runtime struct {
	// Handler names the Function's code file, DependencyFile its
	// dependency list, in its sources.
	Handler, DependencyFile string
	// SourceDir is where the Function's sources go in the image.
	SourceDir string
	// DependencyDir is where the installed dependencies go in the image.
	DependencyDir string
	// DependencySubdir is the part of the dependency step's output that
	// becomes DependencyDir ("" for all of it).
	DependencySubdir string
	// WorkingDir of the image, "" to keep the base image's.
	WorkingDir string
	// Env is added to the base image's environment.
	Env []string
	// Install is the dependency step's shell command: it runs in the runtime
	// image with the sources in $SOURCES and writes into the current
	// directory, which starts empty.
	Install string
}

// User is the user the Function runs as (the Dockerfiles' `USER 1000`).
const User = "1000"

func nodejs() Runtime {
	return Runtime{
		Handler:          "handler.js",
		DependencyFile:   "package.json",
		SourceDir:        "/usr/src/app/function",
		DependencyDir:    "/usr/src/app/function/node_modules",
		DependencySubdir: "node_modules",
		// 1.8.4's Dockerfiles end in /usr/src/app: the base image's
		// `npm start` must find the runtime server's package.json, not the
		// Function's.
		WorkingDir: "/usr/src/app",
		// Release 1.13's servers load HANDLER_PATH (default ./handler.js,
		// beside server.mjs); 1.8.4's load ./function/handler.js.
		Env:     []string{"HANDLER_PATH=./function/handler.js"},
		Install: `cp "$SOURCES/package.json" . && npm install --omit=dev --no-audit --no-fund --no-update-notifier`,
	}
}

// Runtimes are the runtimes a Function can name.
func Runtimes() map[string]Runtime {
	return map[string]Runtime{
		"nodejs20": nodejs(),
		"nodejs22": nodejs(),
		"nodejs24": nodejs(),
		"python312": {
			Handler:        "handler.py",
			DependencyFile: "requirements.txt",
			SourceDir:      "/kubeless",
			// pip's target as the Dockerfile's `pip install` as root had it.
			DependencyDir: "/usr/local/lib/python3.12/site-packages",
			// Release 1.13's server.py imports the handler from FUNCTION_PATH
			// (default /); 1.8.4's kubeless.py defaulted to /kubeless.
			Env:     []string{"KUBELESS_INSTALL_VOLUME=/kubeless", "FUNCTION_PATH=/kubeless"},
			Install: `pip install --no-cache-dir --disable-pip-version-check --target . -r "$SOURCES/requirements.txt"`,
		},
	}
}

// RuntimeOf returns the layout of runtime.
func RuntimeOf(runtime string) (Runtime, error) {
	rt, ok := Runtimes()[runtime]
	if !ok {
		return Runtime{}, fmt.Errorf("unknown runtime %q", runtime)
	}
	return rt, nil
}
