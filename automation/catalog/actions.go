package catalog

import "github.com/hangar-dev/hangar/automation/definition"

// Action is one entry of the action catalog (ActionCatalogEntry): a block type an automation can
// run.
type Action struct {
	ID              string // the block type
	Label           string
	Description     string
	InputSchemaJSON string // JSON Schema of the block's fields
}

// ListActions returns the actions of a provider. Hangar's actions (provider "" or "hangar") are
// the block types, whose labels, descriptions and field schemas the definition package owns (it
// validates those fields too). The event providers have no actions of their own yet, so they
// answer an empty list; ok is false for an unknown provider.
func ListActions(provider string) (actions []Action, ok bool) {
	switch provider {
	case "", ProviderHangar:
	default:
		_, known := LookupProvider(provider)
		return []Action{}, known
	}
	schemas := definition.ActionSchemas()
	actions = make([]Action, len(schemas))
	for i, s := range schemas {
		actions[i] = Action{ID: s.ID, Label: s.Label, Description: s.Description, InputSchemaJSON: string(s.InputSchema)}
	}
	return actions, true
}
