package sdk

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Hint is a resume hint (abi.Event.Resume) that carries, beside the harness's conversation id,
// the conversation's usage totals as the harness last printed them. A harness that prints a
// resumed conversation's whole totals at the end of every turn (see abi's "Usage") has its parser
// report the difference from Totals, and carry the new totals in the hint of turn.done.
type Hint struct {
	// ID is what the harness resumes the conversation by ("" before it said).
	ID string
	// Totals are the conversation's totals so far.
	Totals abi.Usage
}

// hintSep parts a hint's id from its totals: no conversation id of the harnesses holds it (they
// are UUIDs), and a hint of an id alone, as plugins before Hint reported, reads as that id.
const hintSep = " usage="

// String is the hint as Event.Resume carries it: the id alone while the totals are zero.
func (h Hint) String() string {
	if h.Totals == (abi.Usage{}) {
		return h.ID
	}
	js, err := json.Marshal(h.Totals)
	if err != nil {
		return h.ID // a Usage of numbers always encodes
	}
	return h.ID + hintSep + string(js)
}

// ParseHint reads a hint String wrote; one whose totals do not decode keeps its id, with no
// totals, so a turn after it reports its harness's figures as they are.
func ParseHint(s string) Hint {
	id, totals, ok := strings.Cut(s, hintSep)
	h := Hint{ID: id}
	if ok && json.Unmarshal([]byte(totals), &h.Totals) != nil {
		h.Totals = abi.Usage{}
	}
	return h
}

// UsageSince is the usage totals add to prior, the totals of the turn before: each field's
// difference. A harness that printed totals lower than prior in any field did not carry the
// conversation's totals over (a conversation it could not resume starts afresh), so totals are
// then this run's own.
func UsageSince(totals, prior abi.Usage) abi.Usage {
	if totals.InputTokens < prior.InputTokens || totals.OutputTokens < prior.OutputTokens ||
		totals.CacheReadTokens < prior.CacheReadTokens || totals.CacheWriteTokens < prior.CacheWriteTokens ||
		totals.CostUSD < prior.CostUSD {
		return totals
	}
	return abi.Usage{
		InputTokens: totals.InputTokens - prior.InputTokens, OutputTokens: totals.OutputTokens - prior.OutputTokens,
		CacheReadTokens: totals.CacheReadTokens - prior.CacheReadTokens, CacheWriteTokens: totals.CacheWriteTokens - prior.CacheWriteTokens,
		// Rounded to a billionth of a dollar, so the float subtraction's noise does not show.
		CostUSD: math.Round((totals.CostUSD-prior.CostUSD)*1e9) / 1e9,
	}
}

// ResumedOutput is the parse state of a harness whose resumed conversations print their whole
// totals (Hint): Output, and the totals as last printed, the previous turn's at first. A parser
// embeds it in place of Output; Start reads the previous turn's hint and ResumeWith writes the
// one turn.done carries.
type ResumedOutput struct {
	Output
	// Totals are the conversation's usage totals as last printed.
	Totals abi.Usage `json:"totals,omitzero"`
}

// Start takes the conversation's totals from the previous turn's hint (the Starter hook).
func (o *ResumedOutput) Start(resume string) {
	h := ParseHint(resume)
	o.Totals = h.Totals
	o.Turn.Resume = h.String()
}

// ResumeWith keeps the conversation id and the totals for turn.done's hint.
func (o *ResumedOutput) ResumeWith(id string) {
	o.Turn.Resume = Hint{ID: id, Totals: o.Totals}.String()
}
