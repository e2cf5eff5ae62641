package shard

import "github.com/pmx-dev/pmx/internal/exchange"

// A Shard, and a Set of them, carry out the exchange contract.
var (
	_ exchange.Exchange = (*Shard)(nil)
	_ exchange.Exchange = (*Set)(nil)
)
