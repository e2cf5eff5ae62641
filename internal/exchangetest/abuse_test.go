package exchangetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/store"
)

// Bounds the abuse suite holds pmx dev to while it is abused.
const (
	abuseMaxPlacement = 5 * time.Second  // a well-behaved client's placement, answered
	abuseMaxRSS       = 400 << 20        // pmx dev's resident memory
	abuseMaxMetrics   = 256 << 10        // the size of /metrics afterwards
	abuseIdleConns    = 600              // more than the 512 one client may hold
	abuseSlowBodies   = 40               // connections sending a body a byte at a time
	abuseMethods      = 300              // invented HTTP methods
	abuseAttacker     = "127.0.0.2"      // the abusers' source address (loopback)
	abuseWait         = 30 * time.Second // how long the slow bodies may be held, at most
)

// TestAbuse runs the real binary, `pmx dev`, and abuses it from one loopback address as an
// attacker would — invented methods, slow bodies with and without a key, oversized headers and
// bodies, more connections than one client may hold — while a well-behaved client on another
// address trades. Its placements must be answered within a bound, the process's memory and
// /metrics must stay bounded, the slow connections must be cut off, and the invariants must hold
// afterwards. Everything is bounded in count and time and stays on loopback.
func TestAbuse(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: other loopback addresses and /proc")
	}
	bin := BuildPMX(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	const token = "abuse-test-token"
	proc, base := startDevProcess(t, bin, dbURL, token)
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tg := &Target{URL: base, AdminToken: token, Store: st, Validator: apitest.NewValidator(t), HTTP: &http.Client{Timeout: time.Minute}}
	tg.Markets = AdminMarkets{tg}
	market := tg.NewMarket(t, nil).ID
	good, abuser := tg.NewAccount(t, "good"), tg.NewAccount(t, "abuser")
	addr := strings.TrimPrefix(base, "http://")
	dial := func() (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(abuseAttacker)}, Timeout: 10 * time.Second}
		return d.Dial("tcp", addr)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}

	// Slow bodies: without a key, refused at once; with a key, held until the read limit.
	slowCut := make(chan time.Duration, abuseSlowBodies)
	for i := range abuseSlowBodies {
		wg.Go(func() {
			c, err := dial()
			if err != nil {
				report("slow body: %v", err)
				return
			}
			defer c.Close()
			auth := ""
			if i%2 == 1 {
				auth = "Authorization: Bearer " + abuser.Key + "\r\n"
			}
			start := time.Now()
			fmt.Fprintf(c, "POST /api/v1/order HTTP/1.1\r\nHost: pmx\r\n%sContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{", auth)
			go func() { // a byte a second until the server lets go or the test ends
				for ctx.Err() == nil {
					time.Sleep(time.Second)
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(abuseWait))
			_, _ = io.Copy(io.Discard, c)
			slowCut <- time.Since(start)
		})
	}

	// A well-behaved client trades from 127.0.0.1 throughout.
	var slowest time.Duration
	var maxRSS int64
	trade := func(n int) {
		for i := range n {
			start := time.Now()
			good.Place(t, market, "BUY", "YES", 10+i%5, 1)
			slowest = max(slowest, time.Since(start))
			maxRSS = max(maxRSS, proc.RSS())
		}
	}

	// More connections than one client may hold, each kept open after one request: those over the
	// limit are closed before they are served.
	var held []net.Conn
	served, refused := 0, 0
	for range abuseIdleConns {
		c, err := dial()
		if err != nil {
			report("connection: %v", err)
			break
		}
		held = append(held, c)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: pmx\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
			served++
		} else {
			refused++
		}
	}
	trade(20)
	for _, c := range held {
		c.Close()
	}

	// Invented methods, an oversized header and an oversized body.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}}
	for i := range abuseMethods {
		req, _ := http.NewRequest(fmt.Sprintf("M%d", i), base+"/api/v1/markets", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	big := func(header, body int) int {
		c, err := dial()
		if err != nil {
			return 0
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /api/v1/order HTTP/1.1\r\nHost: pmx\r\nAuthorization: Bearer %s\r\nX-Pad: %s\r\nContent-Length: %d\r\n\r\n%s",
			abuser.Key, strings.Repeat("a", header), body, strings.Repeat(" ", body))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := big(100<<10, 0); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %d, want 431", got)
	}
	if got := big(0, 100<<10); got != http.StatusBadRequest {
		t.Errorf("a 100 KiB body: %d, want 400", got)
	}

	trade(20)
	wg.Wait()
	close(slowCut)
	stop()

	for _, p := range problems {
		t.Error(p)
	}
	if served > 512 || served+refused != abuseIdleConns {
		t.Errorf("one address held %d connections open (%d refused); at most 512 may be", served, refused)
	}
	for held := range slowCut {
		if held >= abuseWait {
			t.Errorf("a slow body was held for %v, past the read limit", held)
		}
	}
	if slowest > abuseMaxPlacement {
		t.Errorf("a well-behaved placement took %v under abuse; the bound is %v", slowest, abuseMaxPlacement)
	}
	if maxRSS > abuseMaxRSS {
		t.Errorf("pmx dev held %d MB under abuse; the bound is %d MB", maxRSS>>20, abuseMaxRSS>>20)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(metrics) > abuseMaxMetrics || strings.Contains(string(metrics), `method="M1"`) {
		t.Errorf("GET /metrics after abuse: %d, %d bytes (the bound is %d)", resp.StatusCode, len(metrics), abuseMaxMetrics)
	}
	t.Logf("slowest placement %v, RSS at most %d MB, /metrics %d bytes, %d connections served and %d refused from one address",
		slowest, maxRSS>>20, len(metrics), served, refused)
	CheckInvariants(t, tg)
}
