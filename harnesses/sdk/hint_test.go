package sdk

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

func TestHintCarriesTheIDAndTotals(t *testing.T) {
	totals := abi.Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 40, CacheWriteTokens: 3, CostUSD: 0.5}
	tests := []struct {
		name string
		hint string
		want Hint
	}{
		{name: "a hint of an id alone, as plugins before Hint reported", hint: "s1", want: Hint{ID: "s1"}},
		{name: "none", hint: "", want: Hint{}},
		{name: "an id and totals", hint: Hint{ID: "s1", Totals: totals}.String(), want: Hint{ID: "s1", Totals: totals}},
		{name: "totals that do not decode are dropped", hint: "s1 usage={nope", want: Hint{ID: "s1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseHint(tt.hint); got != tt.want {
				t.Fatalf("ParseHint(%q) = %+v, want %+v", tt.hint, got, tt.want)
			}
		})
	}
	if s := (Hint{ID: "s1"}).String(); s != "s1" {
		t.Errorf("a hint without totals is %q, want the id alone", s)
	}
}

func TestUsageSinceIsWhatTheTotalsAdd(t *testing.T) {
	prior := abi.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 50, CacheWriteTokens: 5, CostUSD: 0.01296}
	tests := []struct {
		name         string
		totals, want abi.Usage
	}{
		{
			name:   "grown totals give the difference, the cost without float noise",
			totals: abi.Usage{InputTokens: 150, OutputTokens: 12, CacheReadTokens: 90, CacheWriteTokens: 5, CostUSD: 0.02592},
			want:   abi.Usage{InputTokens: 50, OutputTokens: 2, CacheReadTokens: 40, CostUSD: 0.01296},
		},
		{name: "the same totals add nothing", totals: prior, want: abi.Usage{}},
		{
			name:   "totals that shrank started afresh and are the run's own",
			totals: abi.Usage{InputTokens: 30, OutputTokens: 20, CacheReadTokens: 60, CacheWriteTokens: 5, CostUSD: 0.02},
			want:   abi.Usage{InputTokens: 30, OutputTokens: 20, CacheReadTokens: 60, CacheWriteTokens: 5, CostUSD: 0.02},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsageSince(tt.totals, prior); got != tt.want {
				t.Fatalf("UsageSince(%+v, %+v) = %+v, want %+v", tt.totals, prior, got, tt.want)
			}
		})
	}
}
