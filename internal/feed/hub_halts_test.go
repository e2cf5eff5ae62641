package feed

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestLifecycleHalts: the lifecycle channel tells a market halted and resumed once per change of
// what halts it (its own pause, its event's, the exchange's halt), and nothing once it is settled.
func TestLifecycleHalts(t *testing.T) {
	ctx := context.Background()
	log := &memLog{market: uuid.New(), memAccounts: &memAccounts{}}
	h := NewHub(log, slog.New(slog.DiscardHandler), 0)
	out := &recorder{}
	if err := h.Subscribe(ctx, &Subscription{Channel: ChannelLifecycle, Out: out}, nil, func(*int64) []byte { return nil }); err != nil {
		t.Fatal(err)
	}
	sweep := func() []MarketMessage {
		t.Helper()
		out.msgs = out.msgs[:0]
		if _, err := h.sweep(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		var got []MarketMessage
		for _, raw := range out.msgs {
			if len(raw) == 0 {
				continue
			}
			var m MarketMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		return got
	}
	expect := func(what string, change, halted string) {
		t.Helper()
		got := sweep()
		if change == "" {
			if len(got) != 0 {
				t.Fatalf("%s: %+v, want no message", what, got)
			}
			return
		}
		if len(got) != 1 || got[0].Change != change || got[0].Halted != halted || got[0].MarketID != log.market || got[0].Channel != ChannelLifecycle {
			t.Fatalf("%s: %+v, want one %q message halted %q", what, got, change, halted)
		}
	}
	expect("the first sweep", "", "")
	log.paused = "market"
	expect("the market paused", ChangeHalted, "market")
	expect("nothing changed", "", "")
	log.exchange = true
	expect("the exchange halted", ChangeHalted, "exchange")
	log.paused = ""
	expect("the market resumed under the exchange's halt", "", "")
	log.exchange = false
	expect("the exchange resumed", ChangeResumed, "")
	log.paused = "event"
	expect("the event paused", ChangeHalted, "event")
	log.status = "RESOLVED"
	if got := sweep(); len(got) != 1 || got[0].Change != ChangeStatus || got[0].Status != "RESOLVED" {
		t.Fatalf("resolved: %+v, want one status message", got)
	}
	log.paused = ""
	expect("a settled market's pause lifted", "", "")
}
