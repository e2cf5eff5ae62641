package shardapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	json "github.com/goccy/go-json"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/store"
)

// How committed events travel from the shards to the fronts in distributed mode: each front
// replica holds one long-lived stream from every live shard (GET /internal/v1/feed), on which
// the shard writes each batch it commits — one line of JSON per market and batch, the events as
// they were written to Postgres — right after the commit. A front thus needs no Postgres query
// per event; the hub (package feed) fills from Postgres only the gaps a lost stream or a moved
// market leaves, and its once-a-second sweep catches anything no stream carried. A shard never
// waits on a front: a stream whose buffer fills is cut, and the front reconnects.

const (
	internalFeed   = "/internal/v1/feed"
	feedKeepalive  = 5 * time.Second  // an empty line, so that a front sees a dead stream
	feedSilence    = 20 * time.Second // a front gives up on a stream silent this long
	feedStreamSize = 8192             // batches a stream may fall behind
	maxFeedLine    = 64 << 20         // the largest batch a front reads (a batch of 1,024 commands is well under)
)

// streamFeed writes the shard's committed batches to one front until it goes away or falls
// behind, or the shard stops.
func streamFeed(bus *feed.Bus, stopping <-chan struct{}) gin.HandlerFunc {
	return func(c *gin.Context) {
		if bus == nil {
			c.JSON(http.StatusNotFound, errorWire{Code: "no_feed"})
			return
		}
		sub := bus.Subscribe(feedStreamSize)
		defer sub.Close()
		rc := http.NewResponseController(c.Writer)
		_ = rc.SetWriteDeadline(time.Time{}) // the stream lasts; its writes are bounded below
		c.Header("Content-Type", "application/x-ndjson")
		c.Status(http.StatusOK)
		keepalive := time.NewTicker(feedKeepalive)
		defer keepalive.Stop()
		w := bufio.NewWriterSize(c.Writer, 64<<10)
		flush := func() bool {
			_ = rc.SetWriteDeadline(time.Now().Add(feedSilence))
			if w.Flush() != nil || rc.Flush() != nil {
				return false
			}
			return true
		}
		if !flush() {
			return
		}
		for {
			select {
			case b := <-sub.C():
				for more := true; more; {
					line, err := json.Marshal(feedBatchToWire(b))
					if err != nil {
						return
					}
					_, _ = w.Write(line)
					_ = w.WriteByte('\n')
					select { // what else is waiting goes in the same write
					case b = <-sub.C():
					default:
						more = false
					}
				}
				if !flush() {
					return
				}
			case <-keepalive.C:
				_ = w.WriteByte('\n')
				if !flush() {
					return
				}
			case <-sub.Lost():
				return // fell behind: the front reconnects and fills the gap
			case <-stopping:
				return
			case <-c.Request.Context().Done():
				return
			}
		}
	}
}

// Follower follows every live shard's stream of committed batches into a front's hub.
type Follower struct {
	Store *store.Store
	Token string
	Hub   *feed.Hub
	// ShardTTL is how recent a shard's heartbeat must be for it to be followed (default 30s).
	ShardTTL time.Duration
	Logger   *slog.Logger
	// HTTP reaches the shards (default: a client of its own, with no overall timeout).
	HTTP *http.Client
}

// Run follows the shards until ctx ends, looking once a second for shards to follow.
func (f *Follower) Run(ctx context.Context) {
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "feed-follower")
	ttl := f.ShardTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	hc := f.HTTP
	if hc == nil {
		hc = &http.Client{Transport: Transport(0)}
	}
	var mu sync.Mutex
	following := map[string]bool{} // by address
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		shards, err := f.Store.LiveShards(ctx, ttl)
		if err != nil && ctx.Err() == nil {
			log.Warn("could not list the shards to follow; trying again", "err", err)
		}
		for _, sh := range shards {
			mu.Lock()
			if sh.Address == "" || following[sh.Address] {
				mu.Unlock()
				continue
			}
			following[sh.Address] = true
			mu.Unlock()
			wg.Go(func() {
				err := f.follow(ctx, hc, sh.Address)
				if ve := (*VersionError)(nil); errors.As(err, &ve) && ctx.Err() == nil {
					log.Error("a shard's feed stream is in a protocol version this front does not speak; following it again in a second",
						"shard", sh.Name, "addr", sh.Address, "err", err)
				} else if ctx.Err() == nil {
					log.Info("a shard's feed stream ended; following it again if it is live", "shard", sh.Name, "addr", sh.Address, "err", err)
				}
				mu.Lock()
				delete(following, sh.Address)
				mu.Unlock()
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// follow reads one shard's stream into the hub until it ends.
func (f *Follower) follow(ctx context.Context, hc *http.Client, addr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+internalFeed, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.Token)
	req.Header.Set(ProtocolHeader, strconv.Itoa(ProtocolVersion))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := answerVersion(resp, "the shard at "+addr); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the shard answered %s", resp.Status)
	}
	// A stream silent past feedSilence (no batch, no keepalive) is dead: cut it.
	alive := time.AfterFunc(feedSilence, cancel)
	defer alive.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxFeedLine)
	for sc.Scan() {
		alive.Reset(feedSilence)
		line := sc.Bytes()
		if len(line) == 0 {
			continue // keepalive
		}
		var w feedBatchV1
		if err := json.Unmarshal(line, &w); err != nil {
			return fmt.Errorf("a line of the stream: %w", err)
		}
		b := w.batch()
		b.Events = append(json.RawMessage(nil), b.Events...) // the scanner reuses its buffer
		f.Hub.Ingest(ctx, b)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the shard closed the stream")
}
