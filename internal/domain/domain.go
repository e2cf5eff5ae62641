// Package domain holds the exchange's vocabulary that more than one layer speaks: the refusals a
// trading request can meet (errors.go), a market's statuses and the lifecycle actions that move it
// (market.go). The matching rules themselves live in package engine, the lifecycle rules in
// package market; domain only names their inputs and outcomes, once, so that the shard that
// decides, the internal protocol that carries a decision and the API that answers it all use the
// same value — and so that the exchange contract (package exchange) names them without linking
// the rules' own dependencies (package market records markets in Postgres).
package domain
