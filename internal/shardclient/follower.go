package shardclient

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

	json "github.com/goccy/go-json"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

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
				if ve := (*shardproto.VersionError)(nil); errors.As(err, &ve) && ctx.Err() == nil {
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+shardproto.PathFeed, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.Token)
	req.Header.Set(shardproto.ProtocolHeader, strconv.Itoa(shardproto.ProtocolVersion))
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
	// A stream silent past FeedSilence (no batch, no keepalive) is dead: cut it.
	alive := time.AfterFunc(shardproto.FeedSilence, cancel)
	defer alive.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), shardproto.MaxFeedLine)
	for sc.Scan() {
		alive.Reset(shardproto.FeedSilence)
		line := sc.Bytes()
		if len(line) == 0 {
			continue // keepalive
		}
		var w shardproto.FeedBatchV1
		if err := json.Unmarshal(line, &w); err != nil {
			return fmt.Errorf("a line of the stream: %w", err)
		}
		b := w.Batch()
		b.Events = append(json.RawMessage(nil), b.Events...) // the scanner reuses its buffer
		f.Hub.Ingest(ctx, b)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the shard closed the stream")
}
