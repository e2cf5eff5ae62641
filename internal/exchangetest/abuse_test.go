package exchangetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds the abuse suite holds pmx dev to while it is abused.
const (
	abuseMaxPlacement = 5 * time.Second  // a well-behaved client's placement, answered
	abuseMaxRSS       = 512 << 20        // pmx dev's resident memory: the api pod's limit
	abuseMaxMetrics   = 256 << 10        // the size of /metrics afterwards
	abuseIdleConns    = 600              // more than the 512 one client may hold
	abuseSlowBodies   = 40               // connections sending a body a byte at a time
	abuseSlowHeaders  = 40               // connections sending a header a byte at a time
	abuseMethods      = 300              // invented HTTP methods
	abuseSignUps      = 30               // concurrent sign-ups from the attacker's address
	abuseSignIns      = 40               // wrong passwords tried on the good client's name
	abuseCrowd        = 4                // addresses holding connections open together ...
	abuseCrowdEach    = 500              // ... this many each, under the per-client limit
	abuseAttacker     = "127.0.0.2"      // the abusers' source address (loopback)
	abuseWait         = 30 * time.Second // how long the slow bodies may be held, at most
	abuseMaxSignUp    = 20 * time.Second // a real sign-up, answered, during a sign-up flood
	abusePassword     = "correct horse battery staple"
)

