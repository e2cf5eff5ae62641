package exchange_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pmx-dev/pmx/"

// deps lists the packages pkg links, itself included, leaving out the standard library's.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+pkg).Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	list := strings.Fields(string(out))
	if !slices.Contains(list, module+pkg) {
		t.Fatalf("go list -deps %s does not list the package itself: %q", pkg, list)
	}
	return list
}

// The contract links the vocabulary it is spelt in and nothing else: not the shard that carries it
// out, not the store, not the database driver (docs/architecture.md §1). A package added here
// should be vocabulary too, light enough for every speaker of the contract to link.
func TestContractLinksOnlyVocabulary(t *testing.T) {
	allowed := []string{
		module + "internal/exchange",
		module + "internal/records",
		module + "internal/domain",
		module + "engine", // the order terms (Side, Outcome, Status, ...) and book depth; the standard library alone
		"github.com/google/uuid",
	}
	for _, pkg := range []string{"internal/exchange", "internal/records"} {
		var extra []string
		for _, dep := range deps(t, pkg) {
			if !slices.Contains(allowed, dep) {
				extra = append(extra, dep)
			}
		}
		if len(extra) > 0 {
			t.Errorf("%s links %s; the contract and its rows may link only %s", pkg, strings.Join(extra, ", "), strings.Join(allowed, ", "))
		}
	}
}

// What speaks the contract does not link what implements it: the front API and the internal
// API's router (internal/shardclient) and server (internal/shardserver) talk to an Exchange, never
// to the shard's books and batch committer (internal/shard), and the front API not to the router
// either, which
// cmd/pmx hands it as its Exchange in distributed mode. The operator's controllers ask only for
// lifecycle changes, through an interface of their own that the router satisfies, and link neither.
func TestSpeakersLinkNoImplementation(t *testing.T) {
	for _, tc := range []struct {
		pkg       string
		forbidden []string
		speaks    bool // links internal/exchange
	}{
		{"apiserver", []string{"internal/shard", "internal/shardclient", "internal/shardserver"}, true},
		{"internal/shardclient", []string{"internal/shard", "internal/shardserver"}, true},
		{"internal/shardserver", []string{"internal/shard", "internal/shardclient"}, true},
		{"controllers", []string{"internal/shard", "internal/shardclient", "internal/shardserver"}, false},
	} {
		list := deps(t, tc.pkg)
		if tc.speaks && !slices.Contains(list, module+"internal/exchange") {
			t.Errorf("%s does not link internal/exchange: does it still speak the contract?", tc.pkg)
		}
		for _, f := range tc.forbidden {
			if slices.Contains(list, module+f) {
				t.Errorf("%s links %s, an implementation of the exchange contract: speak internal/exchange instead", tc.pkg, f)
			}
		}
	}
}

// A shard links no Kubernetes package (issue 52): the lifecycle rules it shares with the operator
// (internal/market) are plain Go, and the Market CRD's spec is internal/market/marketspec's, which
// only the operator and the standalone admin API link. The shard's server and the router are held
// to the same. pmx is one binary with the operator in it, so the test is of the packages, not of
// cmd/pmx.
func TestShardLinksNoKubernetes(t *testing.T) {
	for _, pkg := range []string{"internal/shard", "internal/shardserver", "internal/shardclient", "internal/shardproto", "internal/market"} {
		for _, dep := range deps(t, pkg) {
			if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") || dep == module+"api/v1alpha1" {
				t.Errorf("%s links %s: a shard links no Kubernetes package nor the CRDs' types", pkg, dep)
			}
		}
	}
}

// Each layer imports only the layers below it: the public API's JSON shapes (internal/apijson),
// the rows (internal/records) and the internal protocol (internal/shardproto) are spoken by the
// servers and never link one, nor the shard that implements the contract.
func TestLayersImportOnlyBelow(t *testing.T) {
	servers := []string{"apiserver", "controllers", "internal/shard", "internal/shardserver", "internal/shardclient",
		"internal/pages/marketpages", "cmd/pmx"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"internal/apijson", append([]string{"internal/store"}, servers...)},
		{"internal/records", append([]string{"internal/store"}, servers...)},
		{"internal/shardproto", servers},
	} {
		list := deps(t, tc.pkg)
		for _, f := range tc.forbidden {
			if slices.Contains(list, module+f) {
				t.Errorf("%s links %s, a layer above it", tc.pkg, f)
			}
		}
	}
}
