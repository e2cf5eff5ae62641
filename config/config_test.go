package config

import (
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
