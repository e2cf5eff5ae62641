package charttest

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/controllers"
	"github.com/pmx-dev/pmx/internal/k8stest"
)

// The default install: the bundled Postgres, generated tokens, two API replicas and two shards.
func TestTemplateDefault(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "pmx", "exchange")
	checkConsistent(t, r, "pmx:dev", nil)

	wantKinds := map[string]int{
		"ServiceAccount": 1, "Secret": 2, "ClusterRole": 3, "ClusterRoleBinding": 1, "Role": 1,
		"RoleBinding": 1, "Service": 5, "Deployment": 2, "StatefulSet": 1, "PodDisruptionBudget": 1,
		"Lease": 1, "NetworkPolicy": 3, "ShardPool": 1,
	}
	if got := kindCounts(r); !maps.Equal(got, wantKinds) {
		t.Errorf("rendered kinds %v, want %v", got, wantKinds)
	}

	// The generated secrets: 32 characters each, and the URL the pods use carries the password
	// that Postgres is initialized with.
	tokens := decode[corev1.Secret](t, r, "Secret", "pmx-tokens")
	for _, key := range []string{"admin-token", "internal-token"} {
		if v := secretData(t, tokens, key); !regexp.MustCompile(`^[A-Za-z0-9]{32}$`).MatchString(v) {
			t.Errorf("pmx-tokens %s = %q, want 32 generated letters and digits", key, v)
		}
	}
	pg := decode[corev1.Secret](t, r, "Secret", "pmx-postgres")
	password := secretData(t, pg, "password")
	u, err := url.Parse(secretData(t, pg, "database-url"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := u.User.Password(); u.Scheme != "postgres" || u.User.Username() != "pmx" || p != password ||
		u.Host != "pmx-postgres:5432" || u.Path != "/pmx" {
		t.Errorf("database-url = %s, want postgres://pmx:<password>@pmx-postgres:5432/pmx", u.Redacted())
	}
	if pg.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the Postgres Secret is not kept by helm uninstall: a reinstall would lose the volume's password")
	}

	api := decode[appsv1.Deployment](t, r, "Deployment", "pmx-api")
	if api.Spec.Replicas == nil || *api.Spec.Replicas != 2 {
		t.Errorf("pmx-api replicas %v, want 2", api.Spec.Replicas)
	}
	checkArgs(t, "pmx-api", api.Spec.Template.Spec.Containers[0].Args, "api", "--addr=:8080", "--metrics-addr=:9090", "--log-level=info", "--shutdown-delay=5s")
	if _, ok := envByName(api.Spec.Template.Spec.Containers[0].Env)["PMX_TRUSTED_PROXIES"]; ok {
		t.Error("PMX_TRUSTED_PROXIES is set by default: X-Forwarded-For must be ignored unless proxies are named")
	}

	// The shards: a ShardPool the operator runs, by default; the chart's own StatefulSet with
	// shardPool.enabled=false.
	if g := checkPoolShards(t, r, 2).TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("the pool's shards' terminationGracePeriodSeconds %v, want 30 (time to drain and hand markets back)", g)
	}
	chartShards := renderChart(t, "pmx", "exchange", "--set", "shardPool.enabled=false")
	checkConsistent(t, chartShards, "pmx:dev", nil)
	shards := decode[appsv1.StatefulSet](t, chartShards, "StatefulSet", "pmx-shard")
	checkShards(t, shards, 2, "pmx-shard", "exchange")
	if g := shards.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("shards' terminationGracePeriodSeconds %v, want 30 (time to drain and hand markets back)", g)
	}
	if chartShards.find("ShardPool", "default") != nil {
		t.Error("shardPool.enabled=false renders a ShardPool")
	}

	op := decode[appsv1.Deployment](t, r, "Deployment", "pmx-operator")
	checkArgs(t, "pmx-operator", op.Spec.Template.Spec.Containers[0].Args, "operator",
		"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--leader-elect=true",
		"--leader-election-namespace=exchange", "--shard-ttl=5s", "--resync=2s",
		"--rebalance=true", "--rebalance-margin=0.2", "--rebalance-interval=5s", "--rebalance-cooldown=1m", "--rebalance-max-fraction=0.1",
		"--log-level=info")
	if op.Spec.Template.Spec.ServiceAccountName != "pmx-operator" {
		t.Errorf("operator ServiceAccount %q, want pmx-operator", op.Spec.Template.Spec.ServiceAccountName)
	}

	// Every pmx pod waits for the bundled Postgres before it starts; the pool's shards need not:
	// the operator, which waits, makes their StatefulSet only once it has reached Postgres.
	for _, w := range workloads(t, chartShards) {
		if w.name == "pmx-postgres" {
			continue
		}
		if len(w.pod.InitContainers) != 1 || w.pod.InitContainers[0].Name != "wait-for-postgres" {
			t.Errorf("%s: init containers %v, want wait-for-postgres", w.name, containerNames(w.pod.InitContainers))
		}
	}
	db := decode[appsv1.StatefulSet](t, r, "StatefulSet", "pmx-postgres")
	if n := len(db.Spec.VolumeClaimTemplates); n != 1 || db.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Errorf("pmx-postgres volume claims %v, want one of 2Gi", db.Spec.VolumeClaimTemplates)
	}

	// The operator may do what controllers.MarketReconciler's RBAC markers ask for, and no more.
	checkOperatorRBAC(t, r, "pmx-operator", "pmx-operator-leader-election")
}

