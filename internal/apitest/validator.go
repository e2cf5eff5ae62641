// Package apitest checks real HTTP exchanges of the public API and of the admin API against their
// OpenAPI documents (apiserver.OpenAPIDocument, apiserver.AdminOpenAPIDocument), so that
// integration tests verify the contract on every response they receive, and can assert at the end
// that every documented status of every operation was exercised at least once.
//
// Typical use in a suite that talks to a running server:
//
//	v := apitest.NewValidator(t)
//	status, body := v.Do(t, client, req) // fails t if the response breaks the document
//	...
//	if missing := v.Uncovered(); len(missing) > 0 { t.Errorf("never exercised: %v", missing) }
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/pmx-dev/pmx/apiserver"
)

// Validator checks requests and responses against the OpenAPI document. It is safe for
// concurrent use (parallel subtests may share one).
type Validator struct {
	doc        *openapi3.T
	router     routers.Router
	documented []string // "METHOD /path STATUS", sorted

	mu   sync.Mutex
	seen map[string]bool
}

// Responses must carry canonical (lowercase, hyphenated) UUIDs; requests may use either case,
// since servers commonly accept both.
var (
	responseUUID = openapi3.NewRegexpFormatValidator(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	requestUUID  = openapi3.NewRegexpFormatValidator(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	statusCode   = regexp.MustCompile(`^[1-5][0-9][0-9]$`)
)

// NewValidator loads apiserver.OpenAPIDocument, validates the document itself and builds a
// router for it. It fails t at once if any of that goes wrong.
func NewValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewFromDocument(apiserver.OpenAPIDocument)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	return v
}

// NewAdminValidator is NewValidator for the admin API's document (apiserver.AdminOpenAPIDocument),
// whose server URL is /admin/v1.
func NewAdminValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewFromDocument(apiserver.AdminOpenAPIDocument)
	if err != nil {
		t.Fatalf("apitest: the admin document: %v", err)
	}
	return v
}

// NewFromDocument builds a Validator for an OpenAPI 3 document given as YAML or JSON. The
// document must validate, and every response of every operation must be keyed by an explicit
// status code (no "default", no "2XX"), so that coverage can be tracked.
func NewFromDocument(data []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	// gorillamux matches a relative server URL ("/api/v1") as a path prefix on any scheme and
	// host, so requests to http://127.0.0.1:PORT/api/v1/... and server-side requests whose URL
	// holds only the path both resolve. (The legacy router compares the server URL with the
	// whole absolute request URL and so never matches a relative server.)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("building a router for the OpenAPI document: %w", err)
	}
	v := &Validator{doc: doc, router: router, seen: map[string]bool{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if !statusCode.MatchString(status) {
					return nil, fmt.Errorf("%s %s: response key %q is not an explicit status code", method, path, status)
				}
				v.documented = append(v.documented, key(method, path, status))
			}
		}
	}
	slices.Sort(v.documented)
	return v, nil
}

// Document returns the parsed document.
func (v *Validator) Document() *openapi3.T { return v.doc }

func key(method, path, status string) string { return method + " " + path + " " + status }

// Validate checks one exchange: req is the request that was sent (its body is not read or
// validated, and its credentials are not checked), status, header and body the response
// received. It returns nil when the response matches the document, and otherwise an error
// naming the method, the path, the status and what is wrong. It checks that:
//
//   - the request's method and path are a documented operation under the server URL;
//   - the status is one the operation documents;
//   - the headers the document marks required are present and valid (WWW-Authenticate on 401);
//   - the Content-Type is JSON and the body matches the response schema, formats included
//     (date-time, lowercase UUIDs);
//   - a request whose query parameters the document deems invalid (missing marketId, malformed
//     UUID, unknown enum value, limit out of range, ...) did not get a 2xx/3xx.
//
// Every documented (method, path, status) seen is recorded for Covered and Uncovered, whether
// or not the body matched.
func (v *Validator) Validate(req *http.Request, status int, header http.Header, body []byte) error {
	where := fmt.Sprintf("%s %s -> %d", req.Method, req.URL.Path, status)
	route, pathParams, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s: no operation of the OpenAPI document matches the request: %w", where, err)
	}
	where = fmt.Sprintf("%s %s (operation %s %s) -> %d", req.Method, req.URL.Path, route.Method, route.Path, status)
	// Checked here rather than left to kin-openapi, which waves 301, 304, 307 and 308 through.
	if route.Operation.Responses.Status(status) == nil {
		return fmt.Errorf("%s: status %d is not documented for this operation (documented: %s)",
			where, status, strings.Join(slices.Sorted(maps.Keys(route.Operation.Responses.Map())), ", "))
	}
	v.mu.Lock()
	v.seen[key(route.Method, route.Path, strconv.Itoa(status))] = true
	v.mu.Unlock()

	ctx := context.Background()
	reqInput := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams,
		Route:      route,
		Options: &openapi3filter.Options{
			ExcludeRequestBody:      true,
			SkipSettingDefaults:     true,
			AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
			SchemaValidationOptions: schemaOptions(requestUUID),
		},
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, reqInput); reqErr != nil && status < 400 {
		return fmt.Errorf("%s: the server accepted a request that the document says is invalid (%s)", where, describe(reqErr))
	}

	if header == nil {
		header = http.Header{}
	}
	respOptions := &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		SchemaValidationOptions: schemaOptions(responseUUID),
	}
	respInput := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqInput,
		Status:                 status,
		Header:                 header,
		Options:                respOptions,
	}
	respInput.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, respInput); err != nil {
		return fmt.Errorf("%s: %s", where, describe(err))
	}
	return nil
}

