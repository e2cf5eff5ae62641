package v1alpha1

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests run the ShardPool's CRD through the apiserver's own code, as crd_test.go does the
// Market's: the schema, its defaults and its CEL rules on create.

// poolManifest is a ShardPool named name with the given spec lines (unindented YAML) after the
// two Secrets' keys it needs.
func poolManifest(name, spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: pmx.dev/v1alpha1\nkind: ShardPool\nmetadata:\n  name: " + name + "\nspec:\n")
	spec = "image: pmx:dev\ndatabaseURL: {name: pmx-postgres, key: database-url}\ninternalToken: {name: pmx-tokens, key: internal-token}\n" + spec
	for line := range strings.Lines(strings.TrimSpace(spec) + "\n") {
		b.WriteString("  " + line)
	}
	return b.String()
}

func TestShardPoolCRDCreate(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_shardpools.yaml")
	for _, tc := range []struct {
		name, pool, spec, wantErr string // wantErr "" when valid
	}{
		{"minimal", "default", "", ""},
		{"every field", "fast", `
replicas: 4
imagePullPolicy: IfNotPresent
imagePullSecrets: [{name: registry}]
args: [--log-level=debug, --shards=4]
env: [{name: GOGC, value: "200"}]
resources: {requests: {cpu: "2", memory: 1Gi}, limits: {memory: 2Gi}}
nodeSelector: {pmx.dev/role: matching}
tolerations: [{key: dedicated, operator: Equal, value: pmx, effect: NoSchedule}]
affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {pmx.dev/shard-pool: fast}}}}]}}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {pmx.dev/shard-pool: fast}}}]
priorityClassName: pmx-critical
serviceAccountName: pmx-shard
terminationGracePeriodSeconds: 60
podMetadata: {labels: {team: markets}, annotations: {checksum/config: abc}}
podDisruptionBudget: {maxUnavailable: 25%}`, ""},
		{"zero replicas", "default", "replicas: 0", ""},
		{"dedicated shards", "hot", "replicas: 0\nmaxDedicatedShards: 2", ""},
		{"negative dedicated shards", "hot", "maxDedicatedShards: -1", "spec.maxDedicatedShards"},
		{"args set the pool", "default", "args: [--pool=hot]", "args cannot set"},
		{"env sets the pool", "default", "env: [{name: PMX_SHARD_POOL, value: hot}]", "env cannot set"},
		{"minAvailable", "default", "podDisruptionBudget: {minAvailable: 2}", ""},

		{"negative replicas", "default", "replicas: -1", "spec.replicas"},
		{"both budgets", "default", "podDisruptionBudget: {maxUnavailable: 1, minAvailable: 1}", "set at most one of maxUnavailable and minAvailable"},
		{"budget not a percentage", "default", "podDisruptionBudget: {maxUnavailable: half}", "maxUnavailable must be a number of pods"},
		{"negative budget", "default", "podDisruptionBudget: {minAvailable: -1}", "minAvailable must be a number of pods"},
		{"args set the name", "default", "args: [--name=x]", "args cannot set"},
		{"args set the address", "default", "args: [--addr, ':1']", "args cannot set"},
		{"args set the database", "default", "args: [-database-url=postgres://x]", "args cannot set"},
		{"env sets the name", "default", "env: [{name: PMX_SHARD_NAME, value: x}]", "env cannot set"},
		{"env sets the token", "default", "env: [{name: PMX_INTERNAL_TOKEN, value: x}]", "env cannot set"},
		{"pull policy", "default", "imagePullPolicy: Sometimes", "spec.imagePullPolicy"},
		{"no image", "default", "image: ''", "spec.image"},
		{"name too long", strings.Repeat("p", MaxShardPoolNameLength+1), "", "at most 46 characters"},
		{"name starts with a digit", "1pool", "", "must start with a letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, poolManifest(tc.pool, tc.spec))
			if tc.name == "no image" {
				obj["spec"].(map[string]any)["image"] = ""
			}
			errs := c.create(t, obj)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("rejected: %v", errs.ToAggregate())
			case tc.wantErr != "" && len(errs) == 0:
				t.Errorf("accepted, want an error about %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("error %v, want one about %q", errs.ToAggregate(), tc.wantErr)
			}
		})
	}

	obj := object(t, poolManifest(strings.Repeat("p", MaxShardPoolNameLength), ""))
	if errs := c.create(t, obj); len(errs) > 0 {
		t.Fatalf("a pool named with %d characters: %v", MaxShardPoolNameLength, errs.ToAggregate())
	}
	if got := obj["spec"].(map[string]any)["replicas"]; got != int64(DefaultShardPoolReplicas) {
		t.Errorf("default replicas %v, want %d", got, DefaultShardPoolReplicas)
	}
	if n := len(ShardPoolStatefulSetName(strings.Repeat("p", MaxShardPoolNameLength))); n != 52 {
		t.Errorf("the longest pool's StatefulSet name has %d characters, want 52", n)
	}
}

func TestShardPoolCRDNames(t *testing.T) {
	def := loadCRDFile(t, "pmx.dev_shardpools.yaml").def
	n := def.Spec.Names
	if def.Name != "shardpools.pmx.dev" || n.Kind != "ShardPool" || n.Plural != "shardpools" || !slices.Equal(n.ShortNames, []string{"spool"}) {
		t.Errorf("CRD %s, names %+v", def.Name, n)
	}
	v := def.Spec.Versions[0]
	scale := v.Subresources.Scale
	if v.Subresources.Status == nil || scale == nil || scale.SpecReplicasPath != ".spec.replicas" || scale.StatusReplicasPath != ".status.replicas" ||
		scale.LabelSelectorPath == nil || *scale.LabelSelectorPath != ".status.selector" {
		t.Errorf("subresources %+v: want status, and scale on .spec.replicas, .status.replicas and .status.selector", v.Subresources)
	}
	props := v.Schema.OpenAPIV3Schema.Properties
	want := []string{"conditions", "dedicatedShards", "drainingShards", "liveShards", "markets", "observedGeneration", "ordersPerSecond", "readyReplicas", "replicas", "selector", "statefulSet"}
	if got := slices.Sorted(maps.Keys(props["status"].Properties)); !slices.Equal(got, want) {
		t.Errorf("status fields %v, want %v", got, want)
	}
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		if c.Priority == 0 {
			columns = append(columns, c.Name+"="+c.JSONPath)
		}
	}
	wantColumns := []string{"Desired=.spec.replicas", "Ready=.status.readyReplicas", "Live=.status.liveShards", "Markets=.status.markets",
		"Orders/s=.status.ordersPerSecond", `Draining=.status.conditions[?(@.type=="Draining")].status`, "Age=.metadata.creationTimestamp"}
	if !slices.Equal(columns, wantColumns) {
		t.Errorf("kubectl get columns\n%v\nwant\n%v", columns, wantColumns)
	}
}

// TestShardPoolSamples checks config/samples/shardpools: each file a ShardPool the CRD accepts.
func TestShardPoolSamples(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_shardpools.yaml")
	dir := filepath.Join(repoRoot(t), "config", "samples", "shardpools")
	files := globNames(t, dir, "*.yaml")
	if len(files) == 0 {
		t.Fatal("no sample shard pools")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if errs := c.create(t, object(t, string(data))); len(errs) > 0 {
			t.Errorf("%s: the CRD rejects it: %v", f, errs.ToAggregate())
		}
	}
}