// A production-shaped install (testdata/values-production.yaml).
func TestTemplateProduction(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "ex", "trading", "-f", valuesFile("values-production.yaml"))
	checkConsistent(t, r, "registry.example.com/pmx/pmx:1.4.2", []string{"pmx-database"})

	wantKinds := map[string]int{
		"ServiceAccount": 1, "Secret": 1, "ClusterRole": 3, "ClusterRoleBinding": 1, "Role": 1,
		"RoleBinding": 1, "Service": 3, "Deployment": 2, "ShardPool": 1, "PodDisruptionBudget": 1,
		"HorizontalPodAutoscaler": 1, "Ingress": 1, "ServiceMonitor": 3, "Lease": 1, "NetworkPolicy": 2,
	}
	if got := kindCounts(r); !maps.Equal(got, wantKinds) {
		t.Errorf("rendered kinds %v, want %v", got, wantKinds)
	}

	// Tokens as given; the database URL from the platform's Secret; no wait for a bundled Postgres.
	tokens := decode[corev1.Secret](t, r, "Secret", "ex-pmx-tokens")
	if a, i := secretData(t, tokens, "admin-token"), secretData(t, tokens, "internal-token"); a != "admin-0123456789abcdef0123456789abcdef" || i != "internal-0123456789abcdef" {
		t.Errorf("tokens %q and %q, want the values given", a, i)
	}
	for _, w := range workloads(t, r) {
		env := envByName(w.pod.Containers[0].Env)
		if ref := env["PMX_DATABASE_URL"].ValueFrom.SecretKeyRef; ref.Name != "pmx-database" || ref.Key != "url" {
			t.Errorf("%s reads the database URL from %s/%s, want pmx-database/url", w.name, ref.Name, ref.Key)
		}
		if len(w.pod.InitContainers) != 0 {
			t.Errorf("%s has init containers %v with an external database", w.name, containerNames(w.pod.InitContainers))
		}
		if got := w.pod.ImagePullSecrets; len(got) != 1 || got[0].Name != "registry-example-com" {
			t.Errorf("%s imagePullSecrets %v", w.name, got)
		}
	}

	// The front API: autoscaled (so no replica count of its own), its values' resources, an
	// ingress for two hosts with TLS, a LoadBalancer Service on 8080.
	api := decode[appsv1.Deployment](t, r, "Deployment", "ex-pmx-api")
	if api.Spec.Replicas != nil {
		t.Errorf("ex-pmx-api has replicas %d while the autoscaler owns the count", *api.Spec.Replicas)
	}
	c := api.Spec.Template.Spec.Containers[0]
	checkResources(t, "ex-pmx-api", c.Resources, "500m", "256Mi", "2", "1Gi")
	checkArgs(t, "ex-pmx-api", c.Args, "api", "--addr=:8080", "--metrics-addr=:9090", "--log-level=warn", "--shutdown-delay=15s", "--grant=500000")
	if _, ok := envByName(c.Env)["GOMAXPROCS"]; !ok {
		t.Error("api.extraEnv GOMAXPROCS is missing")
	}
	if got := envByName(c.Env)["PMX_TRUSTED_PROXIES"].Value; got != "10.0.0.0/8,fd00::/8" {
		t.Errorf("PMX_TRUSTED_PROXIES is %q, want api.trustedProxies joined", got)
	}
	if got := api.Spec.Template.Labels["example.com/tier"]; got != "front" {
		t.Errorf("api.podLabels not applied: %v", api.Spec.Template.Labels)
	}
	hpa := decode[autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", "ex-pmx-api")
	if hpa.Spec.ScaleTargetRef.Name != "ex-pmx-api" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 20 || len(hpa.Spec.Metrics) != 2 {
		t.Errorf("autoscaler %+v", hpa.Spec)
	}
	ing := decode[networkingv1.Ingress](t, r, "Ingress", "ex-pmx-api")
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.Rules) != 2 || len(ing.Spec.TLS) != 1 {
		t.Errorf("ingress %+v", ing.Spec)
	}
	svc := decode[corev1.Service](t, r, "Service", "ex-pmx-api")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("api Service %s ports %v, want LoadBalancer 8080 alone (the metrics have a ClusterIP Service of their own)", svc.Spec.Type, svc.Spec.Ports)
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", "ex-pmx-api")
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromString("25%") {
		t.Errorf("api PodDisruptionBudget maxUnavailable %v, want 25%%", pdb.Spec.MaxUnavailable)
	}

	// Five shards with their values' resources and scheduling.
	pod := checkPoolShards(t, r, 5)
	checkResources(t, "ShardPool default", pod.Containers[0].Resources, "1", "1Gi", "2", "2Gi")
	if pod.NodeSelector["example.com/pool"] != "matching" || len(pod.Tolerations) != 1 || pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Errorf("shard scheduling not applied: nodeSelector %v, tolerations %v, affinity %v", pod.NodeSelector, pod.Tolerations, pod.Affinity)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 45 {
		t.Errorf("shards' terminationGracePeriodSeconds %v, want 45", g)
	}

	op := decode[appsv1.Deployment](t, r, "Deployment", "ex-pmx-operator")
	if *op.Spec.Replicas != 2 || op.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("operator replicas %d, priority class %q", *op.Spec.Replicas, op.Spec.Template.Spec.PriorityClassName)
	}
	checkArgs(t, "ex-pmx-operator", op.Spec.Template.Spec.Containers[0].Args, "operator",
		"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--leader-elect=true",
		"--leader-election-namespace=trading", "--shard-ttl=10s", "--resync=1500ms",
		"--rebalance=true", "--rebalance-margin=0.3", "--rebalance-interval=10s", "--rebalance-cooldown=2m", "--rebalance-max-fraction=0.05",
		"--log-level=warn")
	checkResources(t, "ex-pmx-operator", op.Spec.Template.Spec.Containers[0].Resources, "100m", "128Mi", "1", "512Mi")

	// A ServiceMonitor per component, with the label the Prometheus selects and the interval;
	// checkConsistent checks that each scrapes its component's metrics Service.
	for _, sm := range r.ofKind("ServiceMonitor") {
		endpoints, _, _ := unstructured.NestedSlice(sm.obj.Object, "spec", "endpoints")
		if sm.obj.GetLabels()["release"] != "kube-prometheus-stack" || len(endpoints) != 1 ||
			endpoints[0].(map[string]any)["interval"] != "15s" || endpoints[0].(map[string]any)["scrapeTimeout"] != "10s" {
			t.Errorf("%s: labels %v, endpoints %v", sm, sm.obj.GetLabels(), endpoints)
		}
	}
	checkOperatorRBAC(t, r, "ex-pmx-operator", "ex-pmx-operator-leader-election")
}

