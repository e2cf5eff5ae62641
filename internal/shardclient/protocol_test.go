package shardclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestShardRefusesUnknownVersions checks the shard's end of the protocol's version: a request
// without the header is the build before the protocol had a version (version 1) and is served, as
// is one that says 1, each answer saying 1; a request in a version the shard does not speak is
// refused with 400 before it is read — code unsupported_protocol, both versions named, the
// versions the shard speaks listed, the refusal counted — and nothing is committed.
func TestShardRefusesUnknownVersions(t *testing.T) {
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sh := shard.New(shard.Config{Store: st, Logger: log})
	t.Cleanup(sh.Stop)
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(shardserver.Server{Shard: sh, Store: st, Token: validateToken, Logger: log, Metrics: reg}.Handler())
	t.Cleanup(srv.Close)
	r := &internalRig{t: t, url: srv.URL, st: st, sh: sh, market: storetest.Market(t, st), account: storetest.Account(t, st, "alice", 1_000_000)}
	send := func(version string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+shardproto.PathPlace, strings.NewReader(r.place("")))
		req.Header.Set("Authorization", "Bearer "+validateToken)
		if version != "" {
			req.Header.Set(shardproto.ProtocolHeader, version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, raw
	}
	for _, v := range []string{"2", "0", "one"} {
		resp, raw := send(v)
		var e shardproto.ErrorV1
		if err := json.Unmarshal(raw, &e); resp.StatusCode != http.StatusBadRequest || err != nil || e.Code != shardproto.CodeUnsupportedProtocol ||
			e.Details == nil || e.Details.Code != shardproto.CodeUnsupportedProtocol || len(e.Speaks) != 1 || e.Speaks[0] != 1 {
			t.Fatalf("version %q: %d %s, want 400 unsupported_protocol speaking [1]", v, resp.StatusCode, raw)
		}
		if !strings.Contains(e.Error, "1") || !strings.Contains(e.Error, v) || resp.Header.Get(shardproto.ProtocolHeader) != "1" {
			t.Errorf("version %q: %q (header %q) does not name both versions", v, e.Error, resp.Header.Get(shardproto.ProtocolHeader))
		}
	}
	if n := r.orders(); n != 0 {
		t.Fatalf("%d orders committed by requests in versions the shard does not speak", n)
	}
	if got := counterValue(t, reg, "pmx_internal_protocol_refused_total"); got != 3 {
		t.Errorf("pmx_internal_protocol_refused_total = %v, want 3", got)
	}
	for _, v := range []string{"", "1"} {
		if resp, raw := send(v); resp.StatusCode != http.StatusCreated || resp.Header.Get(shardproto.ProtocolHeader) != "1" {
			t.Errorf("version %q: %d %s (answer in version %q), want 201 in version 1", v, resp.StatusCode, raw, resp.Header.Get(shardproto.ProtocolHeader))
		}
	}
}

// counterValue is a counter's value in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}

// TestRouterRefusesUnknownVersions checks the front's end: a shard that answers in a version the
// front does not speak, or refuses the front's, makes a VersionError naming both — unavailable,
// never an outcome unknown — logged and counted; a shard of a release without a call (404) says
// to upgrade the shards first. The peers are stand-ins for releases that do not exist yet.
func TestRouterRefusesUnknownVersions(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	if _, err := r.st.Assign(ctx, r.market, "shard-1"); err != nil {
		t.Fatal(err)
	}
	future := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		if _, err := r.st.Register(ctx, "shard-1", strings.TrimPrefix(srv.URL, "http://"), ""); err != nil {
			t.Fatal(err)
		}
		return srv.URL
	}
	place := exchange.PlaceRequest{Account: r.account, Market: r.market, Side: engine.Buy, Outcome: engine.Yes, Price: 40, Quantity: 1}
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		speaks  string
	}{
		{"answers in version 2", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(shardproto.ProtocolHeader, "2")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{}`))
		}, "speaks version 2, this build speaks 1"},
		{"refuses version 1", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(shardproto.ProtocolHeader, "3")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"unsupported_protocol","speaks":[2,3]}`))
		}, "speaks version 2 or 3, this build speaks 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			future(c.handler)
			reg := prometheus.NewRegistry()
			var logged strings.Builder
			rt := &Router{Store: r.st, Token: validateToken, Metrics: reg, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
			_, err := rt.Place(ctx, place)
			var ve *shardproto.VersionError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.speaks) {
				t.Fatalf("Place: %v, want a VersionError saying %q", err, c.speaks)
			}
			if !errors.Is(err, exchange.ErrUnavailable) || errors.Is(err, exchange.ErrOutcomeUnknown) && c.name != "answers in version 2" {
				t.Errorf("Place: %v, want unavailable", err)
			}
			if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), c.speaks) {
				t.Errorf("log %q does not report it", logged.String())
			}
			if got := counterValue(t, reg, "pmx_internal_protocol_refused_total"); got == 0 {
				t.Error("not counted")
			}
		})
	}
	t.Run("older shard without the call", func(t *testing.T) {
		future(http.NotFound)
		rt := &Router{Store: r.st, Token: validateToken, Lifecycle: true}
		err := rt.Transition(ctx, r.market, domain.CloseMarket)
		if !errors.Is(err, shardproto.ErrOlderPeer) || !strings.Contains(err.Error(), "upgrade the shards first") {
			t.Fatalf("Transition on a shard without the call: %v", err)
		}
	})
}

