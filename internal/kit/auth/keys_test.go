package auth

import "testing"

func TestKeys(t *testing.T) {
	key, prefix, hash := NewKey()
	if got, ok := ParseKey(key); !ok || got != prefix {
		t.Fatalf("ParseKey(%q) = %q, %v; want %q", key, got, ok, prefix)
	}
	if !KeyMatches(key, hash) {
		t.Fatal("a key does not match its own hash")
	}
	other, _, _ := NewKey()
	if KeyMatches(other, hash) {
		t.Fatal("another key matches")
	}
	for _, bad := range []string{"", "pmx_", key[:len(key)-1], key + "x", "xmx" + key[3:],
		key[:prefixLen] + "-" + key[prefixLen+1:], "pmx_ABCDEF0123456789" + key[prefixLen:], key[:prefixLen+1] + "!" + key[prefixLen+2:]} {
		if _, ok := ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) accepted a malformed key", bad)
		}
	}
}

func TestTokenMatches(t *testing.T) {
	tok := NewToken()
	if !TokenMatches(tok, tok) || TokenMatches(tok+"x", tok) || TokenMatches("", "") {
		t.Fatal("token comparison is wrong")
	}
}
