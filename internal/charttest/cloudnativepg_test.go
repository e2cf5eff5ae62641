package charttest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cnpgArgs install the chart on CloudNativePG in a cluster that has its API.
var cnpgArgs = []string{"--set", "postgres.enabled=false,database.cloudnativepg.enabled=true", "--api-versions", "postgresql.cnpg.io/v1"}

// database.cloudnativepg.enabled renders a CloudNativePG Cluster — three instances, a synchronous
// standby required for every commit, one instance per node, resources — and every pmx process
// reads its database URL from the Secret CloudNativePG generates for it, whose uri names the
// Cluster's -rw Service.
func TestTemplateCloudNativePG(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "exchange", "markets", cnpgArgs...)
	checkConsistent(t, r, "pmx:dev", []string{"exchange-pmx-db-app"})

	if n := len(r.ofKind("StatefulSet")); n != 0 {
		t.Errorf("%d StatefulSets, want none (no bundled Postgres; the shards are the operator's pool's)", n)
	}
	m := r.find("Cluster", "exchange-pmx-db")
	if m == nil {
		t.Fatal("no Cluster exchange-pmx-db rendered")
	}
	if m.obj.GetAPIVersion() != "postgresql.cnpg.io/v1" {
		t.Errorf("Cluster apiVersion %q, want postgresql.cnpg.io/v1", m.obj.GetAPIVersion())
	}
	spec := m.obj.Object["spec"].(map[string]any)
	want := map[string]any{
		"instances":                             float64(3),
		"postgresql.synchronous.method":         "any",
		"postgresql.synchronous.number":         float64(1),
		"postgresql.synchronous.dataDurability": "required",
		"bootstrap.initdb.database":             "pmx",
		"bootstrap.initdb.owner":                "pmx",
		"storage.size":                          "10Gi",
		"affinity.enablePodAntiAffinity":        true,
		"affinity.podAntiAffinityType":          "required",
		"affinity.topologyKey":                  "kubernetes.io/hostname",
		"resources.requests.cpu":                "500m",
		"resources.requests.memory":             "1Gi",
		"resources.limits.memory":               "1Gi",
	}
	for path, v := range want {
		got, ok, err := unstructured.NestedFieldNoCopy(spec, strings.Split(path, ".")...)
		if err != nil || !ok || got != v {
			t.Errorf("Cluster spec.%s = %v (%T), want %v", path, got, got, v)
		}
	}
	ws := workloads(t, r)
	if len(ws) != 3 {
		t.Errorf("%d workloads, want the operator, the API and the shards", len(ws))
	}
	for _, w := range ws {
		ev, ok := envByName(w.pod.Containers[0].Env)["PMX_DATABASE_URL"]
		if !ok || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil ||
			ev.ValueFrom.SecretKeyRef.Name != "exchange-pmx-db-app" || ev.ValueFrom.SecretKeyRef.Key != "uri" {
			t.Errorf("%s reads PMX_DATABASE_URL from %+v, want Secret exchange-pmx-db-app key uri", w.name, ev.ValueFrom)
		}
		for _, c := range w.pod.InitContainers {
			if c.Name == "wait-for-postgres" {
				t.Errorf("%s waits for the bundled Postgres, which is not installed", w.name)
			}
		}
	}

	// Options reach the Cluster.
	r = renderChart(t, "exchange", "markets", append(cnpgArgs, "--set",
		"database.cloudnativepg.name=pg,database.cloudnativepg.instances=5,database.cloudnativepg.synchronousStandbys=2,"+
			"database.cloudnativepg.antiAffinity.type=preferred,database.cloudnativepg.storage.storageClass=fast,"+
			"database.cloudnativepg.imageName=registry.example/postgres:17")...)
	m = r.find("Cluster", "pg")
	if m == nil {
		t.Fatal("no Cluster pg rendered")
	}
	spec = m.obj.Object["spec"].(map[string]any)
	for path, v := range map[string]any{
		"instances": float64(5), "postgresql.synchronous.number": float64(2), "affinity.podAntiAffinityType": "preferred",
		"storage.storageClass": "fast", "imageName": "registry.example/postgres:17",
	} {
		if got, _, _ := unstructured.NestedFieldNoCopy(spec, strings.Split(path, ".")...); got != v {
			t.Errorf("Cluster spec.%s = %v, want %v", path, got, v)
		}
	}
	for _, w := range workloads(t, r) {
		if ref := envByName(w.pod.Containers[0].Env)["PMX_DATABASE_URL"].ValueFrom.SecretKeyRef; ref.Name != "pg-app" {
			t.Errorf("%s reads its database URL from %s, want pg-app", w.name, ref.Name)
		}
	}
	if kinds := kindCounts(r); kinds["Cluster"] != 1 || kinds["Secret"] != 1 {
		t.Errorf("rendered kinds %v, want one Cluster and the tokens' Secret only", kinds)
	}
}

// The chart refuses a CloudNativePG Cluster that nothing would act on, and a second database.
func TestTemplateCloudNativePGRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no CloudNativePG API", []string{"--set", "postgres.enabled=false,database.cloudnativepg.enabled=true"},
			"the cluster has no postgresql.cnpg.io/v1 API: install the CloudNativePG operator first"},
		{"and the bundled Postgres", []string{"--set", "database.cloudnativepg.enabled=true", "--api-versions", "postgresql.cnpg.io/v1"},
			"choose one database"},
		{"and a URL", []string{"--set", "postgres.enabled=false,database.cloudnativepg.enabled=true,database.url=postgres://db/pmx", "--api-versions", "postgresql.cnpg.io/v1"},
			"choose one database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runHelm(t, "", append([]string{"template", "x", chartDir}, c.args...)...)
			if r.err == nil || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("helm template %s: %v, want a failure saying %q:\n%s", strings.Join(c.args, " "), r.err, c.want, r.stderr)
			}
		})
	}
}