// TestTransitionOnOwner checks POST /internal/v1/transition through the operator's router: the
// market's owner closes and resolves it, keeping the market and its epoch; a front's router
// refuses, and a market no live shard owns is unavailable.
func TestTransitionOnOwner(t *testing.T) {
	ctx := context.Background()
	r := newNamedInternalRig(t, "shard-1")
	rt := &Router{Store: r.st, Token: validateToken, Lifecycle: true}
	if err := rt.Transition(ctx, r.market, domain.CloseMarket); !errors.Is(err, exchange.ErrUnavailable) {
		t.Fatalf("Transition of a market nobody owns: %v, want unavailable", err)
	}
	if _, err := r.st.Register(ctx, "shard-1", strings.TrimPrefix(r.url, "http://"), ""); err != nil {
		t.Fatal(err)
	}
	owned, err := r.st.Assign(ctx, r.market, "shard-1")
	if err != nil {
		t.Fatal(err)
	}
	front := &Router{Store: r.st, Token: validateToken}
	if err := front.Transition(ctx, r.market, domain.CloseMarket); !errors.Is(err, exchange.ErrManagedByOperator) {
		t.Fatalf("a front's Transition: %v, want exchange.ErrManagedByOperator", err)
	}
	if _, err := front.Place(ctx, exchange.PlaceRequest{Account: r.account, Market: r.market, Side: engine.Buy, Outcome: engine.Yes, Price: 30, Quantity: 2}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []domain.MarketAction{domain.CloseMarket, domain.ResolveYes} {
		if err := rt.Transition(ctx, r.market, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if err := rt.Transition(ctx, r.market, domain.ReopenMarket); !errors.Is(err, market.ErrIllegalTransition) {
		t.Fatalf("reopening a resolved market: %v, want ErrIllegalTransition", err)
	}
	o, err := r.st.Owner(ctx, r.market)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != domain.MarketResolved || o.Shard != "shard-1" || o.Epoch != owned.Epoch {
		t.Fatalf("after resolving: %+v, want RESOLVED by shard-1 at epoch %d", o, owned.Epoch)
	}
	if err := r.sh.CheckBooks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Transition(ctx, uuid.New(), domain.CloseMarket); !errors.Is(err, domain.ErrUnknownMarket) {
		t.Fatalf("an unknown market: %v", err)
	}
}
