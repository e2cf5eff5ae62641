package feed

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// TestCursorEncoding pins the cursor's form (a client keeps it, a server of a later release reads
// it) and reads it back.
func TestCursorEncoding(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cursor Cursor
		want   string
	}{
		{"the start", Cursor{}, "v2."},
		{"nil", nil, "v2."},
		{"zeros are left out", Cursor{"a": 0, "": 0}, "v2."},
		{"the first stream", Cursor{"": 5}, "v2.AAU"},
		{"a large seq", Cursor{"": 1<<63 - 1}, "v2.AP__________fw"},
		{"streams in order", Cursor{"shard-b": 1, "": 300, "shard-a": 2}, "v2.AKwCB3NoYXJkLWECB3NoYXJkLWIB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cursor.String()
			if got != tt.want {
				t.Fatalf("%v encodes as %q, want %q", tt.cursor, got, tt.want)
			}
			back, err := ParseCursor(got)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(back, tt.cursor.Clone()) {
				t.Fatalf("%q reads back as %v, want %v", got, back, tt.cursor)
			}
		})
	}
}

// TestParseCursorRefuses checks what ParseCursor refuses, and that the first form's 0 still reads.
func TestParseCursorRefuses(t *testing.T) {
	if c, err := ParseCursor("0"); err != nil || len(c) != 0 {
		t.Fatalf(`"0": %v, %v; want the start`, c, err)
	}
	for _, s := range []string{"1", "42", "9223372036854775807"} {
		if _, err := ParseCursor(s); !errors.Is(err, ErrCursorOutdated) {
			t.Errorf("%q: %v, want ErrCursorOutdated", s, err)
		}
	}
	long := Cursor{strings.Repeat("x", maxHolderLen+1): 1}.String()
	for _, s := range []string{
		"", "-1", "00", "v1.AAU", "v2", "V2.AAU", "v2.AAU=", "v2.AA+", "v2.AAU ", // not the form
		"v2.AAA",              // a seq of 0
		"v2.AIAB",             // a varint written long (seq 128 as 0x80 0x01 is right; here 0x80 0x01 after a 0 length)
		"v2.AAUABQ",           // the stream "" twice
		"v2.AWEBAAE",          // "a" before "": out of order
		"v2.BQ",               // a name's length and nothing after
		"v2.AYCAgICAgICAgIAB", // a seq past 2^63 - 1
		long,
	} {
		if c, err := ParseCursor(s); err == nil && c.String() != s {
			t.Errorf("%q read as %v, which is %q", s, c, c.String())
		} else if err == nil && s != "v2.AIAB" {
			t.Errorf("%q read as %v", s, c)
		}
	}
}

// TestCursorCompare checks Covers, Advance and Only.
func TestCursorCompare(t *testing.T) {
	a := Cursor{"": 3, "x": 2}
	if !a.Covers(Cursor{"": 3}) || !a.Covers(Cursor{}) || a.Covers(Cursor{"y": 1}) || a.Covers(Cursor{"x": 3}) {
		t.Fatal("Covers")
	}
	a.Advance("x", 1)
	a.Advance("y", 4)
	if !maps.Equal(a, Cursor{"": 3, "x": 2, "y": 4}) {
		t.Fatalf("Advance: %v", a)
	}
	if a.Only("") || !(Cursor{"": 3, "x": 0}).Only("") || !(Cursor{}).Only("") {
		t.Fatal("Only")
	}
}

// FuzzParseCursor checks ParseCursor never panics, reads a cursor only in its one form (the
// string it reads is the one String gives the cursor), and that every cursor it reads has
// streams with a seq above 0 and a name of at most maxHolderLen bytes.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"0", "1", "v2.", "v2.AAU", "v2.AKwCB3NoYXJkLWECB3NoYXJkLWIB", "v2.AP__________fw", "v2.AIAB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if c != nil {
				t.Fatalf("%q: a cursor and an error", s)
			}
			return
		}
		if s == "0" {
			if len(c) != 0 {
				t.Fatalf(`"0" read as %v`, c)
			}
			return
		}
		if c.String() != s {
			t.Fatalf("%q read as %v, which is %q", s, c, c.String())
		}
		if len(c) > maxCursorStreams {
			t.Fatalf("%q: %d streams", s, len(c))
		}
		for h, seq := range c {
			if seq <= 0 || len(h) > maxHolderLen {
				t.Fatalf("%q: stream %q at %d", s, h, seq)
			}
		}
	})
}
