// Package shardserver is the HTTP server a shard process (pmx shard) serves on its internal port:
// the internal protocol's calls (package shardproto), each checked before the shard sees it and
// registered from one table (server.go's routes), the stream of committed batches the fronts
// follow (feed.go), and the health endpoints. It serves an exchange.Shard and links neither the
// shard's implementation nor the client (package shardclient).
package shardserver
