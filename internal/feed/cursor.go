package feed

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// An account's feed is one stream per holder (the shard that committed the events, by its holder
// name; "" for the stream every feed began with), each numbered by a gapless sequence of its own
// (docs/architecture.md §11). Where a client stands in it is a Cursor: the last seq it has seen of
// each stream, a stream it has seen nothing of being at 0. A client carries it as an opaque
// string, versioned: "v2." and the unpadded base64url of, for each stream with a seq above 0 in
// the holders' byte order, the holder's length and its seq as unsigned varints with the holder's
// bytes between them. The version-1 form was the single stream's seq as a number; 0 (from the
// start) still reads as the empty cursor, any other number is ErrCursorOutdated.

// Cursor is the last seq seen of each stream of an account's feed, by holder; a missing holder is
// at 0.
type Cursor map[string]int64

// cursorPrefix begins every cursor of this version.
const cursorPrefix = "v2."

// Limits of a cursor, which a client sends back: more streams than an account can have shards.
const (
	maxCursorStreams = 1024
	maxHolderLen     = 253 // a shard's name (a Kubernetes name)
)

// ErrCursorOutdated refuses a cursor in the version-1 form, a single seq above 0.
var ErrCursorOutdated = errors.New("this is a seq of the account feed's first version, which was one stream: the feed is now one stream per shard, and a position in it a cursor (a string beginning v2.); resume from the cursor a fresh subscription's confirmation or GET /api/v1/account/events (without after) gives, and read your orders and positions (GET /orders, /positions) for what happened since")

// Seq is the last seq seen of holder's stream.
func (c Cursor) Seq(holder string) int64 { return c[holder] }

// Clone returns a copy of c (never nil).
func (c Cursor) Clone() Cursor {
	out := make(Cursor, len(c))
	for h, s := range c {
		if s > 0 {
			out[h] = s
		}
	}
	return out
}

// Covers says whether c has seen everything o has: each stream's seq at least o's.
func (c Cursor) Covers(o Cursor) bool {
	for h, s := range o {
		if c[h] < s {
			return false
		}
	}
	return true
}

// Advance moves holder's stream on to seq, if that is further.
func (c Cursor) Advance(holder string, seq int64) {
	if seq > c[holder] {
		c[holder] = seq
	}
}

// Only says whether c is in holder's stream alone (the empty cursor is in every one).
func (c Cursor) Only(holder string) bool {
	for h, s := range c {
		if h != holder && s > 0 {
			return false
		}
	}
	return true
}

// String encodes c (see the package's comment on cursors).
func (c Cursor) String() string {
	holders := slices.Sorted(maps.Keys(c))
	var raw []byte
	for _, h := range holders {
		if c[h] <= 0 {
			continue
		}
		raw = binary.AppendUvarint(raw, uint64(len(h)))
		raw = append(raw, h...)
		raw = binary.AppendUvarint(raw, uint64(c[h]))
	}
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// ParseCursor reads a cursor a client sends: its String, or "0", the version-1 form of the start.
// A cursor reads back only in the one form String gives it (streams in order, no seq of 0), so
// two cursors are the same exactly when their strings are.
func ParseCursor(s string) (Cursor, error) {
	if s == "0" {
		return Cursor{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return nil, ErrCursorOutdated
	}
	payload, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return nil, errors.New(`not a cursor of the account's feed (one begins "v2."): give one the feed gave you`)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return nil, errors.New("the cursor is damaged (not base64url after v2.): give one the feed gave you")
	}
	c := Cursor{}
	prev := ""
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		if k <= 0 || n > maxHolderLen || uint64(len(raw)-k) < n {
			return nil, errors.New("the cursor is damaged (a stream's name): give one the feed gave you")
		}
		holder := string(raw[k : k+int(n)])
		raw = raw[k+int(n):]
		seq, k := binary.Uvarint(raw)
		if k <= 0 || seq == 0 || seq > 1<<63-1 {
			return nil, errors.New("the cursor is damaged (a stream's seq): give one the feed gave you")
		}
		raw = raw[k:]
		if len(c) > 0 && holder <= prev || len(c) == maxCursorStreams {
			return nil, errors.New("the cursor is damaged (its streams' order): give one the feed gave you")
		}
		c[holder], prev = int64(seq), holder
	}
	if c.String() != s { // a varint written long, say
		return nil, errors.New("the cursor is damaged (not in its one form): give one the feed gave you")
	}
	return c, nil
}
