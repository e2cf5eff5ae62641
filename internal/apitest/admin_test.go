package apitest

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const adminBase = "http://127.0.0.1:12345/admin/v1"

// TestAdminDocument checks the admin API's document: every operation takes the admin token and
// answers its refusals (401 with WWW-Authenticate, 429; 400 for every one that takes input), and the validator built from it tells
// documented answers from broken ones.
func TestAdminDocument(t *testing.T) {
	v := NewAdminValidator(t)
	if s := v.Document().Servers; len(s) != 1 || s[0].URL != "/admin/v1" {
		t.Errorf("servers = %v, want one with url /admin/v1", s)
	}
	want := []string{"DELETE /events/{id}/fees", "DELETE /markets/{id}/fees", "GET /halt", "POST /accounts", "POST /accounts/{id}/keys", "POST /events", "POST /events/{id}/cancel",
		"POST /events/{id}/close", "POST /events/{id}/pause", "POST /events/{id}/reopen", "POST /events/{id}/resolve",
		"POST /events/{id}/resume", "POST /markets", "POST /markets/{id}/cancel", "POST /markets/{id}/close",
		"POST /markets/{id}/pause", "POST /markets/{id}/reopen", "POST /markets/{id}/resolve", "POST /markets/{id}/resume",
		"PUT /events/{id}/fees", "PUT /halt", "PUT /markets/{id}/fees"}
	var ops []string
	for path, item := range v.Document().Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, method+" "+path)
			if op.Security != nil && len(*op.Security) > 0 || len(v.Document().Security) != 1 || v.Document().Security[0]["adminToken"] == nil {
				t.Errorf("%s %s: security is not the document's adminToken", method, path)
			}
			for _, status := range []string{"400", "401", "429"} {
				if status == "400" && method == "GET" {
					continue // a read of the admin API takes no input to refuse
				}
				if op.Responses.Value(status) == nil {
					t.Errorf("%s %s: no %s", method, path, status)
				}
			}
			if h := op.Responses.Value("401").Value.Headers["WWW-Authenticate"]; h == nil || !h.Value.Required {
				t.Errorf("%s %s 401: WWW-Authenticate is not a required header", method, path)
			}
		}
	}
	slices.Sort(ops)
	if !slices.Equal(ops, want) {
		t.Errorf("operations %q, want %q", ops, want)
	}

	created, _ := json.Marshal(map[string]any{"account": account(), "apiKey": "pmx_0123456789abcdef_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"})
	noKey, _ := json.Marshal(map[string]any{"account": account()})
	mkt, _ := json.Marshal(market())
	broken, _ := json.Marshal(del(market(), "status"))
	refusal := []byte(`{"error":"cannot close a market that is CLOSED","details":{"code":"illegal_transition"}}`)
	for _, tc := range []struct {
		path   string
		status int
		body   []byte
		err    string // "" when valid
	}{
		{"/accounts", 201, created, ""},
		{"/accounts", 201, noKey, `"apiKey"`},
		{"/accounts", 409, refusal, ""},
		{"/accounts", 404, refusal, "not documented"},
		{"/markets", 201, mkt, ""},
		{"/markets", 201, broken, `"status"`},
		{"/markets/" + marketID + "/close", 200, mkt, ""},
		{"/markets/" + marketID + "/close", 409, refusal, ""},
		{"/markets/" + marketID + "/close", 409, []byte(`{"error":"no code"}`), `"details"`},
		{"/markets/" + marketID + "/resolve", 503, refusal, ""},
		{"/markets/" + marketID + "/resolve", 401, refusal, "WWW-Authenticate"},
		{"/markets/" + marketID + "/settle", 200, mkt, "no operation"},
	} {
		req := httptest.NewRequest("POST", adminBase+tc.path, nil)
		err := v.Validate(req, tc.status, jsonHeader, tc.body)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %d: %v", tc.path, tc.status, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %d: got %v, want an error saying %s", tc.path, tc.status, err, tc.err)
		}
	}
	// The public API's paths are not the admin document's.
	if err := v.Validate(httptest.NewRequest("GET", base+"/account", nil), 200, jsonHeader, []byte(`{}`)); err == nil {
		t.Error("the admin document matched a public API path")
	}
}
