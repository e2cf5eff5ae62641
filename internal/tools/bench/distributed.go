package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/config"
	"github.com/pmx-dev/pmx/engine"
)

// The distributed exchange of `pmxtools bench --distributed`, as processes on this machine for one
// run, the way the tests' distributed suite runs it: a kube-apiserver and its etcd (the binaries
// `make k8s-bins` builds, started by controller-runtime's envtest) with pmx's CRDs, `pmx operator`
// on it, Shards `pmx shard` and Fronts `pmx api`, all on the run's Postgres. Markets are Market
// resources the operator schedules onto the shards; the bots are spread over the fronts.

var (
	shardLine    = regexp.MustCompile(`pmx shard \S+ is running on (\S+)`)
	operatorLine = regexp.MustCompile(`starting the operator`)
)

// distributed is a running distributed exchange.
type distributed struct {
	te     *envtest.Environment
	k8s    client.Client
	procs  []*devProcess // the operator, the shards, the fronts
	fronts []string      // the fronts' base addresses
	fees   *engine.Fees  // every market's schedule (Options.Fees)
}

// kubeAssets finds the folder of kube-apiserver and etcd: dir if set, else $KUBEBUILDER_ASSETS,
// else the newest bin/k8s/<version> under the working directory, as `make k8s-bins` leaves it.
func kubeAssets(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir == "" {
		found, _ := filepath.Glob(filepath.Join("bin", "k8s", "*", "kube-apiserver"))
		if len(found) > 0 {
			slices.Sort(found)
			dir = filepath.Dir(found[len(found)-1])
		}
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("the distributed bench runs a kube-apiserver and etcd, and found no %s in %q: "+
				"run `make k8s-bins` in pmx's repository (they land in bin/k8s/), or name their folder with --kube-assets", bin, dir)
		}
	}
	return filepath.Abs(dir)
}

// startDistributed starts the control plane, the operator, the shards and the fronts for one run
// in dir, on Postgres at databaseURL. Stop it with stop, also after an error.
func startDistributed(ctx context.Context, o Options, dir, databaseURL, token string) (*distributed, error) {
	d := &distributed{fees: o.Fees}
	assets, err := kubeAssets(o.KubeAssets)
	if err != nil {
		return d, err
	}
	crdDir := filepath.Join(dir, "crds")
	if err := os.CopyFS(crdDir, config.CRDs()); err != nil && !errors.Is(err, fs.ErrExist) {
		return d, err
	}
	logs := map[string]*os.File{}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if logs[name], err = os.Create(filepath.Join(dir, name+".log")); err != nil {
			return d, err
		}
		defer logs[name].Close() // the processes hold their own descriptors
	}
	for _, sub := range []string{"etcd", "apiserver"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return d, err
		}
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return d, err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return d, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return d, err
	}
	d.te = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{Path: filepath.Join(assets, "etcd"), DataDir: filepath.Join(dir, "etcd"),
				Out: logs["etcd"], Err: logs["etcd"]},
			APIServer: &envtest.APIServer{Path: filepath.Join(assets, "kube-apiserver"), CertDir: filepath.Join(dir, "apiserver"),
				Out: logs["kube-apiserver"], Err: logs["kube-apiserver"]},
		},
	}
	cfg, err := d.te.Start()
	if err != nil {
		return d, fmt.Errorf("while starting kube-apiserver and etcd from %s (logs in %s): %w", assets, dir, err)
	}
	if d.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return d, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, d.te.KubeConfig, 0o600); err != nil {
		return d, err
	}

	internal := rand.Text()
	start := func(name, logName string, args, env []string, ready *regexp.Regexp, scheme string) (*devProcess, error) {
		p, err := startChild(ctx, name, o.PMX, args, env, filepath.Join(dir, logName), ready, scheme)
		if err == nil {
			d.procs = append(d.procs, p)
		}
		return p, err
	}
	if _, err := start("pmx operator", "pmx-operator.log", []string{"operator", "--database-url", databaseURL,
		"--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--log-level", "info",
		// The markets stay where they were scheduled: a rebalancing move would put a failover's
		// 503s into the figures. Otherwise the operator's defaults, which the chart's are: each
		// market reconciled every 2s (--resync; every reconcile reads Postgres and writes the
		// Market's status), a shard live for 5s after its last heartbeat (--shard-ttl).
		"--rebalance=false"},
		[]string{"KUBECONFIG=" + kubeconfig, "PMX_INTERNAL_TOKEN=" + internal}, operatorLine, ""); err != nil {
		return d, err
	}
	for i := range o.Shards {
		args := append([]string{"shard", "--name", "bench-shard-" + strconv.Itoa(i+1), "--addr", "127.0.0.1:0",
			"--database-url", databaseURL}, o.ShardArgs...)
		if _, err := start("pmx shard", fmt.Sprintf("pmx-shard-%d.log", i+1), args,
			[]string{"PMX_INTERNAL_TOKEN=" + internal}, shardLine, "http://"); err != nil {
			return d, err
		}
	}
	for i := range o.Fronts {
		args := append([]string{"api", "--addr", "127.0.0.1:0", "--database-url", databaseURL}, o.FrontArgs...)
		p, err := start("pmx api", fmt.Sprintf("pmx-api-%d.log", i+1), args,
			[]string{"PMX_ADMIN_TOKEN=" + token, "PMX_INTERNAL_TOKEN=" + internal}, apiLine, "")
		if err != nil {
			return d, err
		}
		d.fronts = append(d.fronts, p.url)
	}
	return d, nil
}

