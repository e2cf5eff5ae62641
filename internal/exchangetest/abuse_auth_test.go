package exchangetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/internal/poll"
)

// The failed-authentication limit pmx holds every client address to (apiserver/auth.go): a burst
// of 30, then 10 a second.
const (
	abuseAuthBurst = 30
	abuseAuthRate  = 10
	// abuseGuessers is how many goroutines guess each kind of credential.
	abuseGuessers = 4
	// abuseGuessing is how long they guess.
	abuseGuessing = 5 * time.Second
)

// TestAbuseCredentials guesses admin tokens, feed tokens (?token=) and API keys from the
// attacker's address as fast as it can, while the well-behaved client trades and the real admin,
// from 127.0.0.1, keeps creating accounts. Past the failure limit the guesses must be answered 429
// too_many_failures with Retry-After, unchecked: the credentials actually checked (each feed token
// a Postgres DELETE, each unknown key prefix a Postgres read) stay within the limit, where at
// 14b4c8f every guess was checked (3,226 admin tokens and 6,051 feed tokens a second). The real
// admin is never refused, the well-behaved client stays within its bound, and the attacker's
// address authenticates again once its failures have refilled. A client with a good key behind the
// attacker's address (a NAT, a shared proxy) keeps being answered throughout.
func TestAbuseCredentials(t *testing.T) {
	r := newAbuseRig(t)
	g := r.tradeDuring(t)

	guess := func() string {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	kinds := []struct {
		name, credential string
		request          func() *http.Request
	}{
		{"admin token", "admin_token", func() *http.Request {
			req, _ := http.NewRequest("POST", r.base+"/admin/v1/accounts", strings.NewReader(`{"name":"guess"}`))
			req.Header.Set("Authorization", "Bearer "+guess())
			req.Header.Set("Content-Type", "application/json")
			return req
		}},
		{"feed token", "ws_token", func() *http.Request {
			req, _ := http.NewRequest("GET", r.base+"/api/v1/ws?token="+guess(), nil)
			return req
		}},
		{"API key", "api_key", func() *http.Request {
			// A well-formed key with a new prefix each time: each is looked up in Postgres.
			req, _ := http.NewRequest("GET", r.base+"/api/v1/account", nil)
			req.Header.Set("Authorization", "Bearer pmx_"+guess()[:16]+"_"+guess()[:32])
			return req
		}},
	}

	// A client with a good key behind the attacker's address (a NAT, a proxy) keeps trading: a key
	// the replica has seen is checked without Postgres, so it is never refused unchecked.
	sameAddress := func() (int, string) {
		req, _ := http.NewRequest("GET", r.base+"/api/v1/account", nil)
		req.Header.Set("Authorization", "Bearer "+r.abuser.Key)
		resp, err := r.attacker.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(raw)
	}
	if status, raw := sameAddress(); status != http.StatusOK {
		t.Fatalf("the good key behind the attacker's address, before the attack: %d %s", status, raw)
	}

	// The real admin, from 127.0.0.1, creates an account every 100 ms throughout.
	adminStop, adminDone := make(chan struct{}), make(chan struct{})
	var adminCalls int
	var adminRefused []string
	go func() {
		defer close(adminDone)
		hc := &http.Client{Timeout: time.Minute}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-adminStop:
				return
			case <-tick.C:
			}
			req, _ := http.NewRequest("POST", r.base+"/admin/v1/accounts", strings.NewReader(fmt.Sprintf(`{"name":"admin-%d"}`, i)))
			req.Header.Set("Authorization", "Bearer "+abuseAdminToken)
			req.Header.Set("Content-Type", "application/json")
			adminCalls++
			resp, err := hc.Do(req)
			if err != nil {
				adminRefused = append(adminRefused, err.Error())
				continue
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				adminRefused = append(adminRefused, fmt.Sprintf("%d %s", resp.StatusCode, raw))
			}
		}
	}()

	var mu sync.Mutex
	answers := map[string]map[int]int{} // kind → status → count
	var found problems
	start := time.Now()
	var wg sync.WaitGroup
	neighbour := 0
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ; time.Since(start) < abuseGuessing; <-tick.C {
			if status, raw := sameAddress(); status != http.StatusOK {
				found.add("the good key behind the attacker's address: %d %s", status, raw)
			}
			neighbour++
		}
	})
	for _, k := range kinds { // before the guessers start, which read answers
		answers[k.name] = map[int]int{}
	}
	for _, k := range kinds {
		wg.Go(func() {
			hammer(abuseGuessers, abuseGuessing, func(int) bool {
				resp, err := r.attacker.Do(k.request())
				if err != nil {
					found.add("%s: %v", k.name, err)
					return false
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				answers[k.name][resp.StatusCode]++
				switch resp.StatusCode {
				case http.StatusUnauthorized:
				case http.StatusTooManyRequests:
					var e ErrorBody
					retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
					if json.Unmarshal(raw, &e) != nil || e.Details.Code != "too_many_failures" || err != nil || retry < 1 || retry > 5 {
						found.add("%s: 429 with Retry-After %q: %s", k.name, resp.Header.Get("Retry-After"), raw)
					}
				default:
					found.add("%s: %d %s", k.name, resp.StatusCode, raw)
				}
				return true
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(adminStop)
	<-adminDone
	found.report(t)

	// Every kind met the limit, and the credentials checked (a Postgres statement each, for feed
	// tokens and unknown keys) stay within it: its burst, its rate over the attack, and the guesses
	// already in flight when the bucket emptied.
	checked, refused := 0.0, 0
	for _, k := range kinds {
		a := answers[k.name]
		invalid := r.tg.Metric(t, `pmx_api_auth_failures_total{credential="`+k.credential+`",outcome="invalid"}`)
		throttled := r.tg.Metric(t, `pmx_api_auth_failures_total{credential="`+k.credential+`",outcome="throttled"}`)
		t.Logf("%s guesses: %d answered 401, %d answered 429 (the server counted %.0f checked, %.0f refused unchecked)",
			k.name, a[http.StatusUnauthorized], a[http.StatusTooManyRequests], invalid, throttled)
		if a[http.StatusTooManyRequests] == 0 {
			t.Errorf("%s guesses: none answered 429; every one was checked", k.name)
		}
		checked += invalid
		refused += a[http.StatusUnauthorized]
	}
	limit := float64(abuseAuthBurst) + abuseAuthRate*elapsed.Seconds() + 3*abuseGuessers*float64(len(kinds))
	if checked > limit || float64(refused) > limit {
		t.Errorf("%.0f guessed credentials checked (%d answered 401) in %v from one address; the limit allows about %.0f",
			checked, refused, elapsed.Round(time.Millisecond), limit)
	}

	if neighbour == 0 {
		t.Error("the good key behind the attacker's address was never tried")
	}
	if len(adminRefused) > 0 || adminCalls == 0 {
		t.Errorf("the real admin, on another address, made %d calls; refused: %v", adminCalls, adminRefused)
	}
	g.finish(t, "credential guessing", abuseMaxPlacement)

	// The attacker's address authenticates again once its failures have refilled (a few seconds):
	// the admin token, refused unchecked from it while it was over the limit, works from it then.
	poll.Wait(t, 10*time.Second, "the attacker's address to authenticate again", func() bool {
		req, _ := http.NewRequest("POST", r.base+"/admin/v1/accounts", strings.NewReader(`{"name":"from-the-attackers-address"}`))
		req.Header.Set("Authorization", "Bearer "+abuseAdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.attacker.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated
	})
}
