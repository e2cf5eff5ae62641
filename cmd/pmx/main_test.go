package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/pmx-dev/pmx/internal/cmd/api"
	"github.com/pmx-dev/pmx/internal/cmd/dev"
	"github.com/pmx-dev/pmx/internal/cmd/shard"
)

// TestMetricsFlag checks --metrics-addr's default in each command that serves HTTP itself: the
// loopback for pmx dev, every interface for api and shard, as in their pods; $PMX_METRICS_ADDR
// overrides them.
func TestMetricsFlag(t *testing.T) {
	defaults := func() map[string]string {
		got := map[string]string{}
		for _, cmd := range []*cobra.Command{dev.NewCommand(), api.NewCommand(), shard.NewCommand()} {
			got[cmd.Name()] = cmd.Flags().Lookup("metrics-addr").DefValue
		}
		return got
	}
	t.Setenv("PMX_METRICS_ADDR", "")
	if got := defaults(); got["dev"] != "127.0.0.1:9090" || got["api"] != ":9090" || got["shard"] != ":9090" {
		t.Errorf("--metrics-addr defaults %v, want 127.0.0.1:9090 for dev and :9090 for api and shard", got)
	}
	t.Setenv("PMX_METRICS_ADDR", "127.0.0.1:0")
	for name, def := range defaults() {
		if def != "127.0.0.1:0" {
			t.Errorf("pmx %s --metrics-addr defaults to %q with $PMX_METRICS_ADDR=127.0.0.1:0", name, def)
		}
	}
}
