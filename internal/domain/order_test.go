package domain

import (
	"strings"
	"testing"
)

func TestValidClientOrderID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "Order-1.2_3:x": true, strings.Repeat("z", MaxClientOrderID): true,
		"": false, strings.Repeat("z", MaxClientOrderID+1): false, "a b": false, "a\x00b": false,
		"é": false, "a/b": false, "a\nb": false,
	} {
		if got := ValidClientOrderID(id); got != want {
			t.Errorf("ValidClientOrderID(%q) = %t, want %t", id, got, want)
		}
	}
}
