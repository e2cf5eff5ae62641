// Package operator is pmx operator: the Kubernetes operator that reconciles Markets and Events.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/controllers"
	"github.com/pmx-dev/pmx/internal/cmd/process"
	"github.com/pmx-dev/pmx/internal/shardclient"
)

type operatorOptions struct {
	databaseURL      string
	metricsAddr      string
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	internalToken    string
	shardTTL         time.Duration
	resync           time.Duration
	rebalance        bool
	policy           controllers.RebalancePolicy
	poolNamespace    string
	process          process.Options
}

func NewCommand() *cobra.Command {
	o := operatorOptions{policy: controllers.DefaultRebalancePolicy}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: reconcile Market and Event resources, schedule markets onto shards",
		Long: `pmx operator reconciles Market resources (kubectl apply -f market.yaml) with the exchange:
it records each market in Postgres, schedules every OPEN market onto the least-loaded live shard,
moves markets off shards whose heartbeat lapsed, has each market's shard carry out its lifecycle
intent (close, reopen, resolve, cancel; closing at closesAt) over the shards' internal API, and
reports all of it in each Market's status. It records each Event resource (a question of 2 to 50
outcomes) with one Market per outcome, owned by the Event and scheduled on one shard, which closes,
reopens, resolves or voids all of them in one transaction. It keeps the markets spread over the
live shards, by count (an event's markets moving as one), moving one at a time at a bounded rate
when a shard joins or returns or the spread is off by more than --rebalance-margin; each move is a
planned handoff (the old owner finishes what it has, hands the market over and the new one loads it
at once), which clients see as a pause of milliseconds, not as errors.

It runs the ShardPools of its own namespace (--shard-pool-namespace): each a StatefulSet of shards,
their headless Service and a PodDisruptionBudget, reporting the shards' readiness, markets and
orders per second; a scale-down first hands the markets of the shards that go to the others.

It uses the kubeconfig of its environment (in-cluster, $KUBECONFIG or ~/.kube/config).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runOperator(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.databaseURL, "database-url", process.EnvOr("PMX_DATABASE_URL", ""), "the exchange's Postgres (postgres://...; default $PMX_DATABASE_URL)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "address of the Prometheus metrics endpoint (0 disables it)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so that only one replica reconciles")
	f.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader lease (default: the pod's)")
	f.StringVar(&o.internalToken, "internal-token", process.EnvOr("PMX_INTERNAL_TOKEN", ""), "secret shared with the shards, whose internal API carries out lifecycle changes (default $PMX_INTERNAL_TOKEN)")
	f.DurationVar(&o.shardTTL, "shard-ttl", 5*time.Second, "a shard is live while its last heartbeat is more recent than this")
	f.DurationVar(&o.resync, "resync", 2*time.Second, "how often each OPEN market is checked for a lost shard")
	f.BoolVar(&o.rebalance, "rebalance", true, "keep the markets spread over the live shards (false: a market moves only off a lost shard)")
	f.Float64Var(&o.policy.Margin, "rebalance-margin", o.policy.Margin, "move markets when the most and least loaded live shards differ by more than this fraction of the mean share")
	f.DurationVar(&o.policy.Interval, "rebalance-interval", o.policy.Interval, "the least time between two rebalancing moves")
	f.DurationVar(&o.policy.Cooldown, "rebalance-cooldown", o.policy.Cooldown, "a market that moved stays where it is this long (also the wait before the first move after the operator starts)")
	f.Float64Var(&o.policy.MaxFraction, "rebalance-max-fraction", o.policy.MaxFraction, "at most this fraction of the open markets moved within the cooldown (at least one market)")
	f.StringVar(&o.poolNamespace, "shard-pool-namespace", "", "the namespace whose ShardPools the operator runs as StatefulSets of shards (default: the one it runs in; none outside a cluster)")
	process.AddFlags(cmd, &o.process, false)
	return cmd
}

func runOperator(o operatorOptions) error {
	if o.databaseURL == "" || o.internalToken == "" {
		return fmt.Errorf("--database-url and --internal-token are required (or $PMX_DATABASE_URL, $PMX_INTERNAL_TOKEN)")
	}
	if err := o.policy.Validate(); err != nil && o.rebalance {
		return err
	}
	log, err := process.Start(o.process)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	ctx := ctrl.SetupSignalHandler()

	st, err := process.OpenStore(ctx, o.databaseURL, log, 0)
	if err != nil {
		return err
	}
	defer st.Close()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(pmxv1.AddToScheme(scheme))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("while finding the Kubernetes API: %w", err)
	}
	poolNS := o.poolNamespace
	if poolNS == "" {
		poolNS = inClusterNamespace()
	}
	var cacheOpts cache.Options
	if poolNS != "" {
		// The objects a ShardPool owns are watched in its namespace only, where the operator's Role
		// lets it.
		cacheOpts.ByObject = controllers.ShardPoolCache(poolNS)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "pmx-operator.pmx.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
		// Hand the lease back when stopping, so that a rolling update's new replica leads at once
		// rather than after the lease expires (15 s without an operator: markets that stopping
		// shards hand back wait that long for a new one). Safe because the process exits as soon
		// as the manager stops.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("while creating the manager: %w", err)
	}
	// Lifecycle changes go to each market's shard, as a front's writes do; the operator keeps no
	// shard of its own. Settling a market pays every position in one batch, which takes longer
	// than a front's write may: a change whose answer is lost is tried again, and the shard
	// refuses a change already made (illegal transition) until the operator reads the new phase.
	exchange := &shardclient.Router{Store: st, Token: o.internalToken, Lifecycle: true, Logger: log, Metrics: ctrlmetrics.Registry,
		HTTP: &http.Client{Transport: shardclient.Transport(0), Timeout: 5 * time.Minute}}
	var moves *controllers.MoveLog // the cooldown's record, kept only for the Rebalancer
	if o.rebalance {
		moves = &controllers.MoveLog{}
	}
	r := &controllers.MarketReconciler{Client: mgr.GetClient(), Scheme: scheme, Store: st,
		Recorder: mgr.GetEventRecorder("pmx-operator"), Exchange: exchange, ShardTTL: o.shardTTL, Resync: o.resync, Moves: moves}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if o.rebalance {
		if err := mgr.Add(&controllers.Rebalancer{Client: mgr.GetClient(), Store: st, Recorder: mgr.GetEventRecorder("pmx-operator"),
			ShardTTL: o.shardTTL, Policy: o.policy, Moves: moves, Metrics: ctrlmetrics.Registry,
			Move: exchange.HandOff}); err != nil {
			return err
		}
	}
	// Events: each outcome a Market of the Event's, moved together by the shard that owns them all.
	// Helm installs a chart's CRDs only with the release, never on upgrade: a release upgraded
	// from a chart without the Event CRD has none until someone applies it, and the operator must
	// go on reconciling Markets meanwhile rather than fail to start. Only an API that answers
	// that it has no such kind counts: one not reachable yet is waited for, as for Markets.
	_, err = mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: pmxv1.GroupVersion.Group, Kind: "Event"},
		pmxv1.GroupVersion.Version)
	if meta.IsNoMatchError(err) {
		log.Warn("the cluster serves no Event custom resource (events.pmx.dev), so Events are not reconciled; "+
			"apply the chart's CRDs (kubectl apply -f charts/pmx/crds/) and restart the operator", "error", err)
	} else {
		er := &controllers.EventReconciler{Client: mgr.GetClient(), Scheme: scheme, Store: st,
			Recorder: mgr.GetEventRecorder("pmx-operator"), Exchange: exchange, Resync: o.resync}
		if err := er.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	// Series: recurring Markets and Events, from a CRD that a release upgraded from an older chart
	// may not have yet either, and which watches Events.
	_, serr := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: pmxv1.GroupVersion.Group, Kind: "MarketSeries"},
		pmxv1.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(serr) || meta.IsNoMatchError(err):
		log.Warn("the cluster serves no MarketSeries (marketseries.pmx.dev) or no Event custom resource, so MarketSeries are not reconciled; "+
			"apply the chart's CRDs (kubectl apply -f charts/pmx/crds/) and restart the operator", "error", errors.Join(serr, err))
	default:
		sr := &controllers.SeriesReconciler{Client: mgr.GetClient(), Scheme: scheme, Store: st,
			Recorder: mgr.GetEventRecorder("pmx-operator")}
		if err := sr.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	// Shard pools: from a CRD that a release upgraded from an older chart may not have yet either.
	_, perr := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: pmxv1.GroupVersion.Group, Kind: "ShardPool"},
		pmxv1.GroupVersion.Version)
	var denied []string
	if poolNS != "" && perr == nil {
		direct, err := client.New(cfg, client.Options{Scheme: scheme}) // the manager's waits for its cache
		if err != nil {
			return err
		}
		if denied, err = poolAccess(ctx, direct, poolNS); err != nil {
			return err
		}
	}
	switch {
	case poolNS == "":
		log.Warn("no namespace to run ShardPools in (not in a cluster, and no --shard-pool-namespace), so ShardPools are not reconciled")
	case meta.IsNoMatchError(perr):
		log.Warn("the cluster serves no ShardPool custom resource (shardpools.pmx.dev), so ShardPools are not reconciled; "+
			"apply the chart's CRDs (kubectl apply -f charts/pmx/crds/) and restart the operator", "error", perr)
	case len(denied) > 0:
		// Watching what it may not list would keep the manager from starting at all.
		log.Warn("the operator may not manage ShardPools' objects in its namespace, so ShardPools are not reconciled; "+
			"grant it the chart's Role (operator-rbac.yaml) and restart it", "namespace", poolNS, "denied", denied)
	default:
		pr := &controllers.ShardPoolReconciler{Client: mgr.GetClient(), Scheme: scheme, Store: st,
			Recorder: mgr.GetEventRecorder("pmx-operator"), Namespace: poolNS, ShardTTL: o.shardTTL,
			HandOffShard: func(ctx context.Context, shard string) (int, error) {
				return exchange.HandOffShard(ctx, shard, o.shardTTL)
			}}
		if err := pr.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	ctrlmetrics.Registry.MustRegister(st.Collector(), &controllers.HealthCollector{Store: st, ShardTTL: o.shardTTL, Logger: log})
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("database", func(req *http.Request) error { return st.Ping(req.Context()) }); err != nil {
		return err
	}
	log.Info("starting the operator", "leader_election", o.leaderElect, "rebalance", o.rebalance, "shard_pool_namespace", poolNS)
	return mgr.Start(ctx)
}

// poolAccess asks the API server which of the permissions the ShardPool reconciler needs in
// namespace the operator lacks (its +kubebuilder:rbac markers with a namespace).
func poolAccess(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var denied []string
	for _, want := range []struct{ group, resource, verbs string }{
		{"apps", "statefulsets", "get list watch create patch"},
		{"", "services", "get list watch create patch"},
		{"policy", "poddisruptionbudgets", "get list watch create patch"},
		{"", "pods", "get"},
	} {
		for _, verb := range strings.Fields(want.verbs) {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: want.group, Resource: want.resource}}}
			if err := c.Create(ctx, review); err != nil {
				return nil, fmt.Errorf("while asking whether the operator may %s %s in %s: %w", verb, want.resource, namespace, err)
			}
			if !review.Status.Allowed {
				denied = append(denied, verb+" "+want.resource)
			}
		}
	}
	return denied, nil
}

// serviceAccountNamespace is where a pod finds the namespace it runs in.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// inClusterNamespace is the namespace the operator's pod runs in, as its service account's mounted
// token says ("" outside a cluster); $POD_NAMESPACE, when set, says it instead.
func inClusterNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	data, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
