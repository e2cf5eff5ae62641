package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/coder/websocket"
)

// FeedResult is what the live feed's subscribers saw during a run: each subscriber holds one
// WebSocket connection subscribed to the book channel of every market of the run.
type FeedResult struct {
	Subscribers  int     `json:"subscribers"`
	Events       int64   `json:"events"`       // events received, every subscriber's together
	EventsPerSec float64 `json:"eventsPerSec"` // events received per second, every subscriber's together
	// Latency from an event's batch time (taken just before its commit) to its receipt by a
	// subscriber, in microseconds.
	P50Us int64 `json:"p50Us"`
	P99Us int64 `json:"p99Us"`
	// Disconnects is how many times a subscriber's connection ended before the run did.
	Disconnects int64 `json:"disconnects"`
}

// feedWatch is the subscribers of one run.
type feedWatch struct {
	n           int
	start       time.Time
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	events      atomic.Int64
	disconnects atomic.Int64
	mu          sync.Mutex
	hist        *hdrhistogram.Histogram
}

// watchFeed connects n subscribers to the book channel of the markets, as one new account.
func watchFeed(ctx context.Context, baseURL, token string, markets []string, n int) (*feedWatch, error) {
	key, err := benchAccount(ctx, baseURL, token)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &feedWatch{n: n, start: time.Now(), cancel: cancel, hist: hdrhistogram.New(1, 60_000_000, 3)}
	ready := make(chan error, n)
	for range n {
		w.wg.Go(func() { w.subscriber(ctx, baseURL, key, markets, ready) })
	}
	for range n {
		if err := <-ready; err != nil {
			w.stop()
			return nil, err
		}
	}
	w.start = time.Now()
	return w, nil
}

// subscriber follows the markets until ctx ends, reconnecting (and counting it) if cut off.
func (w *feedWatch) subscriber(ctx context.Context, baseURL, key string, markets []string, ready chan<- error) {
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/api/v1/ws"
	first := true
	for ctx.Err() == nil {
		conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		if err == nil {
			conn.SetReadLimit(-1)
			for i, m := range markets {
				msg, _ := json.Marshal(map[string]any{"op": "subscribe", "id": i, "channel": "book", "marketId": m})
				if err = conn.Write(ctx, websocket.MessageText, msg); err != nil {
					break
				}
			}
		}
		if first {
			ready <- err
			first = false
			if err != nil {
				return
			}
		}
		if err != nil {
			continue
		}
		w.read(ctx, conn)
		conn.CloseNow()
		if ctx.Err() == nil {
			w.disconnects.Add(1)
		}
	}
}

// read counts the events a connection receives and the latency of each.
func (w *feedWatch) read(ctx context.Context, conn *websocket.Conn) {
	var msg struct {
		Type   string
		Events []struct{ At time.Time }
	}
	local := hdrhistogram.New(1, 60_000_000, 3)
	defer func() {
		w.mu.Lock()
		w.hist.Merge(local)
		w.mu.Unlock()
	}()
	for {
		_, raw, err := conn.Read(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		msg.Type, msg.Events = "", msg.Events[:0]
		if json.Unmarshal(raw, &msg) != nil || msg.Type != "events" {
			continue
		}
		for _, e := range msg.Events {
			_ = local.RecordValue(max(1, now.Sub(e.At).Microseconds()))
		}
		w.events.Add(int64(len(msg.Events)))
	}
}

func (w *feedWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// result stops the subscribers and sums up what they saw.
func (w *feedWatch) result() *FeedResult {
	elapsed := time.Since(w.start).Seconds()
	w.stop()
	return &FeedResult{Subscribers: w.n, Events: w.events.Load(), EventsPerSec: float64(w.events.Load()) / elapsed,
		P50Us: w.hist.ValueAtQuantile(50), P99Us: w.hist.ValueAtQuantile(99), Disconnects: w.disconnects.Load()}
}

// benchAccount opens an account through the admin API and returns its API key.
func benchAccount(ctx context.Context, baseURL, token string) (string, error) {
	body, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("feed-%d", time.Now().UnixNano())})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/admin/v1/accounts", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("while opening the feed's account: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var a struct{ APIKey string }
	if res.StatusCode != http.StatusCreated || json.Unmarshal(raw, &a) != nil || a.APIKey == "" {
		return "", fmt.Errorf("while opening the feed's account: HTTP %d: %s", res.StatusCode, bytes.TrimSpace(raw))
	}
	return a.APIKey, nil
}
