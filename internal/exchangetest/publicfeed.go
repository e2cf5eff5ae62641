package exchangetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// DialPublicFeed connects to the feed without a key (GET /api/v1/ws/public), as the market pages
// do; every message is checked against the AsyncAPI document as on the keyed feed.
func (tg *Target) DialPublicFeed(t testing.TB) *FeedConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tg.URL, "http")+"/api/v1/ws/public", nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("connecting to the public feed: %v", err)
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { ws.CloseNow() })
	return &FeedConn{T: tg, ws: ws}
}
