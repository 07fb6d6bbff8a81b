// Package charts embeds the Serverless chart into the manager binary, so the
// manager needs no files at run time.
package charts

import (
	"embed"
	"io/fs"
)

//go:embed all:serverless
var files embed.FS

// Serverless returns the Serverless chart; its root holds Chart.yaml.
func Serverless() fs.FS {
	sub, err := fs.Sub(files, "serverless")
	if err != nil {
		// fs.Sub fails only for an invalid path, and this one is a constant.
		panic(err)
	}
	return sub
}
