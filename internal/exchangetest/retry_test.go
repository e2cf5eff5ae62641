package exchangetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/pgtest"
)

// TestRetriesThroughCutConnections checks that a client which retries a placement with the same
// client order id, whenever it gets no answer, never gets two orders, however the network fails
// it. Clients place orders through a TCP proxy in front of a real `pmx dev` that cuts each
// connection at a random point: partway through the request, so that pmx never has all of it;
// partway through the answer, so that pmx placed the order but the client cannot know it; as soon
// as pmx has the whole request, so that pmx sees its client gone while it places; or never. Some
// answers it withholds until the client times out; some requests it delivers only after the
// client has timed out, so that they race the client's retries. Each placement is sent again,
// with the same body, until it is answered 201 (placed) or 200 (a replay of an earlier attempt
// that placed it). Then Postgres must hold exactly one order for each client order id — the one
// the final answer named — and no other, and the invariants and the books must hold.
func TestRetriesThroughCutConnections(t *testing.T) {
	seed := testSeed(t)
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	const token = "retry-test-admin-token-0123456789abcdef"
	proc, base := startDevProcess(t, bin, dbURL, token)
	tg := processTarget(t, base, dbURL, token)
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	px := startCuttingProxy(t, strings.TrimPrefix(base, "http://"), seed)
	t.Cleanup(px.Close)

	const (
		orders   = 200
		clients  = 8
		maxTries = 30 // a little over one attempt in two fails (cuttingProxy.plan): 30 in a row never happens
	)
	// Keep-alives off: each attempt is a connection of its own, which the proxy cuts or not.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	results := make([]retryResult, orders)
	var wg sync.WaitGroup
	for w := range clients {
		c := tg.NewAccount(t, "retry")
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for i := w; i < orders; i += clients {
				r := &results[i]
				r.account, r.clientID = c, fmt.Sprintf("retry-%d", i)
				r.body = retryBody(rng, markets[rng.IntN(len(markets))], r.clientID)
				for r.tries < maxTries && r.status == 0 {
					r.tries++
					r.attempt(t, client, px.URL())
				}
				if r.status == 0 {
					t.Errorf("%s: no answer in %d tries", r.clientID, maxTries)
				}
			}
		})
	}
	wg.Wait()
	px.Close() // the requests it still delivers late are done

	var replayed, retried int
	for _, r := range results {
		if r.status == http.StatusOK {
			replayed++
		}
		if r.tries > 1 {
			retried++
		}
	}
	t.Logf("%d placements, %d of them retried, %d placed by an attempt whose answer was lost (answered 200); the proxy %s; "+
		"pmx answered the requests delivered late %s", orders, retried, replayed, px.Stats(), px.LateAnswers())
	if replayed == 0 || px.count(cutRequest) == 0 {
		t.Errorf("no attempt lost its answer (%d) or was cut partway through the request: the test did not test retries", replayed)
	}

	// Each client order id has exactly one order, the one the final answer named, and there are no
	// others.
	rows, err := tg.Store.Pool.Query(context.Background(), `select a.uid, o.client_order_id, array_agg(o.id)
		from orders o join accounts a on a.id = o.account_id group by a.uid, o.client_order_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string][]uuid.UUID{} // account/client order id → orders
	var total int
	for rows.Next() {
		var account uuid.UUID
		var clientID *string
		var ids []uuid.UUID
		if err := rows.Scan(&account, &clientID, &ids); err != nil {
			t.Fatal(err)
		}
		if clientID == nil {
			t.Errorf("account %s has orders without a client order id: %v", account, ids)
			continue
		}
		stored[account.String()+"/"+*clientID] = ids
		total += len(ids)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if total != orders {
		t.Errorf("Postgres holds %d orders; %d were placed", total, orders)
	}
	for _, r := range results {
		if ids := stored[r.account.Account.String()+"/"+r.clientID]; r.status > 0 && (len(ids) != 1 || ids[0] != r.order) {
			t.Errorf("%s: answered %d with order %s after %d tries; Postgres holds %v", r.clientID, r.status, r.order, r.tries, ids)
		}
	}
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, results[0].account, markets)
	proc.Stop()
}

// retryBody is a random placement with a client order id: a GTC or GTD bid of 45 to 49 on either
// outcome, which rests (those of the two outcomes never cross: a BUY NO at q is a YES ask at
// 100 − q), or an IOC or FOK BUY of 51 to 55, which takes from them. Every book thus has at most
// five levels a side, all of which CheckBooksOverAPI compares.
func retryBody(rng *rand.Rand, market uuid.UUID, clientID string) map[string]any {
	outcome := []string{"YES", "NO"}[rng.IntN(2)]
	tif := []string{"GTC", "GTD", "IOC", "FOK"}[rng.IntN(4)]
	body := OrderBody(market, "BUY", outcome, 45+rng.IntN(5), 1+rng.IntN(5))
	switch tif {
	case "GTD":
		body["expiresAt"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	case "IOC", "FOK":
		body["price"] = 51 + rng.IntN(5)
	}
	body["timeInForce"], body["clientOrderId"] = tif, clientID
	return body
}

// retryResult is one placement and what became of it.
type retryResult struct {
	account  *Client
	clientID string
	body     map[string]any
	tries    int
	status   int       // the final answer: 201, 200, or 0 while there is none
	order    uuid.UUID // the order it named
}

// attempt sends the placement once; a transport error, a timeout or a cut answer leaves r.status
// 0, for the caller to try again. Any answer but 201 or 200 (with Idempotent-Replayed) fails the
// test.
func (r *retryResult) attempt(t *testing.T, client *http.Client, url string) {
	raw, _ := json.Marshal(r.body)
	req, err := http.NewRequest("POST", url+"/api/v1/order", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.account.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return // the answer was cut partway through its body
	}
	var o apiserver.Order
	switch {
	case (resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK && resp.Header.Get("Idempotent-Replayed") == "true") &&
		json.Unmarshal(answer, &o) == nil && o.ClientOrderID != nil && *o.ClientOrderID == r.clientID:
		r.status, r.order = resp.StatusCode, o.ID
	default:
		t.Errorf("%s, try %d: %d %s", r.clientID, r.tries, resp.StatusCode, answer)
		r.status = -1 // no use trying again
	}
}

// cut is where the proxy cuts a connection.
type cut int

const (
	cutNone        cut = iota // forwards the request and the whole answer
	cutRequest                // forwards part of the request, then closes both sides: pmx never has all of it
	cutAnswer                 // forwards the request, then part of the answer: pmx acted on it, the client cannot know how
	hangUp                    // forwards the request and closes both sides at once: pmx sees its client gone while it works
	withholdAnswer            // forwards the request, then nothing until the client gives up: a timeout
	lateRequest               // forwards the request only once the client has given up, racing its retry
	numCuts
)

func (c cut) String() string {
	return [...]string{"passed", "cut the request", "cut the answer", "hung up", "withheld the answer", "delivered the request late"}[c]
}

// cuttingProxy forwards connections on a loopback port to an HTTP server, one request and its
// answer each (the client's keep-alives are off), and cuts each at a random point. It reads the
// whole request before it forwards any of it, and the whole answer (the server closes the
// connection after it) before the client gets any, so that each cut falls where it is meant to.
type cuttingProxy struct {
	t        testing.TB
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup
	close    sync.Once
	mu       sync.Mutex
	rng      *rand.Rand
	counts   [numCuts]atomic.Int64
	late     map[string]int // the status lines pmx answered the requests delivered late with
}

// startCuttingProxy starts a proxy to upstream (host:port) on a free loopback port.
func startCuttingProxy(t testing.TB, upstream string, seed uint64) *cuttingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{t: t, ln: ln, upstream: upstream, rng: rand.New(rand.NewPCG(seed, 1<<32)), late: map[string]int{}}
	p.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			p.wg.Go(func() { p.serve(conn) })
		}
	})
	return p
}

// URL is the proxy's base URL.
func (p *cuttingProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops accepting and waits for every connection to end; it may be called again.
func (p *cuttingProxy) Close() {
	p.close.Do(func() {
		p.ln.Close()
		p.wg.Wait()
	})
}

func (p *cuttingProxy) count(c cut) int64 { return p.counts[c].Load() }

// Stats says how many connections the proxy cut where.
func (p *cuttingProxy) Stats() string {
	parts := make([]string, numCuts)
	for c := range numCuts {
		parts[c] = fmt.Sprintf("%s %d", c, p.count(c))
	}
	return strings.Join(parts, ", ")
}

// LateAnswers says how pmx answered the requests the proxy delivered late.
func (p *cuttingProxy) LateAnswers() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprint(p.late)
}

// plan draws where to cut a connection — a little over one in two is cut or delayed — and a fraction
// of the request or answer to forward when it is cut partway.
func (p *cuttingProxy) plan() (cut, float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c cut
	switch n := p.rng.IntN(100); {
	case n < 45:
		c = cutNone
	case n < 65:
		c = cutRequest
	case n < 85:
		c = cutAnswer
	case n < 94:
		c = hangUp
	case n < 97:
		c = withholdAnswer
	default:
		c = lateRequest
	}
	return c, p.rng.Float64()
}

// connDeadline bounds every connection the proxy serves, so that none outlives the test.
const connDeadline = 30 * time.Second

// serve carries one request and its answer, cut as planned.
func (p *cuttingProxy) serve(client net.Conn) {
	defer client.Close()
	client.SetDeadline(time.Now().Add(connDeadline))
	c, frac := p.plan()
	var raw bytes.Buffer
	req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(client, &raw)))
	if err != nil {
		return // the client gave up before it sent a request
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return
	}
	if c == lateRequest {
		io.Copy(io.Discard, client) // until the client times out and closes
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		p.t.Errorf("proxy: %v", err)
		return
	}
	defer up.Close()
	up.SetDeadline(time.Now().Add(connDeadline))
	p.counts[c].Add(1)
	if c == cutRequest {
		up.Write(raw.Bytes()[:int(frac*float64(raw.Len()))])
		return
	}
	if _, err := up.Write(raw.Bytes()); err != nil || c == hangUp {
		return
	}
	answer, err := io.ReadAll(up)
	if err != nil {
		return
	}
	switch c {
	case cutNone:
		client.Write(answer)
	case cutAnswer:
		client.Write(answer[:int(frac*float64(len(answer)))])
	case withholdAnswer:
		io.Copy(io.Discard, client) // until the client times out and closes
	case lateRequest:
		status, _, _ := bytes.Cut(answer, []byte("\r\n"))
		p.mu.Lock()
		p.late[string(status)]++
		p.mu.Unlock()
	}
}
