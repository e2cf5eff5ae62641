package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Laptop and phone viewports.
const (
	laptopWidth, laptopHeight = 1280, 900
	phoneWidth, phoneHeight   = 390, 844
)

// startBrowser starts a headless Chromium at laptop width for t (Start).
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	return Start(t, laptopWidth, laptopHeight)
}

// TestSettingsInBrowser signs up, creates a key and uses it, revokes it and sees it refused,
// signs out and back in, and gets a wrong password's message, all through the page in Chromium.
func TestSettingsInBrowser(t *testing.T) {
	tg := exchangetest.StartDev(t)
	market := tg.NewMarket(t, map[string]any{"question": "Will it rain in Lisbon on 1 June 2027?", "category": "weather"})
	browser := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, 2*time.Minute)
	defer cancel()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	// submit clicks a button that sends a form and waits for the page it leads to.
	submit := func(what, button string, wantStatus int) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.Status != int64(wantStatus) {
			t.Fatalf("%s: the page answered %d, want %d", what, resp.Status, wantStatus)
		}
	}
	expectText := func(sel, want string) {
		t.Helper()
		if got := text(sel); !strings.Contains(got, want) {
			t.Fatalf("%s says %q, want %q", sel, got, want)
		}
	}
	api := func(key string) int {
		t.Helper()
		status, _ := (&exchangetest.Client{T: tg, Key: key}).Do(t, "GET", "/markets", nil)
		return status
	}

	// Signed out, the page sends us to sign in; from there, to sign up.
	do("open the settings page", chromedp.Navigate(tg.URL+"/settings"), chromedp.WaitVisible(chromedp.ID("sign-in-form")))
	expectText("#flash", "Sign in to see your developer settings.")
	do("go to sign-up", chromedp.Click(chromedp.ID("to-sign-up")), chromedp.WaitVisible(chromedp.ID("sign-up-form")))
	do("fill in sign-up", chromedp.SendKeys(chromedp.ID("name"), "ada-lovelace"),
		chromedp.SendKeys(chromedp.ID("password"), "analytical engine 1843"))
	submit("sign up", "#sign-up", http.StatusOK)
	expectText("#flash", "Your account is open.")
	expectText("#available", "$10,000.00")

	// A first key, used by a bot to read the markets and place an order.
	do("label a key", chromedp.SendKeys(chromedp.ID("label"), "market maker (laptop)"))
	submit("create a key", "#create-key", http.StatusCreated)
	first, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("new-key")))
	if err != nil || !strings.HasPrefix(first, "pmx_") {
		t.Fatalf("the new key is %q (%v)", first, err)
	}
	if status := api(first); status != http.StatusOK {
		t.Fatalf("GET /api/v1/markets with the new key: %d, want 200", status)
	}
	(&exchangetest.Client{T: tg, Key: first}).Place(t, market.ID, "BUY", "YES", 62, 150)

	// A second key, on the reloaded page that now shows the order and the locked cash.
	do("reload", chromedp.Navigate(tg.URL+"/settings"), chromedp.WaitVisible(chromedp.ID("orders")))
	expectText("#orders", "Will it rain in Lisbon on 1 June 2027?")
	expectText("#locked", "$93.00")
	do("label another key", chromedp.SendKeys(chromedp.ID("label"), "arbitrage bot"))
	submit("create another key", "#create-key", http.StatusCreated)
	second, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("new-key")))
	if err != nil || second == first {
		t.Fatalf("the second key is %q (%v)", second, err)
	}
	expectText("#keys", "market maker (laptop)")
	expectText("#keys", "arbitrage bot")

	// A scoped, expiring key bound to addresses: an operations desk's key that can stop the bots
	// but not trade. A malformed range is refused on its field, the choices kept.
	do("choose a scoped key", chromedp.SendKeys(chromedp.ID("label"), "ops desk"),
		chromedp.SetValue(chromedp.ID("scope"), "cancel"), chromedp.SetValue(chromedp.ID("expires"), "7"),
		chromedp.SendKeys(chromedp.ID("allowlist"), "127.0.0.1/8"))
	submit("create a key with a malformed range", "#create-key", http.StatusBadRequest)
	expectText("#allowlist-error", "write 127.0.0.0/8")
	if scope, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("scope"))); err != nil || scope != "cancel" {
		t.Fatalf("the scope after a refusal is %q (%v), want cancel kept", scope, err)
	}
	do("fix the range", chromedp.SetValue(chromedp.ID("allowlist"), "127.0.0.0/8, ::1"))
	submit("create the scoped key", "#create-key", http.StatusCreated)
	desk, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("new-key")))
	if err != nil || !strings.HasPrefix(desk, "pmx_") {
		t.Fatalf("the scoped key is %q (%v)", desk, err)
	}
	row := fmt.Sprintf(`tr[data-prefix=%q]`, desk[:len("pmx_")+16])
	expectText(row+" .scope", "cancel")
	expectText(row+" .expires", time.Now().UTC().AddDate(0, 0, 7).Format("2 Jan 2006"))
	expectText(row+" .allowlist", "127.0.0.0/8, ::1/128")
	deskClient := &exchangetest.Client{T: tg, Key: desk}
	deskClient.ExpectError(t, "POST", "/order", exchangetest.OrderBody(market.ID, "BUY", "YES", 50, 1), http.StatusForbidden, "insufficient_scope")
	var listed struct{ Keys []apiserver.APIKey }
	deskClient.Expect(t, "GET", "/account/keys", nil, http.StatusOK, &listed)
	if len(listed.Keys) != 3 || listed.Keys[0].Label != "ops desk" || listed.Keys[0].Scope != "cancel" || listed.Keys[0].ExpiresAt == nil {
		t.Fatalf("the API lists %+v, want the ops desk's key first, cancel, expiring", listed.Keys)
	}
	screenshots(t, ctx)

	// The copy button runs (the page's script is allowed by its CSP).
	do("copy", chromedp.Click(chromedp.ID("copy-key")))
	label, err := chromedp.Run(ctx, chromedp.Poll[string](`(t => t !== "Copy" && t)(document.getElementById("copy-key").textContent)`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil || (label != "Copied" && label != "Press Ctrl+C") {
		t.Fatalf("the copy button says %q after a click (%v)", label, err)
	}

	// Revoke the first key: the API refuses it at once; the second still works.
	prefix := first[:len("pmx_")+16] // the key's public part; the secret after it may hold '_' too
	submit("revoke", fmt.Sprintf(`tr[data-prefix=%q] button`, prefix), http.StatusOK)
	expectText("#flash", "The key is revoked.")
	expectText(fmt.Sprintf(`tr[data-prefix=%q]`, prefix), "Revoked")
	if status := api(first); status != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/markets with the revoked key: %d, want 401", status)
	}
	if status := api(second); status != http.StatusOK {
		t.Fatalf("GET /api/v1/markets with the other key: %d, want 200", status)
	}

	// Sign out; a wrong password is refused with a message; the right one signs back in.
	submit("sign out", "#sign-out", http.StatusOK)
	expectText("#flash", "You are signed out.")
	do("fill in a wrong password", chromedp.SendKeys(chromedp.ID("name"), "ada-lovelace"),
		chromedp.SendKeys(chromedp.ID("password"), "difference engine"))
	submit("sign in with a wrong password", "#sign-in", http.StatusUnauthorized)
	expectText("#error", "Wrong account name or password.")
	if name, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("name"))); err != nil || name != "ada-lovelace" {
		t.Fatalf("the name field holds %q (%v), want it kept", name, err)
	}
	do("fill in the password", chromedp.SendKeys(chromedp.ID("password"), "analytical engine 1843"))
	submit("sign in", "#sign-in", http.StatusOK)
	expectText(".who-name", "ada-lovelace")
	expectText(fmt.Sprintf(`tr[data-prefix=%q]`, prefix), "Revoked")
	expectText("#keys", "arbitrage bot")

	// At phone width nothing is wider than the screen.
	do("phone width", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	if err != nil || !fits {
		t.Fatalf("at %dpx the page is wider than the screen (%v)", phoneWidth, err)
	}
}

// screenshots saves the page as it is, at laptop width to $PMX_SCREENSHOT and at phone width to
// $PMX_SCREENSHOT_PHONE, paths relative to the repository root.
func screenshots(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, s := range []struct {
		env           string
		width, height int64
		opts          []chromedp.EmulateViewportOption
	}{
		{"PMX_SCREENSHOT", laptopWidth, laptopHeight, nil},
		{"PMX_SCREENSHOT_PHONE", phoneWidth, phoneHeight, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulateScale(2)}},
	} {
		path := os.Getenv(s.env)
		if path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(repoRoot(t), path)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(s.width, s.height, s.opts...)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("saved %s (%d×%d)", path, s.width, s.height)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(laptopWidth, laptopHeight)); err != nil {
		t.Fatal(err)
	}
}

// repoRoot is the directory of go.mod, above the test's working directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
