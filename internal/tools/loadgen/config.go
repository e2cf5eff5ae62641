// Package loadgen drives a running pmx server over its public REST API with a crowd of trading
// bots and reports throughput and latency.
//
// Each bot is an account of its own (created through the admin API) that places, cancels and reads
// like a simple market maker/taker: it quotes around a slowly drifting per-market mid, crosses the
// spread about a third of the time, sells only shares it knows it holds, cancels its own recent
// orders and now and then everything. That is the basic mix; in the market-maker mix the bots also
// place in batches, amend their resting orders and cancel several at once (see Mix). Bots run back
// to back (closed loop) or on a fixed schedule (open loop, --rate), in which case latency is
// measured from the intended send time so that a slow server cannot hide its queueing delay
// (coordinated omission).
package loadgen

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultURL            = "http://127.0.0.1:8080"
	DefaultBots           = 16
	DefaultRequestTimeout = 10 * time.Second

	maxBots = 10000
)

// Config describes one load-generation run.
type Config struct {
	// URL is the server's base address (scheme and host, e.g. http://127.0.0.1:8080); the public
	// API is under URL/api/v1 and the admin API under URL/admin/v1. A trailing /api/v1 is ignored.
	URL string
	// Fronts are the base addresses of more front replicas of the same exchange: the bots are
	// spread over URL and Fronts in turn, each keeping to its own (accounts are made through URL).
	Fronts []string
	// AdminToken authenticates the account creation on the admin API.
	AdminToken string
	// Bots is the number of concurrent bots, each its own account and API key.
	Bots int
	// Rate, when positive, switches to open loop: Rate order placements per second in total,
	// spread evenly over the bots. Zero means closed loop (each bot sends back to back).
	Rate float64
	// Duration bounds the run's length; zero means no time limit (then Orders must be set).
	Duration time.Duration
	// Orders stops the run after this many order placements have been sent; zero means unlimited.
	Orders int64
	// Markets uses at most this many of the OPEN markets (newest first); zero means all.
	Markets int
	// Seed seeds the bots' random generators; zero picks one from the clock (the report shows it).
	Seed uint64
	// Mix is the bots' choice of steps; empty means MixBasic.
	Mix Mix
	// RequestTimeout bounds every request, including reading its response.
	RequestTimeout time.Duration
	// Warmup, when positive, runs the load that long before the measured run begins, at the same
	// rate: its requests are counted and timed apart (Report.Warmup), not in the report's figures.
	// An exchange just started fills its caches and opens its connections on the bots' first
	// requests, which is its cold start, not its latency under load. It needs a Duration, for
	// the measured run, and no Orders budget.
	Warmup time.Duration
	// Measuring, when set with a Warmup, is called once as the measured run begins, while the bots
	// run on: where a caller takes the readings its own figures for the run start from. An error
	// stops the bots, and Run returns it. It is not called when the run ends before the warm-up does.
	Measuring func() error
}

// withDefaults fills zero fields with defaults and checks the result.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Bots == 0 {
		c.Bots = DefaultBots
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Mix == "" {
		c.Mix = MixBasic
	}
	if _, ok := mixSpecs[c.Mix]; !ok {
		return c, fmt.Errorf("loadgen: no mix %q: want one of %s", c.Mix, MixNames())
	}
	base, err := normalizeURL(c.URL)
	if err != nil {
		return c, err
	}
	c.URL = base
	c.Fronts = slices.Clone(c.Fronts)
	for i, f := range c.Fronts {
		if c.Fronts[i], err = normalizeURL(f); err != nil {
			return c, err
		}
	}
	switch {
	case c.AdminToken == "":
		return c, errors.New("loadgen: no admin token")
	case c.Bots < 0 || c.Bots > maxBots:
		return c, fmt.Errorf("loadgen: bots must be between 1 and %d, not %d", maxBots, c.Bots)
	case c.Rate < 0:
		return c, fmt.Errorf("loadgen: rate must not be negative (%g)", c.Rate)
	case c.Duration < 0 || c.Orders < 0 || c.Markets < 0 || c.RequestTimeout < 0:
		return c, errors.New("loadgen: duration, orders, markets and request timeout must not be negative")
	case c.Duration == 0 && c.Orders == 0:
		return c, errors.New("loadgen: the run needs a bound: a duration or a number of orders")
	case c.Warmup < 0:
		return c, fmt.Errorf("loadgen: the warm-up must not be negative (%v)", c.Warmup)
	case c.Warmup > 0 && (c.Duration == 0 || c.Orders > 0):
		return c, errors.New("loadgen: a warm-up needs a duration for the measured run, and no order budget (which would count the warm-up's orders)")
	}
	return c, nil
}

// MixNames lists the mixes' names for messages and help texts: "basic, market-maker".
func MixNames() string {
	names := make([]string, len(Mixes))
	for i, m := range Mixes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// normalizeURL checks that raw is an http(s) base address and returns it without a trailing slash
// or /api/v1 suffix.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("loadgen: bad url %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("loadgen: bad url %q: want http://host:port or https://host:port", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("loadgen: bad url %q: give only scheme, host, port and path", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/api/v1")
	u.Path, u.RawPath = p, ""
	return strings.TrimRight(u.String(), "/"), nil
}
