package bench

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pmx-dev/pmx/internal/tools/loadgen"
)

func TestWriteChart(t *testing.T) {
	r := sampleResult()
	more := newRunResult(1000, &loadgen.Report{Mode: "open", Seconds: 20, Orders: 20_000, OrdersPerSec: 1000,
		Requests: []loadgen.KindStats{{Kind: "place", P50Us: 4_000, P99Us: 21_000}}}, pgCounters{transactions: 20_000}, cpuSample{})
	r.Runs = append(r.Runs, *more)
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := r.WriteChart(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width < 600 || cfg.Height < 350 {
		t.Fatalf("chart is %dx%d", cfg.Width, cfg.Height)
	}

	r.Runs = r.Runs[:2] // one open-loop run is not a curve
	if err := r.WriteChart(filepath.Join(t.TempDir(), "one.png")); err == nil {
		t.Fatal("a chart of one point was drawn")
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	minor := 0
	for _, tk := range (logTicks{}).Ticks(math.Log10(0.8), math.Log10(2500)) {
		if tk.Label == "" {
			minor++
			continue
		}
		labels = append(labels, tk.Label)
	}
	want := []string{"1", "2", "5", "10", "20", "50", "100", "200", "500", "1,000", "2,000"}
	if !slices.Equal(labels, want) || minor == 0 {
		t.Fatalf("labels %v (%d minor ticks), want %v and minor ticks", labels, minor, want)
	}
}
