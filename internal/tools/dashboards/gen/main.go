// Command gen writes pmx's Grafana dashboards (package dashboards) into the folder it is given:
// `go generate ./internal/tools/dashboards` runs it on charts/pmx/dashboards.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pmx-dev/pmx/internal/tools/dashboards"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen <folder>")
		os.Exit(2)
	}
	out, err := dashboards.JSON()
	if err == nil {
		err = os.WriteFile(filepath.Join(os.Args[1], dashboards.File), out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
