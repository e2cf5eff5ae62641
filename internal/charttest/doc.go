// Package charttest tests the Helm chart charts/pmx with the helm binary the Makefile pins: lint,
// schema, rendered objects, and every rendered object applied to a real kube-apiserver (server-side
// dry run, then a real install and upgrades); the chart's alerts under promtool; and that every
// metric its alerts and Grafana dashboard query is one a running pmx exports, and that the
// dashboard's panels come back filled from a real Prometheus scraping a run under load (drawn in
// Chromium for the README's screenshot). It holds only tests.
package charttest