// An external database by URL, tokens and operator ServiceAccount managed outside the chart.
// TestUpgradeKeepsPostgres renders the chart for two pmx versions, as `helm upgrade` to a new
// image tag does: the bundled Postgres's pod template must not change, or the upgrade restarts
// the database under the exchange.
func TestUpgradeKeepsPostgres(t *testing.T) {
	t.Parallel()
	var templates []any
	for _, tag := range []string{"1.4.2", "1.5.0"} {
		r := renderChart(t, "pmx", "exchange", "--set", "image.tag="+tag)
		m := r.find("StatefulSet", "pmx-postgres")
		if m == nil {
			t.Fatal("no StatefulSet pmx-postgres")
		}
		templates = append(templates, m.obj.Object["spec"].(map[string]any)["template"])
	}
	if !reflect.DeepEqual(templates[0], templates[1]) {
		t.Errorf("Postgres's pod template changes with pmx's image tag:\n%v\n%v", templates[0], templates[1])
	}
}

// The operator's leader-election Lease is the chart's, so that `helm uninstall` removes it; its
// name and namespace are those pmx operator elects with.
func TestTemplateLease(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "pmx", "exchange")
	m := r.find("Lease", "pmx-operator.pmx.dev")
	if m == nil || m.obj.GetNamespace() != "exchange" {
		t.Fatalf("no Lease pmx-operator.pmx.dev in the release's namespace")
	}
	dep := decode[appsv1.Deployment](t, r, "Deployment", "pmx-operator")
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--leader-elect=true") || !strings.Contains(args, "--leader-election-namespace=exchange") {
		t.Errorf("the operator does not elect in the release's namespace: %s", args)
	}
	if r := renderChart(t, "pmx", "exchange", "--set", "operator.leaderElect=false"); r.find("Lease", "pmx-operator.pmx.dev") != nil {
		t.Errorf("a Lease rendered with leaderElect=false")
	}
}

func TestTemplateExternalURL(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "exchange", "markets", "-f", valuesFile("values-external-url.yaml"))
	checkConsistent(t, r, "pmx:dev", []string{"exchange-tokens"})

	wantKinds := map[string]int{
		"Secret": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Service": 3, "Deployment": 2, "ShardPool": 1, "NetworkPolicy": 2,
	}
	if got := kindCounts(r); !maps.Equal(got, wantKinds) {
		t.Errorf("rendered kinds %v, want %v", got, wantKinds)
	}
	db := decode[corev1.Secret](t, r, "Secret", "exchange-pmx-database")
	if got := secretData(t, db, "database-url"); got != "postgres://pmx:s3cret@db.example.com:5432/pmx?sslmode=require" {
		t.Errorf("database-url = %q", got)
	}
	for _, w := range workloads(t, r) {
		for name, ev := range envByName(w.pod.Containers[0].Env) {
			if ref := ev.ValueFrom; ref != nil && ref.SecretKeyRef != nil && strings.HasSuffix(name, "_TOKEN") && ref.SecretKeyRef.Name != "exchange-tokens" {
				t.Errorf("%s reads %s from %s, want secrets.existingSecret exchange-tokens", w.name, name, ref.SecretKeyRef.Name)
			}
		}
	}
	op := decode[appsv1.Deployment](t, r, "Deployment", "exchange-pmx-operator")
	if sa := op.Spec.Template.Spec.ServiceAccountName; sa != "exchange-operator" {
		t.Errorf("operator ServiceAccount %q, want operator.serviceAccount.name", sa)
	}
	checkArgs(t, "exchange-pmx-operator", op.Spec.Template.Spec.Containers[0].Args, "operator",
		"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--leader-elect=false",
		"--leader-election-namespace=markets", "--shard-ttl=5s", "--resync=2s",
		"--rebalance=true", "--rebalance-margin=0.2", "--rebalance-interval=5s", "--rebalance-cooldown=1m", "--rebalance-max-fraction=0.1",
		"--log-level=info")
	checkPoolShards(t, r, 1)
	checkOperatorRBAC(t, r, "exchange-pmx-operator", "exchange-pmx-operator-leader-election")
}

