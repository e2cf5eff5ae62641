// Command metricscheck prints the metric names PromQL expressions select, read with Prometheus's
// own PromQL parser at the version of the promtool the Makefile pins. It reads a JSON array of
// expressions on stdin and writes a JSON array of the same length, each element the names one
// expression selects (sorted, without repeats); an expression that does not parse is an error,
// naming it. internal/charttest gives it every query of the chart's alerts and of the Grafana
// dashboard, and checks every name against what a running pmx exports.
//
// It is a module of its own so that the pmx module takes on none of the Prometheus server's
// module and the upgrades of shared dependencies (client_golang, x/..., protobuf) that requiring
// it brings; and it is a small command, not the test, so that building it cold compiles only the
// PromQL parser and its few dependencies, at the versions promtool's own build compiles them,
// while the test that scrapes pmx builds in the pmx module on `make test`'s cache.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "metricscheck:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var exprs []string
	if err := json.NewDecoder(in).Decode(&exprs); err != nil {
		return fmt.Errorf("reading a JSON array of PromQL expressions on stdin: %w", err)
	}
	names := make([][]string, len(exprs))
	for i, expr := range exprs {
		var err error
		if names[i], err = selected(expr); err != nil {
			return fmt.Errorf("%q: %w", expr, err)
		}
	}
	return json.NewEncoder(out).Encode(names)
}

// selected are the metric names expr's vector selectors (a range's included) name, sorted.
func selected(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	names := []string{}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), nil
}
