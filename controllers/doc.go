// Package controllers holds pmx's operator, the Market reconciler (run by `pmx operator`,
// cmd/pmx). It records each Market resource in Postgres (marketspec.Record), carries out its lifecycle
// intent — close, reopen, resolve, cancel — by asking the live shard that owns the market over the
// internal API (Config.Exchange, the same contract the front speaks), schedules every OPEN market onto the
// least-loaded live shard and moves it when that shard's heartbeat lapses, voids a Market deleted
// before settlement (its finalizer), and reports all of it in the Market's status and events.
//
// The Event reconciler records each Event resource, a question of 2 to 50 mutually exclusive
// outcomes, with one market per outcome (eventrec.Record), creates a Market per outcome that the
// Event owns, and has the shard that owns all of them (schedule keeps an event's markets together)
// close, reopen, resolve or void them in one transaction; the Market reconciler never moves a
// market of an event on its own.
//
// The Rebalancer keeps the OPEN markets spread over the live shards — when a shard joins or
// returns, or the spread is off by more than a margin — moving one market, or one event's
// markets, at a time within the bounds planRebalance decides (docs/architecture.md §6).
//
// The ShardPool reconciler runs the shards themselves: each ShardPool of the operator's namespace
// becomes a StatefulSet of `pmx shard` pods with its headless Service and PodDisruptionBudget, owned
// by the pool and written by server-side apply, and its status reports the pods and the shards as
// Postgres sees them. A scale-down, or the pool's deletion, marks the shards that go draining and
// hands their markets to the other live shards by the planned handoff before the StatefulSet loses
// them (docs/kubernetes.md, "Shard pools").
package controllers
