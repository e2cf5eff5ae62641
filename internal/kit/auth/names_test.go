package auth

import (
	"strings"
	"testing"
)

func TestCheckAccountName(t *testing.T) {
	for name, ok := range map[string]bool{
		"alice": true, "a": true, "Bob_2.x-y": true, "9lives": true, strings.Repeat("a", 64): true,
		"": false, "_alice": false, ".a": false, "-a": false, "al ice": false, "al/ice": false,
		"élan": false, strings.Repeat("a", 65): false, "a\x00": false,
	} {
		if err := CheckAccountName(name); (err == nil) != ok {
			t.Errorf("CheckAccountName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
