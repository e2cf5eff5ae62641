package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/client"
	"github.com/pmx-dev/pmx/internal/exchangetest"
)

// keysManager opens an account through the admin API, as an operator would, and answers a client
// with the key of scope keys the admin API makes it.
func keysManager(t *testing.T, tg *exchangetest.Target, name string) *client.Client {
	t.Helper()
	owner := tg.NewAccount(t, name)
	var made apiserver.NewKey
	tg.Admin(t, "POST", "/admin/v1/accounts/"+owner.Account.String()+"/keys", map[string]any{"scope": "keys"}, http.StatusCreated, &made)
	manager, err := client.New(tg.URL+"/api/v1", made.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	return manager
}

// TestKeys makes and revokes keys with the SDK: an account the admin API opened, given a key of
// scope keys, makes a cancel-only key that cancels and cannot trade; asks in vain for a key that
// outlives its own; and revokes the key it made, which is then refused.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	tg := exchangetest.StartDev(t)
	manager := keysManager(t, tg, "sdkkeys")
	scope, label := client.NewKeyRequestScopeCancel, "desk"
	desk, err := manager.CreateKey(ctx, client.NewKeyRequest{Scope: &scope, Label: &label})
	if err != nil || desk.APIKey == "" || desk.Key.Scope != client.APIKeyScopeCancel || desk.Key.Label != "desk" {
		t.Fatalf("CreateKey: %v, %+v", err, desk)
	}
	deskClient, err := client.New(tg.URL+"/api/v1", desk.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deskClient.CancelEverything(ctx); err != nil {
		t.Fatalf("the desk key's CancelEverything: %v", err)
	}
	var e *client.APIError
	m := tg.NewMarket(t, nil).ID
	if _, err := deskClient.PlaceOrder(ctx, order(m, client.BUY, client.OutcomeYES, 40, 1)); !errors.As(err, &e) || e.Code != "insufficient_scope" {
		t.Fatalf("the desk key's PlaceOrder: %v, want insufficient_scope", err)
	}
	// The desk key, whose scope is below keys, makes none.
	if _, err := deskClient.CreateKey(ctx, client.NewKeyRequest{}); !errors.As(err, &e) || e.Code != "insufficient_scope" || e.Field != "keys" {
		t.Fatalf("CreateKey with a cancel key: %v, want insufficient_scope naming keys", err)
	}
	if err := manager.RevokeKey(ctx, desk.Key.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if _, err := deskClient.Account(ctx); !errors.As(err, &e) || e.Code != "invalid_api_key" {
		t.Fatalf("the revoked key's Account: %v, want invalid_api_key", err)
	}
	if err := manager.RevokeKey(ctx, desk.Key.ID); !errors.As(err, &e) || e.Code != "key_not_found" {
		t.Fatalf("RevokeKey again: %v, want key_not_found", err)
	}
}

// TestFeedEndsWithItsKey: a feed whose key is revoked while it runs ends with ErrKeyEnded, at
// once, rather than reconnecting with a key every connection refuses.
func TestFeedEndsWithItsKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tg := exchangetest.StartDev(t)
	manager := keysManager(t, tg, "feedkey")
	scope := client.NewKeyRequestScopeRead
	bot, err := manager.CreateKey(ctx, client.NewKeyRequest{Scope: &scope})
	if err != nil {
		t.Fatal(err)
	}
	botClient, err := client.New(tg.URL+"/api/v1", bot.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	feed := botClient.Feed(client.Subscription{Channel: client.ChannelOrders})
	reconnected := make(chan error, 16)
	feed.OnReconnect = func(err error) {
		select {
		case reconnected <- err:
		default:
		}
	}
	ran := make(chan error, 1)
	go func() { ran <- feed.Run(ctx, func(client.FeedMessage) error { return nil }) }()
	select {
	case <-feed.Ready():
	case err := <-ran:
		t.Fatalf("the feed ended before it was ready: %v", err)
	}
	if err := manager.RevokeKey(ctx, bot.Key.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; !errors.Is(err, client.ErrKeyEnded) {
		t.Fatalf("the feed of a revoked key ended with %v, want ErrKeyEnded", err)
	}
	if len(reconnected) > 0 {
		t.Errorf("the feed reconnected after its key was revoked: %v", <-reconnected)
	}
}
