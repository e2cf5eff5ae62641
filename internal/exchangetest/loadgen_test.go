package exchangetest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/loadgen"
)

// TestLoadgen drives the standalone exchange with the load generator for a bounded run and checks
// that every request it made succeeded or was a business rejection, and that the invariants hold.
func TestLoadgen(t *testing.T) {
	tg := StartDev(t)
	tg.NewMarket(t, nil)
	tg.NewMarket(t, nil)
	var progress bytes.Buffer
	rep, err := loadgen.Run(context.Background(), loadgen.Config{URL: tg.URL, AdminToken: tg.AdminToken, Bots: 6,
		Orders: 600, Duration: time.Minute, Seed: 7}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.Orders < 600 || rep.Failed != 0 || rep.Fills == 0 || rep.Markets != 2 {
		t.Fatalf("report: %d orders, %d failed, %d fills, %d markets", rep.Orders, rep.Failed, rep.Fills, rep.Markets)
	}
	if !strings.Contains(out.String(), "p99") {
		t.Fatalf("the report shows no latency percentiles:\n%s", out.String())
	}
	CheckInvariants(t, tg)
}