// workload is a rendered Deployment or StatefulSet, or the StatefulSet the operator makes of a
// rendered ShardPool (named <pool>-shard, its pods as controllers.ShardPoolPodTemplate makes them).
type workload struct {
	kind, name string
	labels     map[string]string // of the pod template
	pod        corev1.PodSpec
}

func workloads(t *testing.T, r *render) []workload {
	t.Helper()
	var out []workload
	for _, m := range r.ofKind("Deployment") {
		d := decode[appsv1.Deployment](t, r, "Deployment", m.obj.GetName())
		out = append(out, workload{"Deployment", d.Name, d.Spec.Template.Labels, d.Spec.Template.Spec})
		checkSelector(t, m.String(), d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	for _, m := range r.ofKind("StatefulSet") {
		s := decode[appsv1.StatefulSet](t, r, "StatefulSet", m.obj.GetName())
		out = append(out, workload{"StatefulSet", s.Name, s.Spec.Template.Labels, s.Spec.Template.Spec})
		checkSelector(t, m.String(), s.Spec.Selector.MatchLabels, s.Spec.Template.Labels)
		if r.find("Service", s.Spec.ServiceName) == nil {
			t.Errorf("%s: serviceName %s is not rendered", m, s.Spec.ServiceName)
		}
	}
	for _, m := range r.ofKind("ShardPool") {
		pool := decode[pmxv1.ShardPool](t, r, "ShardPool", m.obj.GetName())
		pod := controllers.ShardPoolPodTemplate(pool)
		out = append(out, workload{"ShardPool", pmxv1.ShardPoolStatefulSetName(pool.Name), pod.Labels, pod.Spec})
	}
	return out
}

// shardWorkload is the name of the workload that runs the release's shards: the chart's
// StatefulSet, or the operator's of the ShardPool the chart renders (shardPool.enabled).
func shardWorkload(r *render) string {
	if pools := r.ofKind("ShardPool"); len(pools) == 1 {
		return pmxv1.ShardPoolStatefulSetName(pools[0].obj.GetName())
	}
	return r.fullname() + "-shard"
}

func checkSelector(t *testing.T, what string, selector, podLabels map[string]string) {
	t.Helper()
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("%s: selector %v does not match its pods' labels %v", what, selector, podLabels)
	}
}

// checkConsistent checks what every render must hold: labels and namespaces; the security
// contexts, resources and probes of every container; that every reference between rendered
// objects (Service and PodDisruptionBudget selectors, ports by name, Secrets, ServiceAccounts,
// roles, scale and scrape targets) resolves, to a rendered object or to one of external, the
// Secrets the values say exist already.
func checkConsistent(t *testing.T, r *render, image string, external []string) {
	t.Helper()
	clusterScoped := []string{"ClusterRole", "ClusterRoleBinding"}
	for _, m := range r.objects {
		l := m.obj.GetLabels()
		if l["app.kubernetes.io/name"] != "pmx" || l["app.kubernetes.io/instance"] != r.release || l["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s: labels %v lack the chart's", m, l)
		}
		if ns := m.obj.GetNamespace(); slices.Contains(clusterScoped, m.obj.GetKind()) != (ns == "") || (ns != "" && ns != r.namespace) {
			t.Errorf("%s: namespace %q, want %q (none for cluster-scoped objects)", m, ns, r.namespace)
		}
		if n := len(m.obj.GetName()); n > 63 {
			t.Errorf("%s: name of %d characters", m, n)
		}
	}

	ws := workloads(t, r)
	secrets := map[string][]string{} // name: keys; nil keys for an external Secret
	for _, m := range r.ofKind("Secret") {
		s := decode[corev1.Secret](t, r, "Secret", m.obj.GetName())
		secrets[s.Name] = slices.Collect(maps.Keys(s.Data))
	}
	for _, name := range external {
		secrets[name] = nil
	}
	for _, w := range ws {
		checkPod(t, w, image, secrets)
	}

	// A Service selects the pods of exactly one workload and targets ports that they declare.
	for _, m := range r.ofKind("Service") {
		svc := decode[corev1.Service](t, r, "Service", m.obj.GetName())
		w := selectOne(t, m.String(), svc.Spec.Selector, ws)
		if w == nil {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type != intstr.String || !hasPort(w.pod, p.TargetPort.StrVal) {
				t.Errorf("%s: port %s targets %s, not a named port of %s", m, p.Name, p.TargetPort.String(), w.name)
			}
		}
	}
	for _, m := range r.ofKind("PodDisruptionBudget") {
		pdb := decode[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", m.obj.GetName())
		selectOne(t, m.String(), pdb.Spec.Selector.MatchLabels, ws)
	}
	for _, m := range r.ofKind("HorizontalPodAutoscaler") {
		hpa := decode[autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", m.obj.GetName())
		if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || r.find("Deployment", ref.Name) == nil {
			t.Errorf("%s scales %s %s, which is not rendered", m, ref.Kind, ref.Name)
		}
	}
	for _, m := range r.ofKind("Ingress") {
		ing := decode[networkingv1.Ingress](t, r, "Ingress", m.obj.GetName())
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				checkServicePort(t, r, m.String(), p.Backend.Service.Name, p.Backend.Service.Port.Name)
			}
		}
	}
	checkMetrics(t, r, ws)
	for _, m := range r.ofKind("ServiceMonitor") {
		var sm struct {
			Spec struct {
				NamespaceSelector struct{ MatchNames []string } `json:"namespaceSelector"`
				Selector          metav1.LabelSelector          `json:"selector"`
				Endpoints         []struct {
					Port, Path  string
					Relabelings []struct{ TargetLabel, Replacement string }
				}
			}
		}
		if err := yaml.Unmarshal(m.raw, &sm); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if m.obj.GetName() == r.fullname()+"-shard-pools" {
			// The ShardPools' shards: the operator makes each pool's Service (never the chart), so
			// the monitor selects a pool's Service's labels, and gives its shards the chart's
			// shards' job, which the alerts and the dashboard select.
			pool := labels.Set(poolShardLabels("default"))
			chartShards := r.find("Service", r.fullname()+"-shard-metrics") // none with shardPool.enabled
			if !sel.Matches(pool) || (chartShards != nil && sel.Matches(labels.Set(chartShards.obj.GetLabels()))) ||
				len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || len(sm.Spec.Endpoints[0].Relabelings) != 1 ||
				sm.Spec.Endpoints[0].Relabelings[0].TargetLabel != "job" || sm.Spec.Endpoints[0].Relabelings[0].Replacement != r.fullname()+"-shard-metrics" {
				t.Errorf("%s: selector %v, endpoints %+v; want a pool's Service alone, its metrics port under the job %s-shard-metrics", m, sel, sm.Spec.Endpoints, r.fullname())
			}
			continue
		}
		var matched []string
		for _, s := range r.ofKind("Service") {
			if sel.Matches(labels.Set(s.obj.GetLabels())) {
				matched = append(matched, s.obj.GetName())
			}
		}
		if len(matched) != 1 || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{r.namespace}) || len(sm.Spec.Endpoints) != 1 {
			t.Errorf("%s selects Services %v in %v with %d endpoints, want one Service in %s", m, matched, sm.Spec.NamespaceSelector.MatchNames, len(sm.Spec.Endpoints), r.namespace)
			continue
		}
		checkServicePort(t, r, m.String(), matched[0], sm.Spec.Endpoints[0].Port)
		if sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("%s scrapes %s", m, sm.Spec.Endpoints[0].Path)
		}
		if want := m.obj.GetName() + "-metrics"; matched[0] != want || sm.Spec.Endpoints[0].Port != "metrics" {
			t.Errorf("%s scrapes port %q of Service %s, want port metrics of %s", m, sm.Spec.Endpoints[0].Port, matched[0], want)
		}
	}

	// Bindings bind rendered roles to the operator's ServiceAccount.
	op := decode[appsv1.Deployment](t, r, "Deployment", r.fullname()+"-operator")
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, m := range r.ofKind(kind) {
			b := decode[rbacv1.RoleBinding](t, r, kind, m.obj.GetName()) // the same fields
			if r.find(b.RoleRef.Kind, b.RoleRef.Name) == nil {
				t.Errorf("%s binds %s %s, which is not rendered", m, b.RoleRef.Kind, b.RoleRef.Name)
			}
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != op.Spec.Template.Spec.ServiceAccountName || b.Subjects[0].Namespace != r.namespace {
				t.Errorf("%s binds %v, want the operator's ServiceAccount %s/%s", m, b.Subjects, r.namespace, op.Spec.Template.Spec.ServiceAccountName)
			}
		}
	}
}

