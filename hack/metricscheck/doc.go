// Package metricscheck holds one test: that every metric the chart's alerts and the Grafana
// dashboard query is one pmx actually exports, scraped from a running `pmx dev` and from the
// distributed processes (pmx operator, pmx shard, pmx api). It reads the queries with Prometheus's
// own PromQL parser, at the version of the promtool the Makefile pins.
//
// It is a module of its own so that the pmx module does not take on the Prometheus server's
// module and the many upgrades of shared dependencies (client_golang, otel, grpc, x/...) that
// requiring it brings; it runs pmx built from the pmx module itself. `make test` runs it.
package metricscheck
