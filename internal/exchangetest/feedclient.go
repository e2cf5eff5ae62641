package exchangetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/pmx-dev/pmx/internal/feed"
)

// FeedConn is a WebSocket connection to the live feed, as a bot holds one: every message it
// sends and receives is checked against the AsyncAPI document.
type FeedConn struct {
	T  *Target
	ws *websocket.Conn
}

// FeedMessage is any message of the feed, the fields of every kind together.
type FeedMessage struct {
	Type      string       `json:"type"`
	ID        int64        `json:"id"`
	Channel   string       `json:"channel"`
	MarketID  string       `json:"marketId"`
	Code      string       `json:"code"`
	Message   string       `json:"message"`
	Seq       int64        `json:"seq"`
	Cursor    string       `json:"cursor"` // an account channel's confirmation's, an accountEvents message's
	Status    string       `json:"status"`
	Change    string       `json:"change"`
	EventID   string       `json:"eventId"`
	Halted    string       `json:"halted"`
	Bids      []feed.Level `json:"bids"`
	Asks      []feed.Level `json:"asks"`
	LastPrice *int         `json:"lastPrice"`
	BestBid   *int         `json:"bestBid"`
	BestAsk   *int         `json:"bestAsk"`
	Events    []feed.Event `json:"events"`
	// RetryAfterSeconds is a rate_limited error's wait.
	RetryAfterSeconds float64 `json:"retryAfterSeconds"`
	// AccountEvents are the events of an accountEvents message (orders and fills channels).
	AccountEvents []feed.AccountEvent `json:"-"`
	Raw           []byte              `json:"-"`
}

// DialFeed connects to the feed with the client's API key.
func (c *Client) DialFeed(t testing.TB) *FeedConn {
	t.Helper()
	f, err := c.TryDialFeed(context.Background())
	if err != nil {
		t.Fatalf("connecting to the feed: %v", err)
	}
	t.Cleanup(func() { f.ws.CloseNow() })
	return f
}

// TryDialFeed connects to the feed with the client's API key, or says why it could not.
func (c *Client) TryDialFeed(ctx context.Context) (*FeedConn, error) {
	return c.dialFeed(ctx, nil, "")
}

// DialFeedQuery connects to the feed with a query string (e.g. "cancelOnDisconnect=true"), and
// with the client's API key unless the query carries a token.
func (c *Client) DialFeedQuery(ctx context.Context, query string) (*FeedConn, error) {
	return c.dialFeed(ctx, nil, query)
}

// DialSlowFeed connects to the feed with a small TCP receive buffer (4 KiB), as a client on a
// slow link has, so that what it does not read backs up into the server's queue at once rather
// than into the kernel's buffers.
func (c *Client) DialSlowFeed(t testing.TB) *FeedConn {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return conn, err
	}
	f, err := c.dialFeed(context.Background(), &http.Client{Transport: tr}, "")
	if err != nil {
		t.Fatalf("connecting to the feed: %v", err)
	}
	t.Cleanup(func() { f.ws.CloseNow() })
	return f
}