// createMarkets applies n Market resources (the first built-in sample, renamed) and waits until
// the operator has recorded each and placed it on a shard; it returns their ids.
func (d *distributed) createMarkets(ctx context.Context, stats *pgStats, n int, label string) ([]string, error) {
	samples, err := v1alpha1.LoadMarketsFS(config.Samples(), "config/samples (built in)")
	if err != nil || len(samples) == 0 {
		return nil, fmt.Errorf("no sample market to copy: %v", err)
	}
	names := make([]string, n)
	for i := range n {
		m := v1alpha1.Market{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("bench-%d", i+1)}, Spec: samples[0].Spec}
		m.Spec.Question = fmt.Sprintf("Bench market %d (%s)?", i+1, label)
		m.Spec.Fees = nil // the sample's, if any: the bench's markets charge only what --fees says
		if d.fees != nil {
			m.Spec.Fees = &v1alpha1.FeeSchedule{TakerBps: int32(d.fees.Taker), MakerBps: int32(d.fees.Maker)}
		}
		if err := d.k8s.Create(ctx, &m); err != nil {
			return nil, fmt.Errorf("while creating Market %s: %w", m.Name, err)
		}
		names[i] = m.Name
	}
	ctx, cancel := context.WithTimeout(ctx, devStartTimeout)
	defer cancel()
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 250*time.Millisecond) {
		ids, err := stats.scheduledMarkets(ctx)
		if err != nil {
			return nil, err
		}
		if len(ids) >= n {
			return ids, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d markets were placed on a shard: %w", len(ids), n, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// metrics lists the processes' metrics addresses, those their banners named.
func (d *distributed) metrics() []string {
	var out []string
	for _, p := range d.procs {
		if u := p.metrics(); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// processes are the pmx processes, each with what it runs ("pmx operator", "pmx shard", "pmx api").
func (d *distributed) processes() []pmxProcess {
	out := make([]pmxProcess, len(d.procs))
	for i, p := range d.procs {
		out[i] = pmxProcess{p.name, p.pid()}
	}
	return out
}

// stop stops the fronts, the shards, the operator (each cleanly, which closes their Postgres
// connections), then the control plane.
func (d *distributed) stop() error {
	var errs []error
	for i := len(d.procs) - 1; i >= 0; i-- {
		errs = append(errs, d.procs[i].stop())
	}
	d.procs = nil
	if d.te != nil {
		errs = append(errs, d.te.Stop())
		d.te = nil
	}
	return errors.Join(errs...)
}
