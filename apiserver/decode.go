package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/httpkit"
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
// name its field. Unknown fields are ignored.
type object map[string]json.RawMessage

func decodeObject(body []byte) (object, error) {
	var o object
	if err := json.Unmarshal(body, &o); err != nil || o == nil {
		return nil, httpkit.NewError(http.StatusBadRequest, "malformed_json", "the body must be a JSON object: %s", jsonProblem(err))
	}
	return o, nil
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

func (o object) uuid(field string) (uuid.UUID, error) {
	s, err := o.string(field)
	if err != nil {
		return uuid.UUID{}, err
	}
	return parseUUID(field, s)
}

// integer reads a whole number in [lo, hi]. A JSON number with a zero fraction (10.0, 1e2) is
// accepted; a string, a fraction or an out-of-range number is not.
func (o object) integer(field string, lo, hi int64) (int64, error) {
	v, err := o.raw(field)
	if err != nil {
		return 0, err
	}
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, httpkit.FieldError(field, "invalid_type", "%s must be a number", field)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		switch {
		case ferr != nil && !errors.Is(ferr, strconv.ErrRange):
			return 0, httpkit.FieldError(field, "invalid_type", "%s must be a number", field)
		case math.IsInf(f, 0) || math.Abs(f) > 1<<62:
			return 0, httpkit.FieldError(field, "out_of_range", "%s must be from %d to %d", field, lo, hi)
		case f != math.Trunc(f):
			return 0, httpkit.FieldError(field, "not_an_integer", "%s must be a whole number", field)
		}
		n = int64(f)
	}
	if n < lo || n > hi {
		return 0, httpkit.FieldError(field, "out_of_range", "%s must be from %d to %d", field, lo, hi)
	}
	return n, nil
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
}

// decodeOrder decodes and validates a placement. The engine owns the order rules; this names the
// field at fault and adds the service's quantity limit.
func decodeOrder(body []byte, maxQuantity int64) (orderRequest, error) {
	var r orderRequest
	o, err := decodeObject(body)
	if err != nil {
		return r, err
	}
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
	eo := engine.Order{Side: r.Side, Outcome: r.Outcome, Price: r.Price, Quantity: r.Quantity}
	if err := eo.Validate(); err != nil { // cannot fail after the checks above; kept as the rule's owner
		return r, httpkit.FieldError("", "invalid_order", "%v", err)
	}
	return r, nil
}