// checkMetrics checks that the front API, the shards and the operator each serve their metrics on
// port 9090, named metrics, which the flag they are given listens on, and that only the component's
// ClusterIP Service <fullname>-<component>-metrics carries that port: the front API's own Service,
// which may be a LoadBalancer, and its Ingress never reach /metrics.
func checkMetrics(t *testing.T, r *render, ws []workload) {
	t.Helper()
	flags := map[string]string{"api": "--metrics-addr=:9090", "shard": "--metrics-addr=:9090", "operator": "--metrics-bind-address=:9090"}
	for component, flag := range flags {
		name := r.fullname() + "-" + component
		if component == "shard" {
			name = shardWorkload(r)
		}
		i := slices.IndexFunc(ws, func(w workload) bool { return w.name == name })
		if i < 0 {
			t.Errorf("no workload %s", name)
			continue
		}
		c := ws[i].pod.Containers[0]
		if !slices.Contains(c.Args, flag) {
			t.Errorf("%s: args %q lack %s", name, c.Args, flag)
		}
		var ports []string
		for _, p := range c.Ports {
			if p.Name == "metrics" || p.ContainerPort == 9090 {
				ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.ContainerPort))
			}
		}
		if !slices.Equal(ports, []string{"metrics:9090"}) {
			t.Errorf("%s: ports %v, want one named metrics on 9090", name, c.Ports)
		}
		if ws[i].kind == "ShardPool" {
			continue // the operator makes the pool's Service, metrics port included (shardService)
		}
		if r.find("Service", name+"-metrics") == nil {
			t.Errorf("no Service %s-metrics", name)
			continue
		}
		svc := decode[corev1.Service](t, r, "Service", name+"-metrics")
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" ||
			svc.Spec.Ports[0].Port != 9090 || svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
			t.Errorf("Service %s: %s ports %v, want ClusterIP with port metrics 9090 alone", svc.Name, svc.Spec.Type, svc.Spec.Ports)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ws[i].labels)) {
			t.Errorf("Service %s does not select %s's pods", svc.Name, name)
		}
	}
	for _, m := range r.ofKind("Service") {
		if strings.HasSuffix(m.obj.GetName(), "-metrics") {
			continue
		}
		svc := decode[corev1.Service](t, r, "Service", m.obj.GetName())
		for _, p := range svc.Spec.Ports {
			if p.Name == "metrics" || p.Port == 9090 || p.TargetPort == intstr.FromString("metrics") || p.TargetPort == intstr.FromInt32(9090) {
				t.Errorf("%s: port %s (%d → %s) reaches the metrics listener; only the -metrics Services may", m, p.Name, p.Port, p.TargetPort.String())
			}
		}
	}
}

