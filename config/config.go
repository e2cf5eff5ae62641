// Package config holds the manifests of config/ that pmx's binaries need at run time: the sample
// Market resources (config/samples) and the sample Event (config/samples/events), built into pmx
// so that `pmx dev` has markets and an event to show wherever it is started from, and the CRDs (config/crd/bases), which `pmxtools bench --distributed`
// installs into the control plane it starts. The folders stay what `kubectl apply -f` takes.
package config

import (
	"embed"
	"io/fs"
)

//go:embed samples/*.yaml samples/events/*.yaml samples/series/*.yaml
var samples embed.FS

//go:embed crd/bases/*.yaml
var crds embed.FS

// Samples is config/samples as built into pmx: the sample Market manifests, at its top.
func Samples() fs.FS {
	sub, err := fs.Sub(samples, "samples")
	if err != nil {
		panic(err) // "samples" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}

// SampleEvents is config/samples/events as built into pmx: the sample Event manifests, at its top.
func SampleEvents() fs.FS {
	sub, err := fs.Sub(samples, "samples/events")
	if err != nil {
		panic(err) // a valid path: fs.Sub cannot fail on it
	}
	return sub
}

// SampleSeries is config/samples/series, the sample MarketSeries built into pmx, which pmx dev
// lists by default.
func SampleSeries() fs.FS {
	sub, err := fs.Sub(samples, "samples/series")
	if err != nil {
		panic(err) // a valid path: fs.Sub cannot fail on it
	}
	return sub
}

// CRDs is config/crd/bases as built into pmx: the CustomResourceDefinitions, at its top.
func CRDs() fs.FS {
	sub, err := fs.Sub(crds, "crd/bases")
	if err != nil {
		panic(err) // a valid path: fs.Sub cannot fail on it
	}
	return sub
}
