package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testValues are the values files of testdata/ that every test renders besides the defaults.
var testValues = []string{"values-production.yaml", "values-external-url.yaml"}

func TestLint(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{"default values": nil}
	for _, f := range testValues {
		cases[f] = []string{"-f", valuesFile(f)}
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := mustHelm(t, "", append([]string{"lint", "--strict", chartDir}, args...)...)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
	t.Run("bad value", func(t *testing.T) {
		t.Parallel()
		r := runHelm(t, "", "lint", "--strict", chartDir, "--set-string", "shard.replicas=three")
		if r.err == nil || !strings.Contains(r.stdout+r.stderr, "/shard/replicas") {
			t.Fatalf("helm lint accepted shard.replicas=three (%v):\n%s%s", r.err, r.stdout, r.stderr)
		}
	})
}

// values.schema.json rejects, before anything renders, values of the wrong type, unknown keys and
// values outside their enums or patterns, and says which value is wrong.
func TestSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		values string // a values file
		want   []string
	}{
		{"replicas as a word", `shard: {replicas: "three"}`, []string{"at '/shard/replicas'", "want integer"}},
		{"negative replicas", `api: {replicas: -1}`, []string{"at '/api/replicas'", "minimum"}},
		{"misspelt top-level key", `shards: {replicas: 3}`, []string{"additional properties 'shards' not allowed"}},
		{"misspelt nested key", `api: {replica: 3}`, []string{"at '/api'", "additional properties 'replica' not allowed"}},
		{"pull policy", `image: {pullPolicy: Sometimes}`, []string{"at '/image/pullPolicy'", "'Always', 'IfNotPresent', 'Never'"}},
		{"log level", `logLevel: verbose`, []string{"at '/logLevel'"}},
		{"service type", `api: {service: {type: External}}`, []string{"at '/api/service/type'"}},
		{"service port", `api: {service: {port: 70000}}`, []string{"at '/api/service/port'"}},
		{"duration without unit", `operator: {shardTTL: "5"}`, []string{"at '/operator/shardTTL'"}},
		{"resource quantity", `shard: {resources: {requests: {cpu: lots}}}`, []string{"at '/shard/resources/requests/cpu'"}},
		{"disruption budget", `shard: {podDisruptionBudget: {maxUnavailable: half}}`, []string{"at '/shard/podDisruptionBudget/maxUnavailable'"}},
		{"path type", `api: {ingress: {enabled: true, hosts: [{host: a.example.com, paths: [{path: /, pathType: Everything}]}]}}`,
			[]string{"at '/api/ingress/hosts/0/paths/0/pathType'"}},
		{"password needing escapes", `postgres: {password: "p@ss word"}`, []string{"at '/postgres/password'"}},
		{"database URL scheme", `{postgres: {enabled: false}, database: {url: "mysql://db/pmx"}}`, []string{"at '/database/url'"}},
		{"env without a name", `api: {extraEnv: [{value: x}]}`, []string{"at '/api/extraEnv/0'", "missing property 'name'"}},
		{"boolean as a string", `serviceMonitor: {enabled: "yes"}`, []string{"at '/serviceMonitor/enabled'", "want boolean"}},
		{"short admin token", `secrets: {adminToken: "admin-token-of-31-characters-xx"}`, []string{"at '/secrets/adminToken'"}},
		{"network policy as a string", `networkPolicy: {enabled: "no"}`, []string{"at '/networkPolicy/enabled'", "want boolean"}},
		{"disruption budget's minimum", `api: {podDisruptionBudget: {minAvailable: most}}`, []string{"at '/api/podDisruptionBudget/minAvailable'"}},
		{"priority class as a number", `priorityClassName: 1000`, []string{"at '/priorityClassName'"}},
		{"alert threshold as a word", `prometheusRule: {thresholds: {errorRatio: high}}`, []string{"at '/prometheusRule/thresholds/errorRatio'"}},
		{"rebalancing's fraction of none", `operator: {rebalance: {maxFraction: 0}}`, []string{"at '/operator/rebalance/maxFraction'"}},
		{"rebalancing's margin below zero", `operator: {rebalance: {margin: -1}}`, []string{"at '/operator/rebalance/margin'"}},
		{"alert delay without unit", `prometheusRule: {for: {marketPastClose: "5"}}`, []string{"at '/prometheusRule/for/marketPastClose'"}},
		{"shutdown delay without unit", `api: {shutdownDelay: 5}`, []string{"at '/api/shutdownDelay'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(c.values+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := runHelm(t, "", "template", "x", chartDir, "-f", file)
			if r.err == nil {
				t.Fatalf("helm template accepted %s", c.values)
			}
			for _, want := range append([]string{"values don't meet the specifications of the schema"}, c.want...) {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("helm template with %s failed without %q:\n%s", c.values, want, r.stderr)
				}
			}
		})
	}
}

// Choices the schema cannot express fail the render with a message that says what to set.
func TestTemplateRejectsInconsistentValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no database", []string{"--set", "postgres.enabled=false"}, "no database: set database.url or database.existingSecret"},
		{"two databases", []string{"--set", "database.url=postgres://db/pmx"}, "choose the bundled Postgres or an external one"},
		{"URL and Secret", []string{"--set", "postgres.enabled=false,database.url=postgres://db/pmx,database.existingSecret=db"}, "database.url and database.existingSecret are both set"},
		{"no service account", []string{"--set", "operator.serviceAccount.create=false"}, "operator.serviceAccount.name is required"},
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