// fullname is the chart's prefix of object names for the release, as _helpers.tpl makes it.
func (r *render) fullname() string {
	if strings.Contains(r.release, "pmx") {
		return r.release
	}
	return r.release + "-pmx"
}

func selectOne(t *testing.T, what string, selector map[string]string, ws []workload) *workload {
	t.Helper()
	var matched []*workload
	for i := range ws {
		if len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(ws[i].labels)) {
			matched = append(matched, &ws[i])
		}
	}
	if len(matched) != 1 {
		t.Errorf("%s: selector %v matches %d workloads, want 1", what, selector, len(matched))
		return nil
	}
	return matched[0]
}

func checkServicePort(t *testing.T, r *render, what, service, port string) {
	t.Helper()
	if r.find("Service", service) == nil {
		t.Errorf("%s refers to Service %s, which is not rendered", what, service)
		return
	}
	svc := decode[corev1.Service](t, r, "Service", service)
	for _, p := range svc.Spec.Ports {
		if p.Name == port {
			return
		}
	}
	t.Errorf("%s refers to port %q of Service %s, which has no such port", what, port, service)
}

func hasPort(pod corev1.PodSpec, name string) bool {
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// checkPod checks one pod template: every container runs under the restricted Pod Security
// Standard and a read-only root filesystem, asks for CPU and memory and caps memory; pmx
// containers run the image as 65532 with probes on their health endpoints; Postgres is probed with
// pg_isready; every Secret it reads is rendered (with the key) or external.
func checkPod(t *testing.T, w workload, image string, secrets map[string][]string) {
	t.Helper()
	pod := w.pod
	psc := pod.SecurityContext
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile is not RuntimeDefault", w.name)
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		what := fmt.Sprintf("%s container %s", w.name, c.Name)
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", what)
			continue
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil && psc != nil {
			nonRoot = psc.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			t.Errorf("%s: runAsNonRoot is not true", what)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", what)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", what)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: capabilities %v, want drop ALL and add none", what, sc.Capabilities)
		}
		// pg_isready, like any libpq client, needs a user name: without --username it asks the
		// system for the current user's, and a uid the image's passwd lacks (65532 in the Postgres
		// image) makes it give up with "no attempt" — a wait that never ends.
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe, {ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: c.Command}}}} {
			if p != nil && p.Exec != nil && strings.Contains(strings.Join(p.Exec.Command, " "), "pg_isready") &&
				!strings.Contains(strings.Join(p.Exec.Command, " "), "--username=") {
				t.Errorf("%s: pg_isready without --username: %q", what, p.Exec.Command)
			}
		}
		req, lim := c.Resources.Requests, c.Resources.Limits
		if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
			t.Errorf("%s: resources %v, want CPU and memory requests and a memory limit", what, c.Resources)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			keys, ok := secrets[ref.Name]
			if !ok || (keys != nil && !slices.Contains(keys, ref.Key)) {
				t.Errorf("%s: %s reads %s/%s, which is neither rendered nor given as existing", what, e.Name, ref.Name, ref.Key)
			}
		}
	}

	for _, c := range pod.Containers {
		what := fmt.Sprintf("%s container %s", w.name, c.Name)
		if c.Name == "postgres" {
			for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.Exec == nil || p.Exec.Command[0] != "pg_isready" {
					t.Errorf("%s: a probe is missing or is not pg_isready", what)
				}
			}
			continue
		}
		if c.Image != image {
			t.Errorf("%s: image %s, want %s", what, c.Image, image)
		}
		uid := c.SecurityContext.RunAsUser
		if uid == nil && psc != nil {
			uid = psc.RunAsUser
		}
		if uid == nil || *uid != 65532 {
			t.Errorf("%s: runAsUser %v, want 65532", what, uid)
		}
		for name, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			want := "/healthz"
			if name == "readiness" {
				want = "/readyz"
			}
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || !hasPort(pod, probe.HTTPGet.Port.StrVal) {
				t.Errorf("%s: %s probe %s, want GET %s on a named port", what, name, describeProbe(probe), want)
			}
		}
		// pmx writes no file: Postgres holds its state, and the image test (make test-image)
		// starts each process on a read-only root with no writable /tmp. A writable mount would be
		// a place for state the design says is not there.
		for _, m := range c.VolumeMounts {
			if !m.ReadOnly {
				t.Errorf("%s: writable volume %s at %s: pmx writes no file, give it none", what, m.Name, m.MountPath)
			}
		}
		env := envByName(c.Env)
		if _, ok := env["PMX_DATABASE_URL"]; !ok {
			t.Errorf("%s: no PMX_DATABASE_URL", what)
		}
		for _, token := range map[string][]string{"api": {"PMX_ADMIN_TOKEN", "PMX_INTERNAL_TOKEN"}, "shard": {"PMX_INTERNAL_TOKEN"}}[c.Name] {
			if _, ok := env[token]; !ok {
				t.Errorf("%s: no %s", what, token)
			}
		}
	}
}

