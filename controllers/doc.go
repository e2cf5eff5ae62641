// Package controllers holds pmx's operator, the Market reconciler (run by `pmx operator`,
// cmd/pmx). It records each Market resource in Postgres (market.Record), carries out its lifecycle
// intent — close, reopen, resolve, cancel — through a shard of its own with the code the
// standalone exchange runs (packages market and shard), schedules every OPEN market onto the
// least-loaded live shard and moves it when that shard's heartbeat lapses, voids a Market deleted
// before settlement (its finalizer), and reports all of it in the Market's status and events.
package controllers
