package domain

import (
	"fmt"
	"time"
)

// The times the exchange takes from anyone (a GTD order's expiresAt, a market's closesAt and
// resolvesAt, a candle window's from and to) lie from EarliestTime to LatestTime once converted to
// UTC. RFC 3339 allows years 0000 to 9999 with offsets up to ±23:59, so a valid time can fall in
// year 10000 or year -1 in UTC, which encoding/json refuses to write (time.Time.MarshalJSON), as
// do Python's datetime and CEL's timestamps: such a time, once stored, fails every answer and event
// that carries it. The upper bound is the last instant every one of them can write. The lower
// bound is the Unix epoch: every time the exchange has a use for is after it, and clients that
// count in Unix seconds or milliseconds (JavaScript) never see a negative one.
var (
	EarliestTime = time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC)
	LatestTime   = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// TimeRange says the bounds, for error messages and documentation.
const TimeRange = "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in UTC, after its offset)"

// TimeInRange reports whether t lies from EarliestTime to LatestTime.
func TimeInRange(t time.Time) bool {
	return !t.Before(EarliestTime) && !t.After(LatestTime)
}

// CheckTime refuses a time outside TimeInRange with an out_of_range refusal naming field (a request
// field, e.g. "expiresAt"); nil if t is in range. It is the one rule for every time the exchange
// takes: the public API's decoders, the Market resource's rules and the shard's own check of what
// it is asked to place all call it.
func CheckTime(field string, t time.Time) error {
	if TimeInRange(t) {
		return nil
	}
	return &Error{Kind: Invalid, Code: "out_of_range", Field: field,
		Message: fmt.Sprintf("%s must be %s; it is in year %d in UTC", field, TimeRange, t.UTC().Year())}
}
