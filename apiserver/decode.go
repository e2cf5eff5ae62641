package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// maxBody bounds every request body.
const maxBody = 64 << 10

// readBody reads a request body of at most maxBody bytes.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, httpkit.NewError(http.StatusBadRequest, "body_too_large", "the request body is larger than %d bytes; send less", maxBody)
	}
	if err != nil {
		return nil, httpkit.NewError(http.StatusBadRequest, "unreadable_body", "the request body could not be read: %v", err)
	}
	return body, nil
}

// readObject reads a request body that must be a JSON object.
func readObject(r *http.Request) (object, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return decodeObject(body)
}

// object is a decoded JSON object whose fields are checked one by one, so that each error can
// name its field. Unknown fields are ignored; a key repeated in any object of the body is refused,
// rather than letting the last one win.
type object map[string]json.RawMessage

func decodeObject(body []byte) (object, error) {
	var o object
	if err := json.Unmarshal(body, &o); err != nil || o == nil {
		return nil, httpkit.NewError(http.StatusBadRequest, "malformed_json", "the body must be a JSON object: %s", jsonProblem(err))
	}
	if key, ok := firstDuplicate(body); ok {
		return nil, errDuplicateKey(key)
	}
	return o, nil
}

func errDuplicateKey(key string) error {
	return httpkit.FieldError(key, "duplicate_key", "the key %q appears more than once in an object; send each key once", key)
}

// oneKeyPerField refuses two keys that encoding/json would decode into the same struct field, one
// of fields (JSON names): it matches a key to a field without regard to case, so "question" and
// "Question" collide as surely as a repeated key, and the last would win. For a body decoded into
// a struct by json.Unmarshal.
func (o object) oneKeyPerField(fields []string) error {
	for _, f := range fields {
		n := 0
		for k := range o {
			if strings.EqualFold(k, f) {
				n++
			}
		}
		if n > 1 {
			return httpkit.FieldError(f, "duplicate_key", "%s is given more than once (keys are matched to it without regard to case); send it once", f)
		}
	}
	return nil
}

// jsonNames returns the JSON names of a struct type's fields, from their json tags.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// firstDuplicate returns the first key, in the order of the text, that repeats a key of the same
// object, at any depth of body, which must be valid JSON. Keys are compared as encoding/json
// decodes them (escapes resolved, invalid UTF-8 replaced), since that is what would collide.
func firstDuplicate(body []byte) (string, bool) {
	s := scanner{b: body}
	return s.value()
}

// scanner walks a valid JSON text looking for a repeated key.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// next skips white space and returns the byte after it, consuming it.
func (s *scanner) next() byte {
	s.space()
	c := s.b[s.i]
	s.i++
	return c
}

func (s *scanner) value() (string, bool) {
	switch c := s.next(); c {
	case '{':
		return s.object()
	case '[':
		s.space()
		if s.b[s.i] == ']' {
			s.i++
			return "", false
		}
		for {
			if key, ok := s.value(); ok {
				return key, ok
			}
			if s.next() == ']' {
				return "", false
			}
		}
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.b) && s.b[s.i] != ',' && s.b[s.i] != ']' && s.b[s.i] != '}' && !isSpace(s.b[s.i]) {
			s.i++
		}
	}
	return "", false
}

// str consumes the rest of a string whose opening quote is consumed and returns its text with the
// quotes.
func (s *scanner) str() []byte {
	start := s.i - 1
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	return s.b[start:s.i]
}

func (s *scanner) object() (string, bool) {
	s.space()
	if s.b[s.i] == '}' {
		s.i++
		return "", false
	}
	var small [8][]byte
	keys := small[:0] // few keys: compared one by one
	var many map[string]struct{}
	for {
		s.next() // the key's opening quote
		key := s.str()
		if in := key[1 : len(key)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			key = in
		} else {
			var k string
			_ = json.Unmarshal(key, &k) // a valid JSON string
			key = []byte(k)
		}
		if many != nil {
			if _, ok := many[string(key)]; ok {
				return string(key), true
			}
			many[string(key)] = struct{}{}
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					return string(key), true
				}
			}
			if keys = append(keys, key); len(keys) > len(small) {
				many = make(map[string]struct{}, 2*len(keys))
				for _, k := range keys {
					many[string(k)] = struct{}{}
				}
			}
		}
		s.next() // ':'
		if key, ok := s.value(); ok {
			return key, ok
		}
		if s.next() == '}' {
			return "", false
		}
	}
}

