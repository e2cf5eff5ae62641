// Package domain holds the exchange's vocabulary that more than one layer speaks: the refusals a
// trading request can meet (errors.go). The matching rules themselves live in package engine, the
// lifecycle rules in package market; domain only names their outcomes, once, so that the shard
// that decides, the internal protocol that carries a decision and the API that answers it all use
// the same value.
package domain
