package modelrouters

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/opt"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/clock"
)

// modelRecord is one model of a router's catalog as Firestore stores it. Catalog is what the
// upstream says and a refresh replaces whole; the other fields are this deployment's.
type modelRecord struct {
	RouterID  string       `firestore:"router_id"`
	ID        string       `firestore:"id"`
	Catalog   catalogEntry `firestore:"catalog"`
	Available bool         `firestore:"available"`
	// Enabled and UserEnabled are admin policy, which no refresh touches.
	Enabled     bool      `firestore:"enabled"`
	UserEnabled bool      `firestore:"user_enabled"`
	UpdatedAt   time.Time `firestore:"updated_at"`
}

// catalogEntry is a model as the upstream describes it; "" and nil when it says nothing.
type catalogEntry struct {
	CanonicalSlug   string `firestore:"canonical_slug"`
	Name            string `firestore:"name"`
	Author          string `firestore:"author"`
	Description     string `firestore:"description"`
	ContextLength   int64  `firestore:"context_length"`
	PromptPrice     string `firestore:"prompt_price"`
	CompletionPrice string `firestore:"completion_price"`
	CacheReadPrice  string `firestore:"cache_read_price,omitempty"`
	CacheWritePrice string `firestore:"cache_write_price,omitempty"`
	// MaxCompletionTokens is 0 when the router does not say.
	MaxCompletionTokens int64    `firestore:"max_completion_tokens,omitempty"`
	InputModalities     []string `firestore:"input_modalities"`
	OutputModalities    []string `firestore:"output_modalities"`
	SupportedParameters []string `firestore:"supported_parameters"`
	ModelHubID          string   `firestore:"model_hub_id"`
	UpstreamURL         string   `firestore:"upstream_url"`
}

// same reports whether two entries say the same, taking an empty list as equal to none, as
// Firestore may hand back either.
func (e catalogEntry) same(o catalogEntry) bool {
	return reflect.DeepEqual(e.normal(), o.normal())
}

func (e catalogEntry) normal() catalogEntry {
	e.InputModalities = nonEmpty(e.InputModalities)
	e.OutputModalities = nonEmpty(e.OutputModalities)
	e.SupportedParameters = nonEmpty(e.SupportedParameters)
	return e
}

// routerState is what Hangar remembers of a router between refreshes.
type routerState struct {
	LastSuccessfulSyncAt time.Time `firestore:"last_successful_sync_at"`
	LastSyncError        string    `firestore:"last_sync_error"`
	LastSyncAttemptAt    time.Time `firestore:"last_sync_attempt_at"`
}

func (r modelRecord) proto() *appv1.RouterModel {
	c := r.Catalog
	return &appv1.RouterModel{
		RouterId:             r.RouterID,
		Id:                   r.ID,
		CanonicalSlug:        c.CanonicalSlug,
		Name:                 c.Name,
		Author:               opt.String(c.Author),
		Description:          opt.String(c.Description),
		ContextLength:        uint64(max(c.ContextLength, 0)),
		PromptPrice:          opt.String(c.PromptPrice),
		CompletionPrice:      opt.String(c.CompletionPrice),
		InputCacheReadPrice:  opt.String(c.CacheReadPrice),
		InputCacheWritePrice: opt.String(c.CacheWritePrice),
		MaxCompletionTokens:  maxTokens(c.MaxCompletionTokens),
		InputModalities:      c.InputModalities,
		OutputModalities:     c.OutputModalities,
		SupportedParameters:  c.SupportedParameters,
		ModelHubId:           opt.String(c.ModelHubID),
		Available:            r.Available,
		Enabled:              r.Enabled,
		UserEnabled:          r.UserEnabled,
		UpstreamUrl:          c.UpstreamURL,
		UpdatedAt:            clock.Format(r.UpdatedAt),
		SupportsReasoning:    slices.Contains(c.SupportedParameters, "reasoning") || slices.Contains(c.SupportedParameters, "include_reasoning"),
	}
}

// maxTokens is n as the API's optional field: unset for 0, which the router did not say.
func maxTokens(n int64) *uint64 {
	if n <= 0 {
		return nil
	}
	u := uint64(n)
	return &u
}

// matches reports whether search (already lowercased) is in the model's id or name.
func (r modelRecord) matches(search string) bool {
	return strings.Contains(strings.ToLower(r.ID), search) || strings.Contains(strings.ToLower(r.Catalog.Name), search)
}