func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return "got null"
	case errors.As(err, &syntax):
		return syntax.Error()
	case errors.As(err, &typ):
		return "got a JSON " + typ.Value
	}
	return err.Error()
}

// raw returns a field's JSON, or a missing_field error; null counts as missing.
func (o object) raw(field string) (json.RawMessage, error) {
	v, ok := o[field]
	if !ok || bytes.Equal(v, []byte("null")) {
		return nil, httpkit.FieldError(field, "missing_field", "%s is required", field)
	}
	return v, nil
}

func (o object) string(field string) (string, error) {
	v, err := o.raw(field)
	if err != nil {
		return "", err
	}
	if v[0] != '"' {
		return "", httpkit.FieldError(field, "invalid_type", "%s must be a string", field)
	}
	// The object was decoded, so v is a valid JSON string: without escapes and in valid UTF-8 it
	// is its own value, which json.Unmarshal would only copy (it replaces invalid UTF-8).
	if in := v[1 : len(v)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in), nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", httpkit.FieldError(field, "invalid_type", "%s must be a string", field)
	}
	return s, nil
}

// has reports whether an optional field is given: present and not null.
func (o object) has(field string) bool {
	v, ok := o[field]
	return ok && !bytes.Equal(v, []byte("null"))
}

func (o object) boolean(field string) (bool, error) {
	v, err := o.raw(field)
	if err != nil {
		return false, err
	}
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, httpkit.FieldError(field, "invalid_type", "%s must be true or false", field)
}

// time reads an RFC 3339 time (parseTime), at the microsecond precision Postgres keeps.
func (o object) time(field string) (time.Time, error) {
	s, err := o.string(field)
	if err != nil {
		return time.Time{}, err
	}
	t, err := parseTime(field, s)
	return t.Truncate(time.Microsecond), err
}

// parseTime reads a time the API takes, in a body or a query: RFC 3339, within the exchange's
// range once in UTC (domain.CheckTime), which it is returned in.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, httpkit.FieldError(field, "invalid_value", "%s must be an RFC 3339 time like 2030-01-31T18:00:00Z", field)
	}
	return t.UTC(), apiTimeError(domain.CheckTime(field, t))
}

// apiTimeError is a refusal of domain.CheckTime as the API's error, nil if there is none.
func apiTimeError(err error) error {
	var e *domain.Error
	if !errors.As(err, &e) {
		return err
	}
	return httpkit.FieldError(e.Field, e.Code, "%s", e.Message)
}

func (o object) uuid(field string) (uuid.UUID, error) {
	s, err := o.string(field)
	if err != nil {
		return uuid.UUID{}, err
	}
	return parseUUID(field, s)
}

// integer reads a whole number in [lo, hi]. The number's literal text decides, not a float64 it
// might round to: a literal whose exact decimal value is whole (10, 10.0, 1e1, 1.5e1) is that
// number; a string, any fraction (9.99999999999999999 too) or an out-of-range number is not.
func (o object) integer(field string, lo, hi int64) (int64, error) {
	v, err := o.raw(field)
	if err != nil {
		return 0, err
	}
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, httpkit.FieldError(field, "invalid_type", "%s must be a number", field)
	}
	n, whole, fits := parseInteger(v)
	switch {
	case !whole:
		return 0, httpkit.FieldError(field, "not_an_integer", "%s must be a whole number", field)
	case !fits || n < lo || n > hi:
		return 0, httpkit.FieldError(field, "out_of_range", "%s must be from %d to %d", field, lo, hi)
	}
	return n, nil
}