// TestAbuse runs the real binary, `pmx dev`, and abuses it from one loopback address as an
// attacker would — invented methods, slow headers, slow bodies with and without a key, oversized
// headers and bodies, more connections than one client may hold, floods of sign-ups and of wrong
// passwords — and from several addresses at once with thousands of connections, while a
// well-behaved client on another address trades, signs up and signs in. Its placements must be answered within a bound, the process's memory and
// /metrics must stay bounded, the slow connections must be cut off, and the invariants must hold
// afterwards. Everything is bounded in count and time and stays on loopback.
func TestAbuse(t *testing.T) {
	r := newAbuseRig(t)
	proc, base, metricsURL, tg, market, good, abuser := r.proc, r.base, r.metricsURL, r.tg, r.market, r.good, r.abuser
	dialFrom := r.dialFrom
	dial := func() (net.Conn, error) { return dialFrom(abuseAttacker) }
	attacker := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}
	defer attacker.CloseIdleConnections()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var found problems
	report := found.add

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

	// Slow headers: cut off when the header has taken too long, whatever comes next.
	headerCut := make(chan time.Duration, abuseSlowHeaders)
	for range abuseSlowHeaders {
		wg.Go(func() {
			c, err := dial()
			if err != nil {
				report("slow header: %v", err)
				return
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprint(c, "GET /api/v1/markets HTTP/1.1\r\nHost: pmx\r\nX-Slow: ")
			go func() {
				for ctx.Err() == nil {
					time.Sleep(time.Second)
					if _, err := c.Write([]byte("a")); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(abuseWait))
			_, _ = io.Copy(io.Discard, c)
			headerCut <- time.Since(start)
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

	// A sign-up flood from the attacker's address while a real person signs up from another: the
	// flood gets at most the per-client allowance, the rest are refused with a Retry-After, and
	// the real sign-up goes through (after waiting as told if every hash slot was busy).
	signUps := make(chan int, abuseSignUps)
	var flood sync.WaitGroup
	for i := range abuseSignUps {
		flood.Go(func() {
			status, retry, err := newFormClient(base, attacker).signUp(fmt.Sprintf("flood%d", i), abusePassword)
			switch {
			case err != nil:
				report("sign-up flood: %v", err)
			case status != http.StatusSeeOther && retry == "":
				report("sign-up flood: %d without a Retry-After", status)
			}
			signUps <- status
		})
	}
	owner := newFormClient(base, nil)
	start := time.Now()
	status := signUpPatiently(t, owner, "goodsignup")
	if took := time.Since(start); status != http.StatusSeeOther || took > abuseMaxSignUp {
		t.Errorf("a real sign-up during a sign-up flood: %d after %v; want 303 within %v", status, took, abuseMaxSignUp)
	}
	trade(10)
	flood.Wait()
	close(signUps)
	opened := 0
	for status := range signUps {
		if status == http.StatusSeeOther {
			opened++
		}
	}
	if opened > 10 {
		t.Errorf("one address opened %d accounts in a sign-up flood; the limit is 10 an hour", opened)
	}

	// Wrong passwords on the owner's name from the attacker's address: refused once over the
	// name's limit, and the owner, who has not failed, still signs in from its own address.
	refusedSignIns := 0
	guesser := newFormClient(base, attacker)
	for i := range abuseSignIns {
		status, retry, err := guesser.signIn("goodsignup", fmt.Sprintf("guess number %d", i))
		switch {
		case err != nil:
			t.Fatalf("sign-in flood: %v", err)
		case status == http.StatusSeeOther:
			t.Fatalf("sign-in flood: a wrong password signed in")
		case status == http.StatusTooManyRequests && retry != "":
			refusedSignIns++
		}
	}
	if refusedSignIns < abuseSignIns-5 {
		t.Errorf("%d of %d wrong passwords from one address were refused as over the limit; want all but 5", refusedSignIns, abuseSignIns)
	}
	if status, _, err := newFormClient(base, nil).signIn("goodsignup", abusePassword); err != nil || status != http.StatusSeeOther {
		t.Errorf("the owner signing in after a sign-in flood on its name: %d, %v; want 303", status, err)
	}

	// Thousands of connections from several addresses, each under its own limit, all held open
	// together: every one is served, and trading goes on.
	var crowd []net.Conn
	crowdServed := 0
	for a := range abuseCrowd {
		for range abuseCrowdEach {
			c, err := dialFrom(fmt.Sprintf("127.0.0.%d", 3+a))
			if err != nil {
				t.Errorf("crowd: %v", err)
				break
			}
			crowd = append(crowd, c)
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: pmx\r\n\r\n")
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
				crowdServed++
			}
		}
	}
	trade(10)
	for _, c := range crowd {
		c.Close()
	}
	if crowdServed != abuseCrowd*abuseCrowdEach {
		t.Errorf("%d of %d connections from %d addresses were served", crowdServed, abuseCrowd*abuseCrowdEach, abuseCrowd)
	}

	wg.Wait()
	close(slowCut)
	close(headerCut)
	stop()

	found.report(t)
	if served > 512 || served+refused != abuseIdleConns {
		t.Errorf("one address held %d connections open (%d refused); at most 512 may be", served, refused)
	}
	for held := range slowCut {
		if held >= abuseWait {
			t.Errorf("a slow body was held for %v, past the read limit", held)
		}
	}
	for held := range headerCut {
		if held >= abuseWait {
			t.Errorf("a slow header was held for %v, past the header's read limit", held)
		}
	}
	if slowest > abuseMaxPlacement {
		t.Errorf("a well-behaved placement took %v under abuse; the bound is %v", slowest, abuseMaxPlacement)
	}
	if maxRSS > abuseMaxRSS {
		t.Errorf("pmx dev held %d MB under abuse; the bound is %d MB", maxRSS>>20, abuseMaxRSS>>20)
	}
	resp, err := http.Get(metricsURL + "/metrics")
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

// signUpPatiently signs up as a person would: when the answer is 503 (every password hash slot
// busy) it waits as Retry-After says and tries again, a few times.
func signUpPatiently(t *testing.T, f *formClient, name string) int {
	t.Helper()
	for try := 0; ; try++ {
		status, retry, err := f.signUp(name, abusePassword)
		if err != nil {
			t.Fatalf("sign up %s: %v", name, err)
		}
		if status != http.StatusServiceUnavailable || try == 3 {
			return status
		}
		wait, err := strconv.Atoi(retry)
		if err != nil || wait > 10 {
			t.Fatalf("sign up %s: 503 with Retry-After %q", name, retry)
		}
		time.Sleep(time.Duration(wait) * time.Second)
	}
}