// checkShards checks the shards' StatefulSet: replicas, and that each shard is named after its pod
// and advertises its pod's DNS name through the headless Service.
func checkShards(t *testing.T, s *appsv1.StatefulSet, replicas int32, service, namespace string) {
	t.Helper()
	if s.Spec.Replicas == nil || *s.Spec.Replicas != replicas {
		t.Errorf("%s replicas %v, want %d", s.Name, s.Spec.Replicas, replicas)
	}
	if s.Spec.ServiceName != service || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("%s serviceName %q, podManagementPolicy %q", s.Name, s.Spec.ServiceName, s.Spec.PodManagementPolicy)
	}
	checkShardEnv(t, s.Name, s.Spec.Template.Spec.Containers[0].Env)
}

// checkPoolShards checks the ShardPool the chart renders (shardPool.enabled, the default): its
// replicas, and its pods as the operator makes them. It returns their pod spec.
func checkPoolShards(t *testing.T, r *render, replicas int32) corev1.PodSpec {
	t.Helper()
	if r.find("StatefulSet", r.fullname()+"-shard") != nil {
		t.Errorf("StatefulSet %s-shard rendered beside the ShardPool", r.fullname())
	}
	pool := decode[pmxv1.ShardPool](t, r, "ShardPool", "default")
	if got := ptr.Deref(pool.Spec.Replicas, 0); got != replicas {
		t.Errorf("ShardPool %s replicas %d, want %d", pool.Name, got, replicas)
	}
	pod := controllers.ShardPoolPodTemplate(pool).Spec
	checkShardEnv(t, "ShardPool "+pool.Name, pod.Containers[0].Env)
	return pod
}

// checkShardEnv checks what a shard's container must be told of its pod.
func checkShardEnv(t *testing.T, what string, env []corev1.EnvVar) {
	t.Helper()
	idx := map[string]int{}
	for i, e := range env {
		idx[e.Name] = i
	}
	pod, ok := idx["POD_NAME"]
	if !ok || env[pod].ValueFrom == nil || env[pod].ValueFrom.FieldRef == nil || env[pod].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("%s: no POD_NAME from metadata.name in %v", what, env)
	}
	ip, ok := idx["POD_IP"]
	if !ok || env[ip].ValueFrom == nil || env[ip].ValueFrom.FieldRef == nil || env[ip].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Fatalf("%s: no POD_IP from status.podIP in %v", what, env)
	}
	// Each shard advertises its pod's IP (pmx adds the port it listens on), never a DNS name that
	// may still answer the address of the pod before it.
	for _, w := range []struct{ name, value, after string }{
		{"PMX_SHARD_NAME", "$(POD_NAME)", "POD_NAME"},
		{"PMX_ADVERTISE_ADDRESS", "$(POD_IP)", "POD_IP"},
	} {
		// $(VAR) is expanded only from variables defined earlier in the list.
		if i, ok := idx[w.name]; !ok || env[i].Value != w.value || i < idx[w.after] {
			t.Errorf("%s: %s, want %s = %q after %s", what, w.name, w.name, w.value, w.after)
		}
	}
}

func describeProbe(p *corev1.Probe) string {
	switch {
	case p == nil:
		return "missing"
	case p.HTTPGet == nil:
		return "not an HTTP GET"
	}
	return fmt.Sprintf("GET %s on port %s", p.HTTPGet.Path, p.HTTPGet.Port.String())
}

func checkArgs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s args %q, want %q", what, got, want)
	}
}

func checkResources(t *testing.T, what string, got corev1.ResourceRequirements, cpu, memory, cpuLimit, memoryLimit string) {
	t.Helper()
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLimit), corev1.ResourceMemory: resource.MustParse(memoryLimit)},
	}
	if !got.Requests.Cpu().Equal(*want.Requests.Cpu()) || !got.Requests.Memory().Equal(*want.Requests.Memory()) ||
		!got.Limits.Cpu().Equal(*want.Limits.Cpu()) || !got.Limits.Memory().Equal(*want.Limits.Memory()) {
		t.Errorf("%s resources %v, want %v", what, got, want)
	}
}

func envByName(env []corev1.EnvVar) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range env {
		m[e.Name] = e
	}
	return m
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func kindCounts(r *render) map[string]int {
	m := map[string]int{}
	for _, o := range r.objects {
		m[o.obj.GetKind()]++
	}
	return m
}

func secretData(t *testing.T, s *corev1.Secret, key string) string {
	t.Helper()
	v, ok := s.Data[key]
	if !ok {
		if sv, ok := s.StringData[key]; ok {
			return sv
		}
		t.Fatalf("Secret %s has no key %s", s.Name, key)
	}
	return string(v)
}

// rbacRule is one (API group, resource, verb) permission.
type rbacRule struct{ group, resource, verb string }

