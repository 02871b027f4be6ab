package catalog

import "github.com/hangar-dev/hangar/automation/definition"

// KeyOption is one choice of an input that picks a key (InputKeyOption).
type KeyOption struct {
	Key   string
	Label string
}

// Nouns of the inputs StaticKeyOptions answers.
const (
	NounEventKey  = "event_key"
	NounBlockType = "block_type"
	NounProvider  = "provider"
	// NounAutomation, NounProfile and NounRepo are answered from records, not the catalog:
	// the automations, the profiles, and the repositories the profiles check out.
	NounAutomation = "automation"
	NounProfile    = "profile"
	NounRepo       = "repo"
)

// StaticKeyOptions answers ListInputKeyOptions for nouns whose options are the catalog itself:
// "event_key" (the visible event keys entrypoints can name, labelled "GitHub: Pull request
// opened"; a webhook registration's key is a record's and comes from the service), "block_type"
// and "provider". ok is false for any other noun, such as NounProfile or NounRepo, which records
// answer.
func StaticKeyOptions(noun string) (options []KeyOption, ok bool) {
	switch noun {
	case NounEventKey:
		for _, p := range providers {
			if !p.keysAreEntrypoints {
				continue
			}
			for _, e := range p.Events {
				if !e.Hidden {
					options = append(options, KeyOption{Key: e.Key, Label: p.Label + ": " + e.Label})
				}
			}
		}
	case NounBlockType:
		for _, b := range definition.Blocks() {
			options = append(options, KeyOption{Key: b.Type, Label: b.Label})
		}
	case NounProvider:
		for _, p := range providers {
			options = append(options, KeyOption{Key: p.Name, Label: p.Label})
		}
	default:
		return nil, false
	}
	return options, true
}
