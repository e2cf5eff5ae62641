// Package shardclient is the calling end of the internal protocol (package shardproto): the client
// of one shard's internal API (client.go); the Router, the front's Exchange in distributed mode,
// which sends each market's writes and book reads to the shard that owns it (router.go, books.go,
// convert.go, eventtransition.go), and with Lifecycle set the operator's lifecycle changes and
// planned handoffs (handoff.go); and the Follower, which streams each live shard's committed
// batches into a front's feed hub (follower.go). The server it calls is package shardserver.
package shardclient
