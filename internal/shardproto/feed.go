package shardproto

import (
	"time"
)

// How committed events travel from the shards to the fronts in distributed mode: each front
// replica holds one long-lived stream from every live shard (GET /internal/v1/feed), on which
// the shard writes each batch it commits — one line of JSON per market and batch, the events as
// they were written to Postgres — right after the commit. A front thus needs no Postgres query
// per event; the hub (package feed) fills from Postgres only the gaps a lost stream or a moved
// market leaves, and its once-a-second sweep catches anything no stream carried. A shard never
// waits on a front: a stream whose buffer fills is cut, and the front reconnects.

const (
	PathFeed       = "/internal/v1/feed"
	FeedKeepalive  = 5 * time.Second  // an empty line, so that a front sees a dead stream
	FeedSilence    = 20 * time.Second // a front gives up on a stream silent this long
	FeedStreamSize = 8192             // batches a stream may fall behind
	MaxFeedLine    = 64 << 20         // the largest batch a front reads (a batch of 1,024 commands is well under)
)
