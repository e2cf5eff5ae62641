package client_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pgtest"
)

// The examples (example_test.go) run against a real exchange, which TestMain starts before any
// test, as pmx dev serves it, on the test binary's private Postgres: so their output is checked,
// not only shown. They read these.
var (
	// baseURL is the API's server URL, like pmx dev's "http://localhost:8080/api/v1".
	baseURL string
	// apiKey is alice's API key; otherKey bob's, her counterparty in the examples.
	apiKey, otherKey string
	// examples is the exchange, for newMarket.
	examples *exchangetest.Target
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunWith(m, startExamples)) }

// startExamples starts the examples' exchange, opens alice's and bob's accounts, and returns what
// stops it.
func startExamples() func() {
	tb := &mainTB{}
	examples = exchangetest.StartDev(tb)
	baseURL = examples.URL + "/api/v1"
	for name, key := range map[string]*string{"alice": &apiKey, "bob": &otherKey} {
		var out struct {
			APIKey string `json:"apiKey"`
		}
		examples.Admin(tb, "POST", "/admin/v1/accounts", map[string]any{"name": name}, http.StatusCreated, &out)
		*key = out.APIKey
	}
	return tb.cleanup
}

// newMarket creates an OPEN market for one example, so that no example sees another's orders.
func newMarket(question string) uuid.UUID {
	return examples.NewMarket(&mainTB{}, map[string]any{"question": question}).ID
}

// mainTB is the testing.TB of what TestMain starts for the examples, which have no *testing.T:
// its cleanups run after the last test, and a failure ends the test binary. The exchange's
// warnings go to stderr, apart from the examples' output.
type mainTB struct {
	testing.TB // nil: a method the exchange's helpers need and this type lacks panics, naming it

	mu       sync.Mutex
	cleanups []func()
}

func (*mainTB) Helper()      {}
func (*mainTB) Name() string { return "Examples" }
func (*mainTB) Failed() bool { return false }

func (*mainTB) Log(args ...any)                 { fmt.Fprintln(os.Stderr, args...) }
func (*mainTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (tb *mainTB) Error(args ...any)                 { tb.Fatal(args...) }
func (tb *mainTB) Errorf(format string, args ...any) { tb.Fatalf(format, args...) }
func (*mainTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"the examples' exchange:"}, args...)...)
	os.Exit(1) // the Postgres cluster dies with this process (pgtest)
}
func (*mainTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "the examples' exchange: "+format+"\n", args...)
	os.Exit(1)
}

func (tb *mainTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// cleanup runs the cleanups, the last registered first, as testing does.
func (tb *mainTB) cleanup() {
	tb.mu.Lock()
	fs := slices.Clone(tb.cleanups)
	tb.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
