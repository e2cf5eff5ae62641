package shardproto

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/exchange"
)

// The internal protocol's version travels on every request and every answer, as the header
// ProtocolHeader. During a rolling upgrade fronts, shards and the operator of adjacent releases
// run together: each end speaks the versions in Speaks, answers a request in the version it came
// in, and refuses one it does not speak (400, code unsupported_protocol, naming both versions)
// before reading it, rather than misread it. A request or answer without the header comes from a
// build before the protocol had a version, which spoke version 1 (v1.go).
const (
	ProtocolHeader = "Pmx-Internal-Protocol"
	// ProtocolVersion is the version this build sends.
	ProtocolVersion = 1
)

// Speaks are the versions this build reads and answers in.
var Speaks = []int{1}

// CodeUnsupportedProtocol answers a request in a version the shard does not speak.
const CodeUnsupportedProtocol = "unsupported_protocol"

// VersionOf reads the version a request or answer is in: none is version 1; ok is false when the
// header is not a version at all.
func VersionOf(h http.Header) (version int, ok bool) {
	v := h.Get(ProtocolHeader)
	if v == "" {
		return 1, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// VersionError is an exchange of the internal protocol between two ends that share no version:
// what the peer sent or asked for, and what this end speaks. It is never an outcome unknown: the
// end that refused did so before reading the request. It is exchange.ErrUnavailable, so that the
// caller answers "try again" — the rollout that mixed the releases ends.
type VersionError struct {
	Peer      string // "the shard at <address>", "a caller", ...
	PeerSpeak []int  // the versions the peer speaks (its answer or refusal), or the one it sent
	Speaks    []int  // this end's
	Header    string // the header's text when it was not a version
}

func (e *VersionError) Error() string {
	if e.Header != "" {
		return fmt.Sprintf("internal protocol: %s sent %s %q, which is not a version; this build speaks version %s",
			e.Peer, ProtocolHeader, e.Header, Versions(e.Speaks))
	}
	return fmt.Sprintf("internal protocol version mismatch: %s speaks version %s, this build speaks %s; fronts, shards and the operator must be of adjacent releases (docs/architecture.md §9)",
		e.Peer, Versions(e.PeerSpeak), Versions(e.Speaks))
}

func (e *VersionError) Is(target error) bool { return target == exchange.ErrUnavailable }

func Versions(vs []int) string {
	if len(vs) == 0 {
		return "(none)"
	}
	s := strconv.Itoa(vs[0])
	for _, v := range vs[1:] {
		s += " or " + strconv.Itoa(v)
	}
	return s
}

// speaks reports whether this build speaks version v.
func SpeaksVersion(v int) bool { return slices.Contains(Speaks, v) }

// ErrOlderPeer is a call the peer does not serve: a shard of a release before the call existed.
var ErrOlderPeer = errors.New("the shard does not serve this call: it runs an older release; upgrade the shards first (docs/architecture.md §9)")

// NewRefusedCounter counts the requests or answers refused for their version, on the end that
// noticed, registered with reg unless it is nil. It has no label: the version a peer sent is
// whatever it sent, and a label taken from a request would let a caller add series without bound;
// the log names the versions.
func NewRefusedCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pmx_internal_protocol_refused_total",
		Help: "Internal protocol requests or answers refused because the two ends share no protocol version (the log says which).",
	})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}