func (c *Client) dialFeed(ctx context.Context, hc *http.Client, query string) (*FeedConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(c.T.URL, "http") + "/api/v1/ws"
	header := http.Header{"Authorization": {"Bearer " + c.Key}}
	if query != "" {
		url += "?" + query
		if strings.Contains(query, "token=") {
			header = nil
		}
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(-1)
	return &FeedConn{T: c.T, ws: ws}, nil
}

// Send sends a client message, checked against the document first.
func (f *FeedConn) Send(t testing.TB, msg map[string]any) {
	t.Helper()
	raw, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.T.Feed.ValidateClient(raw); err != nil {
		t.Fatalf("the test sends an undocumented message: %v", err)
	}
	f.SendRaw(t, raw)
}

// TrySend is Send that returns its error: for a goroutine other than the test's.
func (f *FeedConn) TrySend(msg map[string]any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if err := f.T.Feed.ValidateClient(raw); err != nil {
		return fmt.Errorf("an undocumented message: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.ws.Write(ctx, websocket.MessageText, raw)
}

// SendRaw sends a text message as it is, unchecked: for tests of refusals.
func (f *FeedConn) SendRaw(t testing.TB, raw []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.ws.Write(ctx, websocket.MessageText, raw); err != nil {
		t.Fatalf("sending %s: %v", raw, err)
	}
}

// Next returns the next message other than a heartbeat, failing t if none comes within timeout
// or the message breaks the document.
func (f *FeedConn) Next(t testing.TB, timeout time.Duration) FeedMessage {
	t.Helper()
	m, err := f.TryNext(timeout)
	if err != nil {
		t.Fatalf("reading the feed: %v", err)
	}
	return m
}

// nextRaw reads the next message, heartbeats included, checked against the document.
func (f *FeedConn) nextRaw(timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	typ, raw, err := f.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errors.New("a binary message")
	}
	if err := f.T.Feed.ValidateServer(raw); err != nil {
		return nil, &UndocumentedError{err}
	}
	return raw, nil
}

// TryNext is Next that returns its error (a *websocket.CloseError when the server closed).
func (f *FeedConn) TryNext(timeout time.Duration) (FeedMessage, error) {
	for {
		raw, err := f.nextRaw(timeout)
		if err != nil {
			return FeedMessage{}, err
		}
		var m FeedMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return FeedMessage{}, err
		}
		m.Raw = raw
		if m.Type == "accountEvents" {
			var a feed.AccountEventsMessage
			if err := json.Unmarshal(raw, &a); err != nil {
				return FeedMessage{}, err
			}
			m.Events, m.AccountEvents = nil, a.Events
		}
		if m.Type != "heartbeat" {
			return m, nil
		}
	}
}

// Expect reads the next message and fails t unless it has the type (and, for errors, the code).
func (f *FeedConn) Expect(t testing.TB, typ, code string) FeedMessage {
	t.Helper()
	m := f.Next(t, 30*time.Second)
	if m.Type != typ || m.Code != code {
		t.Fatalf("got %s, want a %s message %s", m.Raw, typ, code)
	}
	return m
}

// UndocumentedError is a message the AsyncAPI document does not allow.
type UndocumentedError struct{ Err error }

func (e *UndocumentedError) Error() string { return e.Err.Error() }

// ExpectReply is Expect for an answer to a client message (subscribed, unsubscribed, pong,
// error): subscription messages that come before it are skipped.
func (f *FeedConn) ExpectReply(t testing.TB, typ, code string) FeedMessage {
	t.Helper()
	for range 10_000 {
		m := f.Next(t, 30*time.Second)
		switch m.Type {
		case "snapshot", "events", "ticker", "market", "accountEvents":
			continue
		}
		if m.Type != typ || m.Code != code {
			t.Fatalf("got %s, want a %s message %s", m.Raw, typ, code)
		}
		return m
	}
	t.Fatalf("no %s message", typ)
	return FeedMessage{}
}

// Close closes the connection normally.
func (f *FeedConn) Close() { _ = f.ws.Close(websocket.StatusNormalClosure, "") }

// Abort drops the connection without a close handshake, as a crash or a cut network does.
func (f *FeedConn) Abort() { f.ws.CloseNow() }

// CloseCode is the close code of an error TryNext returned (-1 if it is not a close).
func CloseCode(err error) int { return int(websocket.CloseStatus(err)) }

// metricLines reads the lines of the exchange's metrics (MetricsURL), in the text format.
func (tg *Target) metricLines(t testing.TB) []string {
	t.Helper()
	resp, err := tg.HTTP.Get(tg.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(raw), "\n")
}

// Metrics sums the samples of a metric of the exchange's, whatever their labels; 0 when absent.
func (tg *Target) Metrics(t testing.TB, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range tg.metricLines(t) {
		sample, v, ok := strings.Cut(line, " ")
		if !ok || sample != name && !strings.HasPrefix(sample, name+"{") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", line, err)
		}
		sum += f
	}
	return sum
}

// Metric reads a sample of the exchange's metrics, by its name and labels as the text format
// writes them (e.g. `pmx_feed_closed_total{reason="slow_consumer"}`); 0 when absent.
func (tg *Target) Metric(t testing.TB, sample string) float64 {
	t.Helper()
	for _, line := range tg.metricLines(t) {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