func schemaOptions(uuid openapi3.StringFormatValidator) []openapi3.SchemaValidationOption {
	return []openapi3.SchemaValidationOption{
		openapi3.WithStringFormatValidator("uuid", uuid),
		openapi3.DisableSchemaErrorDetails(),
	}
}

// describe renders a kin-openapi error on one line. Schema errors are reduced to their leaves
// (allOf and multi-errors are unwrapped), each as: where in the body (JSON pointer), what is
// wrong, and the offending value, shortened — instead of kin-openapi's dump of the whole schema.
func describe(err error) string {
	if re, ok := errors.AsType[*openapi3filter.ResponseError](err); ok {
		if re.Err == nil {
			return re.Reason
		}
		return re.Reason + ": " + strings.Join(leaves(re.Err), "; ")
	}
	if re, ok := errors.AsType[*openapi3filter.RequestError](err); ok && re.Parameter != nil && re.Err != nil {
		return fmt.Sprintf("%s parameter %q: %s", re.Parameter.In, re.Parameter.Name, strings.Join(leaves(re.Err), "; "))
	}
	return strings.Join(leaves(err), "; ")
}

func leaves(err error) []string {
	if me, ok := errors.AsType[openapi3.MultiError](err); ok {
		var out []string
		for _, e := range me {
			out = append(out, leaves(e)...)
		}
		return out
	}
	se, ok := errors.AsType[*openapi3.SchemaError](err)
	if !ok {
		return []string{strings.ReplaceAll(err.Error(), "\n", " ")}
	}
	if se.Origin != nil {
		if _, ok := errors.AsType[openapi3.MultiError](se.Origin); ok {
			return leaves(se.Origin)
		}
		if _, ok := errors.AsType[*openapi3.SchemaError](se.Origin); ok {
			return leaves(se.Origin)
		}
	}
	reason := se.Reason
	if reason == "" && se.Origin != nil {
		reason = se.Origin.Error()
	}
	if reason == "" {
		reason = fmt.Sprintf("does not match schema keyword %q", se.SchemaField)
	}
	value, jerr := json.Marshal(se.Value)
	if jerr != nil {
		value = fmt.Appendf(nil, "%v", se.Value)
	}
	return []string{fmt.Sprintf("at %q: %s (value %s)", "/"+strings.Join(se.JSONPointer(), "/"), reason, shorten(value, 160))}
}

func shorten(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// CheckResponse validates one exchange (see Validate) and reports a mismatch with t.Errorf,
// quoting the start of the body. The test goes on.
func (v *Validator) CheckResponse(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if err := v.Validate(req, status, header, body); err != nil {
		t.Errorf("response does not match the OpenAPI document: %v\nresponse body: %s", err, shorten(body, 2000))
	}
}

// Do sends req with c (http.DefaultClient when nil), reads the whole response body, validates the exchange (see
// CheckResponse) and returns the status and the body. A transport error or an unreadable body
// fails the test with t.Fatalf, so call Do from the test's own goroutine.
func (v *Validator) Do(t testing.TB, c *http.Client, req *http.Request) (status int, body []byte) {
	t.Helper()
	resp, body := v.DoResponse(t, c, req)
	return resp.StatusCode, body
}

// DoResponse is Do for callers that also need the response headers. The returned response's
// Body has been read and closed; the bytes are returned separately.
func (v *Validator) DoResponse(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading the response body: %v", req.Method, req.URL, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	v.CheckResponse(t, req, resp.StatusCode, resp.Header, body)
	return resp, body
}

// Covered returns the documented (method, path, status) triples seen so far, keyed
// "METHOD /path STATUS" with the document's path (relative to the server URL), e.g.
// "GET /market 201".
func (v *Validator) Covered() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]bool, len(v.seen))
	for k := range v.seen {
		out[k] = true
	}
	return out
}

// Documented returns every (method, path, status) triple the document defines, sorted, in the
// format of Covered.
func (v *Validator) Documented() []string { return slices.Clone(v.documented) }

// Uncovered returns the documented (method, path, status) triples never seen so far, sorted,
// in the format of Covered. A suite that exercises the whole API asserts it is empty.
func (v *Validator) Uncovered() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, k := range v.documented {
		if !v.seen[k] {
			out = append(out, k)
		}
	}
	return out
}
