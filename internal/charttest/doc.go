// Package charttest tests the Helm chart charts/pmx with the helm binary the Makefile pins: lint,
// schema, rendered objects, and every rendered object applied to a real kube-apiserver (server-side
// dry run, then a real install and upgrades); the chart's alerts under promtool; and that every
// metric its alerts and Grafana dashboard query is one a running pmx exports. It holds only tests.
package charttest
