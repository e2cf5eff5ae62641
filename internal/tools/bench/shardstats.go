package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ShardCounters are what the exchange's shards counted during a run's load, summed over every
// shard (pmx dev's, or every pmx shard process's), from their /metrics: how their batches went,
// and how many commands could not join the batch built while the one before committed. A
// counter the pmx build does not export (one from before it existed) is -1.
type ShardCounters struct {
	Batches   int64 `json:"batches"`   // pmx_shard_batches_total: batches committed
	Commands  int64 `json:"commands"`  // pmx_shard_batch_commands (its sum): commands in them
	Pipelined int64 `json:"pipelined"` // pmx_shard_commands_pipelined_total
	Held      int64 `json:"held"`      // pmx_shard_commands_held_total
	Read      int64 `json:"read"`      // pmx_shard_batches_read_total: batches that read what they reserve from
	Rerun     int64 `json:"rerun"`     // pmx_shard_batches_rerun_total
	// Acquires are the transactions that moved accounts' cash to a shard's allocation before a
	// batch that needed it (pmx_shard_acquires_total, docs/architecture.md §11): each a round trip
	// more for the commands waiting on it.
	Acquires int64 `json:"acquires"`
	// AcquireSeconds is the time those transactions took, which their batches waited
	// (pmx_shard_acquire_seconds_total), -1 if not exported.
	AcquireSeconds float64 `json:"acquireSeconds"`
	// Aside are the acquires a shard made on the side, on a pool connection, for accounts it met
	// while a batch of its own committed (pmx_shard_acquires_aside_total), and AsideSeconds what
	// they took, which its loop waited (pmx_shard_acquire_aside_seconds_total); -1 if not exported.
	Aside        int64   `json:"acquiresAside"`
	AsideSeconds float64 `json:"acquireAsideSeconds"`
	Failures     int64   `json:"failures"` // pmx_shard_batch_failures_total
	// DatabaseSeconds is how long the shards' connections spent on their batches' round trips to
	// Postgres (pmx_shard_database_seconds_total), -1 if not exported; Shards how many shards
	// counted (the series of pmx_shard_batches_total) and Seconds the time between the two
	// readings a difference was taken from: DatabaseBusy gives the share of it.
	DatabaseSeconds float64 `json:"databaseSeconds"`
	Shards          int     `json:"shards"`
	Seconds         float64 `json:"seconds,omitempty"`
}

// DatabaseBusy is the share of the time each shard's connection spent on its batches' round
// trips, averaged over the shards: near 1, the shards were bound by Postgres. -1 when the pmx
// build does not count it or the counters are not a difference over a known time.
func (c ShardCounters) DatabaseBusy() float64 {
	if c.DatabaseSeconds < 0 || c.Shards == 0 || c.Seconds <= 0 {
		return -1
	}
	return c.DatabaseSeconds / (c.Seconds * float64(c.Shards))
}

// scrapeShards reads the shard counters from each of the metrics addresses and sums them;
// processes without shards (fronts, the operator) add nothing. It reads the histograms of
// ServerTimes too, which fronts add their placements to.
func scrapeShards(ctx context.Context, urls []string) (ShardCounters, serverHistograms, error) {
	sum := ShardCounters{Held: -1, Read: -1, Acquires: -1, AcquireSeconds: -1, Aside: -1, AsideSeconds: -1, DatabaseSeconds: -1}
	hists := newServerHistograms()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, url := range urls {
		families, err := scrape(ctx, client, url)
		if err != nil {
			return sum, hists, err
		}
		sum.add(families)
		hists.add(families)
	}
	return sum, hists, nil
}

func scrape(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("while reading the exchange's metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil, fmt.Errorf("while reading the exchange's metrics: %s answered %s", url, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("while reading the exchange's metrics from %s: %w", url, err)
	}
	return families, nil
}

// add adds one process's shard counters (every shard's series of each) to c.
func (c *ShardCounters) add(families map[string]*dto.MetricFamily) {
	total := func(name string) (float64, bool) {
		f, ok := families[name]
		if !ok {
			return 0, false
		}
		var n float64
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				n += h.GetSampleSum()
			} else {
				n += m.GetCounter().GetValue()
			}
		}
		return n, true
	}
	for _, x := range []struct {
		name string
		into *int64
	}{
		{"pmx_shard_batches_total", &c.Batches}, {"pmx_shard_batch_commands", &c.Commands},
		{"pmx_shard_commands_pipelined_total", &c.Pipelined}, {"pmx_shard_commands_held_total", &c.Held},
		{"pmx_shard_batches_read_total", &c.Read}, {"pmx_shard_batches_rerun_total", &c.Rerun},
		{"pmx_shard_batch_failures_total", &c.Failures}, {"pmx_shard_acquires_total", &c.Acquires},
		{"pmx_shard_acquires_aside_total", &c.Aside},
	} {
		if n, ok := total(x.name); ok {
			*x.into = max(*x.into, 0) + int64(n)
		}
	}
	for _, x := range []struct {
		name string
		into *float64
	}{{"pmx_shard_database_seconds_total", &c.DatabaseSeconds}, {"pmx_shard_acquire_seconds_total", &c.AcquireSeconds},
		{"pmx_shard_acquire_aside_seconds_total", &c.AsideSeconds}} {
		if n, ok := total(x.name); ok {
			*x.into = max(*x.into, 0) + n
		}
	}
	if f, ok := families["pmx_shard_batches_total"]; ok {
		c.Shards += len(f.GetMetric())
	}
}

// sub is what the counters went up by since base; one either side lacks stays -1. Shards is c's.
func (c ShardCounters) sub(base ShardCounters) ShardCounters {
	return ShardCounters{Batches: rise(c.Batches, base.Batches), Commands: rise(c.Commands, base.Commands),
		Pipelined: rise(c.Pipelined, base.Pipelined), Held: rise(c.Held, base.Held), Read: rise(c.Read, base.Read),
		Rerun: rise(c.Rerun, base.Rerun), Failures: rise(c.Failures, base.Failures), Acquires: rise(c.Acquires, base.Acquires),
		AcquireSeconds: rise(c.AcquireSeconds, base.AcquireSeconds), Aside: rise(c.Aside, base.Aside),
		AsideSeconds: rise(c.AsideSeconds, base.AsideSeconds), DatabaseSeconds: rise(c.DatabaseSeconds, base.DatabaseSeconds),
		Shards: c.Shards}
}

// rise is how much a counter went up from base to now, -1 where either reading lacks it (-1).
func rise[T int64 | float64](now, base T) T {
	if now < 0 || base < 0 {
		return -1
	}
	return now - base
}