// parseInteger reads a JSON number literal exactly: whole reports whether its decimal value is a
// whole number, and fits whether that number fits an int64, which n then is.
func parseInteger(lit []byte) (n int64, whole, fits bool) {
	neg := len(lit) > 0 && lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	mantissa, exponent, hasExp := bytes.Cut(lit, []byte("e"))
	if !hasExp {
		mantissa, exponent, hasExp = bytes.Cut(lit, []byte("E"))
	}
	intPart, frac, _ := bytes.Cut(mantissa, []byte("."))
	// The value is 0.digits × 10^point once leading zeros are gone; trailing zeros of digits do
	// not change it.
	digits := make([]byte, 0, 24)
	digits = append(append(digits, intPart...), frac...)
	point := int64(len(intPart))
	if hasExp {
		// A JSON exponent is [+-]digits. Past ±1e15 the answer no longer depends on it (bodies
		// are far shorter), so it is capped rather than overflowing.
		sign := int64(1)
		if len(exponent) > 0 && (exponent[0] == '+' || exponent[0] == '-') {
			if exponent[0] == '-' {
				sign = -1
			}
			exponent = exponent[1:]
		}
		var e int64
		for _, c := range exponent {
			if e < 1e15 {
				e = e*10 + int64(c-'0')
			}
		}
		point += sign * e
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	digits = bytes.TrimRight(digits, "0")
	switch {
	case len(digits) == 0:
		return 0, true, true
	case point < int64(len(digits)):
		return 0, false, false
	case point > 19: // at least 10^19, past int64
		return 0, true, false
	}
	for range point - int64(len(digits)) {
		digits = append(digits, '0')
	}
	if neg {
		digits = append([]byte{'-'}, digits...)
	}
	n, err := strconv.ParseInt(string(digits), 10, 64)
	return n, true, err == nil
}

func parseUUID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	// uuid.Parse also takes the urn: and {…} forms and 32 bare hex digits; the API takes only the
	// canonical 36-character form.
	if err != nil || len(s) != 36 {
		return uuid.UUID{}, httpkit.FieldError(field, "invalid_uuid", "%s must be a UUID like 123e4567-e89b-12d3-a456-426614174000", field)
	}
	return id, nil
}

// orderRequest is a decoded, validated POST /order body.
type orderRequest struct {
	Market   uuid.UUID
	Side     engine.Side
	Outcome  engine.Outcome
	Price    int
	Quantity int64

	TimeInForce   engine.TimeInForce
	ExpiresAt     time.Time // GTD only
	PostOnly      bool
	SelfTrade     engine.SelfTrade
	ClientOrderID string    // "" when not given
	OrderGroupID  uuid.UUID // uuid.Nil when not given

	// pastExpiry refuses a GTD placement whose expiresAt is not in the future, when it has a
	// client order id: it may be a retry of a placement made while that time was still ahead, so
	// it is refused only once no order of the account has the id (Server.place); a replay is
	// answered with its order whenever it comes.
	pastExpiry error
}

