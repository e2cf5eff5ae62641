package auth

import (
	"fmt"
	"slices"
)

// Scope is what a key may do, chosen when it is made. The scopes are nested, each allowing what
// the one before it does and more, so that one comparison answers every request: read (every GET
// and the feed), cancel (also cancels and heartbeats: the key an operations desk keeps to stop a
// bot, which cannot add risk), trade (everything an account does on the exchange), keys (also
// making and revoking the account's keys through the API, as its settings page does). keys is last
// because a key that makes keys can do whatever a key it makes can: given the rule that a key
// never makes one that may do more than itself (Confine), a key that made keys but could not
// trade would trade through the trade key it made. So no key is made keys unless asked: a key
// made without a scope is trade. A scope added later takes its place in the order, or, if it is
// not nested, becomes a set; the routes name only the scope they need (apiserver's route table),
// so neither changes them.
type Scope string

const (
	ScopeRead   Scope = "read"
	ScopeCancel Scope = "cancel"
	ScopeTrade  Scope = "trade"
	ScopeKeys   Scope = "keys"
)

// Scopes are the scopes in order, each allowing everything the ones before it do.
var Scopes = []Scope{ScopeRead, ScopeCancel, ScopeTrade, ScopeKeys}

// ParseScope reads a scope by its name; "" is trade, what every key could do before scopes.
func ParseScope(name string) (Scope, error) {
	if name == "" {
		return ScopeTrade, nil
	}
	if s := Scope(name); slices.Contains(Scopes, s) {
		return s, nil
	}
	return "", fmt.Errorf("the scope must be read, cancel, trade or keys, not %q", name)
}

// Allows says whether a key of scope s may make a request that needs scope need. An unknown
// scope allows nothing.
func (s Scope) Allows(need Scope) bool {
	have, want := slices.Index(Scopes, s), slices.Index(Scopes, need)
	return have >= 0 && want >= 0 && have >= want
}
