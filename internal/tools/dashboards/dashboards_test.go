package dashboards

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedDashboardIsCurrent fails when charts/pmx/dashboards holds another dashboard than
// this package builds, so that a change to a panel cannot land without `go generate
// ./internal/tools/dashboards`.
func TestCommittedDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "pmx", "dashboards", File))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("charts/pmx/dashboards/%s is stale: run `go generate ./internal/tools/dashboards` and commit the result", File)
	}
}

// TestQueriesSelectTheRelease checks every query of the dashboard: each selects its series by
// the namespace and release variables (a query without them would mix another release's series
// into this one's panels) and none is empty.
func TestQueriesSelectTheRelease(t *testing.T) {
	d, err := Overview()
	if err != nil {
		t.Fatal(err)
	}
	qs := Queries(d)
	if len(qs) < 20 {
		t.Fatalf("%d queries, want the overview's 20 or more", len(qs))
	}
	for _, q := range qs {
		if !strings.Contains(q, `namespace="$namespace"`) || !strings.Contains(q, `$release-`) {
			t.Errorf("query %s does not select the namespace and release chosen", q)
		}
	}
	for _, p := range d.Panels {
		if p.Panel != nil && p.Panel.Type != "row" && len(p.Panel.Targets) == 0 {
			t.Errorf("panel %v has no query", p.Panel.Title)
		}
	}
}
