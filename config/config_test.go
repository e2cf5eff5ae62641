package config

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

// TestSamplesBuiltIn checks that the samples built into pmx are config/samples as it is on disk,
// all of it, so that pmx dev loads the same markets from anywhere.
func TestSamplesBuiltIn(t *testing.T) {
	builtIn, err := v1alpha1.LoadMarketsFS(Samples(), "built in")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := v1alpha1.LoadMarkets("samples")
	if err != nil {
		t.Fatal(err)
	}
	if len(builtIn) == 0 || !reflect.DeepEqual(builtIn, onDisk) {
		t.Fatalf("built in: %d markets %v; on disk: %d", len(builtIn), builtIn, len(onDisk))
	}
}

// TestSampleEventsBuiltIn checks that the sample events built into pmx are config/samples/events
// as it is on disk, all of it.
func TestSampleEventsBuiltIn(t *testing.T) {
	builtIn, err := v1alpha1.LoadEventsFS(SampleEvents(), "built in")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := v1alpha1.LoadEventsFS(os.DirFS(filepath.Join("samples", "events")), "samples/events")
	if err != nil {
		t.Fatal(err)
	}
	if len(builtIn) == 0 || !reflect.DeepEqual(builtIn, onDisk) {
		t.Fatalf("built in: %d events %v; on disk: %d", len(builtIn), builtIn, len(onDisk))
	}
}

// TestSampleSeriesBuiltIn checks that the sample series built into pmx are config/samples/series
// as it is on disk, all of it.
func TestSampleSeriesBuiltIn(t *testing.T) {
	builtIn, err := v1alpha1.LoadSeriesFS(SampleSeries(), "built in")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := v1alpha1.LoadSeriesFS(os.DirFS(filepath.Join("samples", "series")), "samples/series")
	if err != nil {
		t.Fatal(err)
	}
	if len(builtIn) == 0 || !reflect.DeepEqual(builtIn, onDisk) {
		t.Fatalf("built in: %d series %v; on disk: %d", len(builtIn), builtIn, len(onDisk))
	}
}

// TestCRDsBuiltIn checks that the CRDs built into pmx are config/crd/bases as it is on disk.
func TestCRDsBuiltIn(t *testing.T) {
	onDisk, err := filepath.Glob(filepath.Join("crd", "bases", "*.yaml"))
	if err != nil || len(onDisk) == 0 {
		t.Fatalf("no CRDs on disk: %v", err)
	}
	builtIn, err := fs.Glob(CRDs(), "*.yaml")
	if err != nil || len(builtIn) != len(onDisk) {
		t.Fatalf("%d CRDs built in (%v), %d on disk", len(builtIn), err, len(onDisk))
	}
	for _, path := range onDisk {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(CRDs(), filepath.Base(path))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s built in differs from the file (%v)", filepath.Base(path), err)
		}
	}
}
