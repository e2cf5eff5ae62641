// Package engine owns the order book and matching of a pmx market.
//
// One Book holds one market's resting orders in YES terms: a YES bid at p and a NO ask at 100−p
// are the same thing (docs/architecture.md §3), so there is exactly one book with 99 price levels
// per side. Matching is price-time priority at the maker's price, with self-trade prevention.
//
// Orders are limit orders. Each has a time in force — GTC and GTD rest what does not fill, IOC
// cancels it, FOK fills entirely or not at all — and may be post-only, refused rather than let
// trade on arrival. Its self-trade mode says whether meeting its own account's resting order
// cancels that order or the incoming one. The engine owns these rules; its caller owns time, so
// it expires GTD orders itself.
//
// The package does no I/O, starts no goroutines and takes no locks: a Book is driven by exactly one
// goroutine (the market's). Every call is deterministic — the same sequence of calls gives the same
// results — and time never enters it: callers stamp what they persist.
//
// A submission's Result carries everything a caller needs to persist it as one unit: the order's new
// state, each fill in order, and for both sides of every fill the signed changes to available cash,
// locked cash, shares and locked shares (see Leg). The caller reserves an order's cash or shares before
// it submits the order; applying a Result's effects therefore can never fail for a business reason.
package engine