// checkOperatorRBAC checks that the operator's ClusterRole and leader-election Role grant exactly
// what the +kubebuilder:rbac markers of controllers/ ask for: leases, and the markers that name a
// namespace (the ShardPools' objects), through the Role (in the release's namespace, where the
// operator keeps its leader lease and runs its ShardPools), the rest through the ClusterRole (the
// operator watches Markets in every namespace).
func checkOperatorRBAC(t *testing.T, r *render, clusterRole, role string) {
	t.Helper()
	want, inNamespace := markerRules(t)
	granted := func(kind, name string) map[rbacRule]bool {
		got := map[rbacRule]bool{}
		cr := decode[rbacv1.ClusterRole](t, r, kind, name) // Role has the same rules field
		for _, rule := range cr.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						got[rbacRule{g, res, v}] = true
					}
				}
			}
		}
		return got
	}
	cluster, namespaced := granted("ClusterRole", clusterRole), granted("Role", role)
	byRole := func(rule rbacRule) bool { return rule.resource == "leases" || inNamespace[rule] }
	for rule := range want {
		if (byRole(rule) && !namespaced[rule]) || (!byRole(rule) && !cluster[rule]) {
			t.Errorf("the operator's roles do not grant %+v, which controllers/ asks for", rule)
		}
	}
	for rule := range cluster {
		if !want[rule] || byRole(rule) {
			t.Errorf("ClusterRole %s grants %+v, beyond what controllers/ asks for cluster-wide", clusterRole, rule)
		}
	}
	for rule := range namespaced {
		if !want[rule] || !byRole(rule) {
			t.Errorf("Role %s grants %+v, beyond leader election and the ShardPools' objects", role, rule)
		}
	}
}

// markerRules reads the +kubebuilder:rbac markers of controllers/*.go: every rule, and those of the
// markers that name a namespace.
func markerRules(t *testing.T) (rules, inNamespace map[rbacRule]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8stest.RepoRoot(t), "controllers", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:(\S+)$`)
	rules, inNamespace = map[rbacRule]bool{}, map[rbacRule]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marker.FindAllStringSubmatch(string(data), -1) {
			fields := map[string][]string{}
			for _, kv := range strings.Split(m[1], ",") {
				k, v, _ := strings.Cut(kv, "=")
				fields[k] = strings.Split(strings.Trim(v, `"`), ";")
			}
			for _, g := range fields["groups"] {
				for _, res := range fields["resources"] {
					for _, v := range fields["verbs"] {
						rules[rbacRule{g, res, v}] = true
						if len(fields["namespace"]) > 0 {
							inNamespace[rbacRule{g, res, v}] = true
						}
					}
				}
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("no +kubebuilder:rbac markers in controllers/")
	}
	return rules, inNamespace
}

// TestTemplateShardPool checks shardPool.enabled (the default): the shards become a ShardPool of the shard
// values, which the operator runs, and the chart renders none of its own shard objects (the
// StatefulSet, its Services, its budget, its ServiceMonitor).
func TestTemplateShardPool(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "pmx", "exchange", "--set", "shardPool.enabled=true", "--set", "shardPool.maxDedicatedShards=2",
		"--set", "shard.replicas=3", "--set", "shard.extraArgs={--max-open-orders=50}", "--set", "shard.podLabels.team=markets",
		"--set", "shard.nodeSelector.pool=matching", "--set", "serviceMonitor.enabled=true")
	pool := decode[pmxv1.ShardPool](t, r, "ShardPool", "default")
	spec := pool.Spec
	if pool.Namespace != "exchange" || ptr.Deref(spec.Replicas, 0) != 3 || spec.MaxDedicatedShards != 2 || spec.Image != "pmx:dev" ||
		spec.DatabaseURL.Name != "pmx-postgres" || spec.DatabaseURL.Key != "database-url" ||
		spec.InternalToken.Name != "pmx-tokens" || spec.InternalToken.Key != "internal-token" ||
		!slices.Equal(spec.Args, []string{"--log-level=info", "--max-open-orders=50"}) ||
		spec.NodeSelector["pool"] != "matching" || spec.PodMetadata == nil || spec.PodMetadata.Labels["team"] != "markets" ||
		spec.PodDisruptionBudget == nil || spec.PodDisruptionBudget.MaxUnavailable == nil || spec.PodDisruptionBudget.MaxUnavailable.IntVal != 1 ||
		ptr.Deref(spec.TerminationGracePeriodSeconds, 0) != 30 || spec.Resources.Requests.Cpu().String() != "250m" ||
		spec.SecurityContext == nil || !ptr.Deref(spec.SecurityContext.ReadOnlyRootFilesystem, false) {
		t.Errorf("ShardPool %s/%s: %+v", pool.Namespace, pool.Name, spec)
	}
	for _, obj := range []struct{ kind, name string }{{"StatefulSet", "pmx-shard"}, {"Service", "pmx-shard"}, {"Service", "pmx-shard-metrics"},
		{"PodDisruptionBudget", "pmx-shard"}, {"ServiceMonitor", "pmx-shard"}} {
		if r.find(obj.kind, obj.name) != nil {
			t.Errorf("%s %s rendered with shardPool.enabled", obj.kind, obj.name)
		}
	}
	if r.find("ServiceMonitor", "pmx-shard-pools") == nil {
		t.Error("no ServiceMonitor for the pool's shards")
	}
	// The pool's pods roll when the Secrets' values change, as the chart's own shards do.
	checksum := func(args ...string) string {
		p := decode[pmxv1.ShardPool](t, renderChart(t, "pmx", "exchange", args...), "ShardPool", "default")
		if p.Spec.PodMetadata == nil {
			return ""
		}
		return p.Spec.PodMetadata.Annotations["checksum/config"]
	}
	if before, after := checksum(), checksum("--set", "secrets.internalToken=rotated-0123456789abcdef"); before == "" || before == after {
		t.Errorf("the pool's pods' checksum/config %q, %q with a new internal token: want one that changes", before, after)
	}
	if n := len(renderChart(t, "pmx", "exchange", "--set", "shardPool.enabled=false").ofKind("ShardPool")); n != 0 {
		t.Errorf("shardPool.enabled=false renders %d ShardPools", n)
	}
}
