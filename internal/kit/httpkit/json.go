package httpkit

import (
	"bytes"
	"encoding/json"
	"io"

	ginjson "github.com/gin-gonic/gin/codec/json"
	gojson "github.com/goccy/go-json"
)

// Every JSON answer gin writes (c.JSON, c.AbortWithStatusJSON) and every gin JSON binding
// (c.ShouldBindJSON on the shard's internal API) goes through gin's codec/json.API. It is set
// here to github.com/goccy/go-json, which writes the same bytes as encoding/json for the API's
// answers (json_test.go compares the kinds of values they hold; apiserver's TestShapes pins its
// shapes) for a fraction of the CPU: reflection-based encoding was about a tenth of the server's
// CPU under load. Every package that serves HTTP imports this one, so every gin engine uses it.
//
// It is set in init, not from apiserver.New under a sync.Once:
//   - gin reads json.API on every request goroutine without synchronization. Package
//     initialization finishes before main starts and before any goroutine can serve, so the write
//     cannot race with a read; a sync.Once in New would race with engines already serving
//     (shardserver.Server's, or another apiserver's in a parallel test).
//   - shardserver.Server does not go through apiserver.New, yet its c.JSON answers (the result of
//     every placement) and its ShouldBindJSON requests are as hot as the public API's. init
//     covers every gin engine in the binary, and tests run the codec production runs.
//   - gin's own variant, the go_json build tag, would have to be passed to every build, test and
//     lint command; a command without it silently falls back to encoding/json.
//
// The public API's own request decoding (apiserver's decode.go, admin.go) stays on
// encoding/json: its error messages reach clients, and its strictness is encoding/json's.
func init() {
	ginjson.API = goccyJSON{}
}

// goccyJSON is gin's codec/json.Core backed by goccy/go-json, with one difference from gin's
// go_json.go, to keep encoding/json's exact bytes: an output holding \u0008 or \u000c is encoded
// again with encoding/json (which, since Go 1.22, writes \b and \f), and so is a value goccy fails
// on, so that errors are encoding/json's too. goccy before v0.11 wrote those two escapes, and
// sorted map keys by their escaped form; v0.11 writes what encoding/json writes in both cases
// (json_test.go checks every ASCII character and the map keys that escape), so the fallback is
// now only a guard against a release that regresses.
//
// goccy v0.11 is also the first release whose decoders are safe to compile from many goroutines
// at once: v0.10 stored a type's decoder, an interface value of two words, into a shared slice
// without synchronization, so a goroutine decoding the same type for the first time at that
// moment could read the type's word without the pointer and crash on a nil decoder. On 16 cores it
// crashed pmxtools bench's 64 account-creating workers in one run of seventeen.
type goccyJSON struct{}

var noHTMLEscape = []gojson.EncodeOptionFunc{gojson.DisableHTMLEscape()}

// marshal encodes v as encoding/json.Marshal does, or as an Encoder with SetEscapeHTML(false)
// does (without its newline) when escapeHTML is false.
func marshal(v any, escapeHTML bool) ([]byte, error) {
	var opts []gojson.EncodeOptionFunc
	if !escapeHTML {
		opts = noHTMLEscape
	}
	b, err := gojson.MarshalWithOption(v, opts...)
	if err == nil && !hasShortEscapeCandidate(b) {
		return b, nil
	}
	if escapeHTML {
		return json.Marshal(v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// hasShortEscapeCandidate reports whether b may hold \u0008 or \u000c, which encoding/json would
// write as \b or \f. A false positive (the text "\\u0008", a json.RawMessage holding \u0008) only
// costs an encoding with encoding/json, which is the reference.
func hasShortEscapeCandidate(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u000`))
		if i < 0 || i+5 >= len(b) {
			return false
		}
		if c := b[i+5]; c == '8' || c == 'c' {
			return true
		}
		b = b[i+5:]
	}
}

func (goccyJSON) Marshal(v any) ([]byte, error) { return marshal(v, true) }

func (goccyJSON) Unmarshal(data []byte, v any) error { return gojson.Unmarshal(data, v) }

func (goccyJSON) MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	b, err := gojson.MarshalIndent(v, prefix, indent)
	if err == nil && !hasShortEscapeCandidate(b) {
		return b, nil
	}
	return json.MarshalIndent(v, prefix, indent)
}

func (goccyJSON) NewEncoder(w io.Writer) ginjson.Encoder {
	return &goccyEncoder{w: w, escapeHTML: true}
}

func (goccyJSON) NewDecoder(r io.Reader) ginjson.Decoder { return gojson.NewDecoder(r) }

// goccyEncoder is an encoder writing what encoding/json's Encoder writes (without SetIndent,
// which gin's Encoder interface does not have).
type goccyEncoder struct {
	w          io.Writer
	escapeHTML bool
}

func (e *goccyEncoder) SetEscapeHTML(on bool) { e.escapeHTML = on }

func (e *goccyEncoder) Encode(v any) error {
	b, err := marshal(v, e.escapeHTML)
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(b, '\n'))
	return err
}