// placement fingerprints the parameters of a placement with a client order id, as the order's row
// keeps them: a retry must repeat every one of them to be answered with the order.
func (r *orderRequest) placement() string {
	expires := ""
	if !r.ExpiresAt.IsZero() {
		expires = r.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	p := fmt.Sprintf("%s %s %s %d %d %s %s %t %s", r.Market, r.Side, r.Outcome, r.Price, r.Quantity,
		r.TimeInForce, expires, r.PostOnly, r.SelfTrade)
	if r.OrderGroupID != uuid.Nil {
		p += " " + r.OrderGroupID.String() // only then: the fingerprints of orders in no group stay as they were
	}
	return p
}

// request is the placement as the exchange takes it, for account.
func (r *orderRequest) request(account int64) exchange.PlaceRequest {
	return exchange.PlaceRequest{Account: account, Market: r.Market, Side: r.Side, Outcome: r.Outcome, Price: r.Price,
		Quantity: r.Quantity, TimeInForce: r.TimeInForce, ExpiresAt: r.ExpiresAt, PostOnly: r.PostOnly,
		SelfTrade: r.SelfTrade, ClientOrderID: r.ClientOrderID, Placement: r.placement(), OrderGroupID: r.OrderGroupID}
}

// decodeOrder decodes and validates a placement; now is the time an expiry must be after.
func decodeOrder(body []byte, maxQuantity int64, now time.Time) (orderRequest, error) {
	o, err := decodeObject(body)
	if err != nil {
		return orderRequest{}, err
	}
	return o.order(maxQuantity, now)
}

// order reads a placement from its object. The engine owns the order rules; this names the field
// at fault and adds the service's rules: the quantity limit, the expiry and client order ids.
func (o object) order(maxQuantity int64, now time.Time) (orderRequest, error) {
	var r orderRequest
	var err error
	if r.Market, err = o.uuid("marketId"); err != nil {
		return r, err
	}
	side, err := o.string("side")
	if err != nil {
		return r, err
	}
	var ok bool
	if r.Side, ok = engine.ParseSide(side); !ok {
		return r, httpkit.FieldError("side", "invalid_value", "side must be BUY or SELL")
	}
	outcome, err := o.string("outcome")
	if err != nil {
		return r, err
	}
	if r.Outcome, ok = engine.ParseOutcome(outcome); !ok {
		return r, httpkit.FieldError("outcome", "invalid_value", "outcome must be YES or NO")
	}
	price, err := o.integer("price", engine.MinPrice, engine.MaxPrice)
	if err != nil {
		return r, err
	}
	r.Price = int(price)
	if r.Quantity, err = o.integer("quantity", 1, maxQuantity); err != nil {
		return r, err
	}

	if o.has("timeInForce") {
		tif, err := o.string("timeInForce")
		if err != nil {
			return r, err
		}
		if r.TimeInForce, ok = engine.ParseTimeInForce(tif); !ok {
			return r, httpkit.FieldError("timeInForce", "invalid_value", "timeInForce must be GTC, IOC, FOK or GTD")
		}
	}
	switch {
	case o.has("expiresAt") && r.TimeInForce != engine.GTD:
		return r, httpkit.FieldError("expiresAt", "invalid_value", "expiresAt is only for GTD orders: set timeInForce to GTD, or leave expiresAt out")
	case r.TimeInForce == engine.GTD:
		if r.ExpiresAt, err = o.time("expiresAt"); err != nil {
			return r, err
		}
		if !r.ExpiresAt.After(now) {
			r.pastExpiry = httpkit.FieldError("expiresAt", "invalid_value", "expiresAt must be in the future; it is %s and the exchange's time is %s",
				r.ExpiresAt.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
	}
	if o.has("postOnly") {
		if r.PostOnly, err = o.boolean("postOnly"); err != nil {
			return r, err
		}
		if r.PostOnly && !r.TimeInForce.Rests() {
			return r, httpkit.FieldError("postOnly", "invalid_value", "postOnly is for orders that rest (GTC or GTD), not %s", r.TimeInForce)
		}
	}
	if o.has("selfTradePrevention") {
		mode, err := o.string("selfTradePrevention")
		if err != nil {
			return r, err
		}
		if r.SelfTrade, ok = engine.ParseSelfTrade(mode); !ok {
			return r, httpkit.FieldError("selfTradePrevention", "invalid_value", "selfTradePrevention must be CANCEL_RESTING or CANCEL_INCOMING")
		}
	}
	if o.has("clientOrderId") {
		if r.ClientOrderID, err = o.string("clientOrderId"); err != nil {
			return r, err
		}
		if !domain.ValidClientOrderID(r.ClientOrderID) {
			return r, httpkit.FieldError("clientOrderId", "invalid_value", "clientOrderId must be %s", domain.ClientOrderIDRule)
		}
	}
	if o.has("orderGroupId") {
		if r.OrderGroupID, err = o.uuid("orderGroupId"); err != nil {
			return r, err
		}
	}
	if r.pastExpiry != nil && r.ClientOrderID == "" {
		return r, r.pastExpiry
	}
	eo := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity, TimeInForce: r.TimeInForce,
		PostOnly: r.PostOnly, SelfTrade: r.SelfTrade}
	if err := eo.Validate(); err != nil { // cannot fail after the checks above; kept as the rule's owner
		return r, httpkit.FieldError("", "invalid_order", "%v", err)
	}
	return r, nil
}
