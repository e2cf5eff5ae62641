// Package config holds the manifests of config/ that pmx itself needs at run time: the sample
// Market resources (config/samples), built into the binary so that `pmx dev` has markets to show
// wherever it is started from. The folder stays what `kubectl apply -f config/samples/` takes.
package config

import (
	"embed"
	"io/fs"
)

//go:embed samples/*.yaml
var samples embed.FS

// Samples is config/samples as built into pmx: the sample Market manifests, at its top.
func Samples() fs.FS {
	sub, err := fs.Sub(samples, "samples")
	if err != nil {
		panic(err) // "samples" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}
