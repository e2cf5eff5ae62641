package exchange

// Shard is what a shard process serves on its internal API (shardserver.Server): the contract, and
// the planned handoff of its markets, which only a shard carries out (the router sends it).
type Shard interface {
	Exchange
	Handoff
}
