package wasm

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeReply feeds what a module may write as its answer: DecodeReply answers a result, a
// refusal or an error — exactly one — and a result it accepts is the "ok" it was given.
func FuzzDecodeReply(f *testing.F) {
	for _, seed := range []string{
		`{"ok":{"argv":["true"]}}`, `{"error":"no such model"}`, `{"ok":null,"error":"x"}`, ``, `{"ok":null}`,
		`{"error":""}`, `{"ok":1,"error":"x"}`, `{"ok":{}}x`, `{"ok":{"argv":["true"],"cwd":"/"}}`, `{"ok":{"argv":"true"}}`,
		`{"error":7}`, `[]`, `{"ok":{"argv":["\ud800"]}}`, "{\"ok\":{\"argv\":[\"\xff\"]}}", `{"OK":{"argv":[]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		var plan struct {
			Argv []string `json:"argv"`
		}
		refusal, err := DecodeReply(answer, &plan)
		if refusal != "" && err != nil {
			t.Fatalf("DecodeReply(%q) = refusal %q and error %v", answer, refusal, err)
		}
		if refusal != "" || err != nil {
			return
		}
		var again struct {
			OK struct {
				Argv []string `json:"argv"`
			} `json:"ok"`
		}
		if json.Unmarshal(answer, &again) != nil || len(again.OK.Argv) != len(plan.Argv) {
			t.Fatalf("DecodeReply(%q) accepted %+v, not the ok it was given", answer, plan)
		}
	})
}
