package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
)

// TestEd25519Signer: a Client made WithEd25519Signer has its requests accepted by a key that must
// sign, with the key's secret and with its prefix alone: reads with a query, an order's body, a
// burst of identical requests (each signed at its own millisecond, so none is a replay), and the
// feed's upgrade. Without the signer the same key is refused.
func TestEd25519Signer(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	m := tg.NewMarket(t, nil).ID
	s := tg.NewSigningAccount(t, "sdk-signed")
	prefix := s.Key[:len("pmx_")+16] // the secret after it may hold "_" too
	for _, key := range []string{s.Key, prefix} {
		c, err := client.New(tg.URL+"/api/v1", key, client.WithEd25519Signer(s.Priv))
		if err != nil {
			t.Fatal(err)
		}
		keys, err := c.Keys(ctx)
		if err != nil || len(keys) != 1 || keys[0].PublicKey == nil {
			t.Fatalf("%s: Keys: %v, %+v, want the key with its public key", key, err, keys)
		}
		if _, err := c.Orders(ctx, &client.ListOrdersParams{MarketID: &m}); err != nil {
			t.Fatalf("%s: Orders of a market: %v", key, err)
		}
		placed, err := c.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 30, 1))
		if err != nil {
			t.Fatalf("%s: PlaceOrder: %v", key, err)
		}
		if _, err := c.CancelOrder(ctx, placed.ID); err != nil {
			t.Fatalf("%s: CancelOrder: %v", key, err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() {
				if _, err := c.Account(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: one of 50 identical requests at once: %v", key, err)
		}
		feedCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		errSeen := errors.New("seen")
		err = c.Feed(client.Subscription{Channel: client.ChannelBook, MarketID: m}).Run(feedCtx, func(client.FeedMessage) error { return errSeen })
		cancel()
		if !errors.Is(err, errSeen) {
			t.Fatalf("%s: the feed with a signed upgrade: %v, want a message", key, err)
		}
	}
	unsigned, err := client.New(tg.URL+"/api/v1", s.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unsigned.Account(ctx); !client.IsCode(err, "invalid_signature") {
		t.Fatalf("a signing key's unsigned request: %v, want invalid_signature", err)
	}
	_, wrong, _ := ed25519.GenerateKey(nil)
	forged, err := client.New(tg.URL+"/api/v1", prefix, client.WithEd25519Signer(wrong))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forged.Account(ctx); !client.IsCode(err, "invalid_signature") {
		t.Fatalf("a request signed by another key: %v, want invalid_signature", err)
	}
}
