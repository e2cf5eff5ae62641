package exchangetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/store"
)

// abuseAdminToken is the abused exchanges' admin token: as long as pmx requires one to be.
const abuseAdminToken = "abuse-test-admin-token-of-32-characters"

// abuseRig is a real `pmx dev` for the abuse suite, with a market, a well-behaved account that
// trades from 127.0.0.1 and an abuser's account whose requests come from abuseAttacker. Each
// TestAbuse... test starts its own, so that one attack's leftovers (limits spent, connections
// held) never change what another measures.
type abuseRig struct {
	proc       *Process
	base       string // http://host:port
	metricsURL string
	tg         *Target
	market     uuid.UUID
	good       *Client
	abuser     *Client
	// attacker sends HTTP requests from abuseAttacker.
	attacker *http.Client
}

// newAbuseRig starts pmx dev on a fresh database, with args added to its command line, and waits
// until it is ready. It is stopped when t ends.
func newAbuseRig(t *testing.T, args ...string) *abuseRig {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: other loopback addresses and /proc")
	}
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	// The Go memory limit the api pod's 512 MiB sets (internal/cmd/process/memlimit.go: 75% of the cgroup's
	// limit). A test process has no such cgroup, so it gets the environment variable that overrides it.
	line := append([]string{"dev", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--markets", "", "--admin-token", abuseAdminToken, "--data-dir", t.TempDir(), "--log-level", "warn"}, args...)
	proc, base := StartProcessEnv(t, apiLine, []string{"GOMEMLIMIT=384MiB"}, bin, line...)
	r := &abuseRig{proc: proc, base: base, metricsURL: proc.Line(metricsLine)}
	WaitReady(t, base+"/readyz")
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	r.tg = &Target{URL: base, MetricsURL: r.metricsURL, AdminToken: abuseAdminToken, Store: st,
		Validator: apitest.NewValidator(t), HTTP: &http.Client{Timeout: time.Minute}}
	r.tg.Markets = AdminMarkets{r.tg}
	r.market = r.tg.NewMarket(t, nil).ID
	r.good, r.abuser = r.tg.NewAccount(t, "good"), r.tg.NewAccount(t, "abuser")
	transport := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return r.dialFrom(abuseAttacker)
	}, MaxIdleConnsPerHost: 64}
	t.Cleanup(transport.CloseIdleConnections)
	r.attacker = &http.Client{Transport: transport, Timeout: time.Minute}
	return r
}

// addr is the API's host:port.
func (r *abuseRig) addr() string { return strings.TrimPrefix(r.base, "http://") }

// dialFrom opens a TCP connection to the API from a loopback address of the caller's choosing.
func (r *abuseRig) dialFrom(ip string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", r.addr())
}

// goodTrading is a well-behaved client placing orders from 127.0.0.1 in the background, at a
// steady pace well inside its limits, and what became of each placement.
type goodTrading struct {
	stop    chan struct{}
	done    chan struct{}
	took    []time.Duration
	refused []string // every placement not answered 201, with its answer
}

// abuseGoodPace is how often the well-behaved client places an order: 20 a second, well inside
// its write limit of 50.
const abuseGoodPace = 50 * time.Millisecond

// tradeDuring starts the well-behaved client trading: IOC orders that meet nothing and so never
// rest, each a whole batch of the shard like any order. Stop it with finish.
func (r *abuseRig) tradeDuring(t *testing.T) *goodTrading {
	t.Helper()
	return tradeDuring(r.base, r.good.Key, r.market)
}

// tradeDuring starts a well-behaved client trading with key in market, through the API at base
// (scheme://host:port), as abuseRig.tradeDuring does.
func tradeDuring(base, key string, market uuid.UUID) *goodTrading {
	g := &goodTrading{stop: make(chan struct{}), done: make(chan struct{})}
	body := fmt.Sprintf(`{"marketId":%q,"side":"BUY","outcome":"YES","price":5,"quantity":1,"timeInForce":"IOC"}`, market)
	hc := &http.Client{Timeout: time.Minute}
	go func() {
		defer close(g.done)
		tick := time.NewTicker(abuseGoodPace)
		defer tick.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("POST", base+"/api/v1/order", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := hc.Do(req)
			took := time.Since(start)
			g.took = append(g.took, took)
			if err != nil {
				g.refused = append(g.refused, err.Error())
				continue
			}
			raw := make([]byte, 512)
			n, _ := resp.Body.Read(raw)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				g.refused = append(g.refused, fmt.Sprintf("%d %s", resp.StatusCode, raw[:n]))
			}
		}
	}()
	return g
}

// finish stops the well-behaved client and checks what it saw: at least one placement, none
// refused, and every one answered within bound. It returns the slowest and the median.
func (g *goodTrading) finish(t *testing.T, attack string, bound time.Duration) (slowest, median time.Duration) {
	t.Helper()
	close(g.stop)
	<-g.done
	if len(g.took) == 0 {
		t.Fatalf("%s: the well-behaved client placed nothing", attack)
	}
	for i, r := range g.refused {
		if i == 5 {
			t.Errorf("%s: ... %d more placements of the well-behaved client refused", attack, len(g.refused)-5)
			break
		}
		t.Errorf("%s: a placement of the well-behaved client was refused: %s", attack, r)
	}
	took := slices.Clone(g.took)
	slices.Sort(took)
	slowest, median = took[len(took)-1], took[len(took)/2]
	if slowest > bound {
		t.Errorf("%s: the well-behaved client's slowest placement took %v; the bound is %v", attack, slowest, bound)
	}
	t.Logf("%s: the well-behaved client placed %d orders, median %v, slowest %v", attack, len(took), median, slowest)
	return slowest, median
}

// hammer runs attack from n goroutines for d, and returns how many times it ran. attack returns
// false to end its goroutine.
func hammer(n int, d time.Duration, attack func(i int) bool) int {
	return hammerUntil(n, d, func() bool { return true }, attack)
}

// abuseMaxAttack bounds how long hammerUntil drives an attack that has not yet met its limit.
const abuseMaxAttack = 2 * time.Minute

// hammerUntil runs attack as hammer does for at least d, then on until met says the limit under
// test has acted (refused the attacker), or for abuseMaxAttack in all. An attacker slowed by its
// machine (two cores busy with another build) reaches a limit later: a test that stopped at d
// would judge the machine's speed, not the limit. The tests' limits are set well below what such
// a machine's attacker manages, so that met comes.
func hammerUntil(n int, d time.Duration, met func() bool, attack func(i int) bool) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	start := time.Now()
	going := func() bool {
		since := time.Since(start)
		return since < d || since < abuseMaxAttack && !met()
	}
	for i := range n {
		wg.Go(func() {
			for going() {
				if !attack(i) {
					return
				}
				mu.Lock()
				count++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return count
}

// problems collects what an attack's goroutines found wrong, for the test to report once they
// are done: the first abuseMaxProblems of them and how many more.
type problems struct {
	mu    sync.Mutex
	found []string
	more  int
}

const abuseMaxProblems = 10

// add records a problem; safe for concurrent use.
func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.found) == abuseMaxProblems {
		p.more++
		return
	}
	p.found = append(p.found, fmt.Sprintf(format, args...))
}

// report fails t with every problem recorded.
func (p *problems) report(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.found {
		t.Error(f)
	}
	if p.more > 0 {
		t.Errorf("... and %d more", p.more)
	}
}
