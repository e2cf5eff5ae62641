package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoShowsEveryKindOfMatch(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"demo"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fill MINT          10 @ YES 60",
		"fill TRANSFER_YES   6 @ YES 65",
		"fill BURN           4 @ YES 70",
		"fill TRANSFER_NO    3 @ YES 50",
		"self-trade prevention cancelled #4 (PARTIALLY_FILLED_CANCELLED)",
		"YES (last trade 50)",
		"NO (last trade 50)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
