package modelrouters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
)

// upstreamModel is one entry of an OpenRouter-shaped catalog (GET /api/v1/models); fields
// Hangar does not keep are left out.
type upstreamModel struct {
	ID            string `json:"id"`
	CanonicalSlug string `json:"canonical_slug"`
	HuggingFaceID string `json:"hugging_face_id"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	ContextLength int64  `json:"context_length"`
	Pricing       struct {
		Prompt          string `json:"prompt"`
		Completion      string `json:"completion"`
		InputCacheRead  string `json:"input_cache_read"`
		InputCacheWrite string `json:"input_cache_write"`
	} `json:"pricing"`
	// TopProvider is the provider OpenRouter routes to first; its max_completion_tokens is
	// null for some models.
	TopProvider struct {
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	} `json:"top_provider"`
	Architecture struct {
		InputModalities  []string `json:"input_modalities"`
		OutputModalities []string `json:"output_modalities"`
	} `json:"architecture"`
	SupportedParameters []string `json:"supported_parameters"`
}

// modelIDPattern keeps ids that are safe as Firestore document ids once escaped and sane to
// show; OpenRouter's look like "openai/gpt-4o" or "meta-llama/llama-3.1-8b-instruct:free".
var modelIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+~-]{0,255}$`)

// fetcher reads routers' catalogs over HTTP.
type fetcher struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	maxCount int
}

// newFetcher dials through the deployment's egress policy, which also opens the configured
// routers' own hosts: an operator who points a router at a loopback or private address means
// it. Link-local and metadata addresses stay refused whatever a router's name resolves to, and
// a redirect re-checks its destination and leaves the router's credential behind on another host.
func newFetcher(cfg config.Config) *fetcher {
	policy := cfg.Egress
	for _, r := range cfg.ModelRouters {
		// Configuration validated every base URL; one whose host is no allow entry (which
		// validation does not let through) simply opens nothing.
		if u, err := url.Parse(r.BaseURL); err == nil {
			if p, err := egress.Parse([]string{u.Hostname()}); err == nil {
				policy = policy.Union(p)
			}
		}
	}
	return &fetcher{
		client:   policy.Client(egress.MaxRedirects, nil),
		timeout:  cfg.Limits.RouterCatalogTimeout,
		maxBytes: cfg.Limits.MaxRouterCatalogBytes,
		maxCount: cfg.Limits.MaxRouterModels,
	}
}

// catalogURL is where a router lists its models.
func catalogURL(r config.ModelRouter) string {
	return strings.TrimSuffix(r.BaseURL, "/") + "/models"
}

// fetch reads r's catalog; secret, when not "", is sent as a bearer token. The error says what
// went wrong in words fit for an admin, without the secret.
func (f *fetcher) fetch(ctx context.Context, r config.ModelRouter, secret string) ([]upstreamModel, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	u := catalogURL(r)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("GET %s: no answer within %s", u, f.timeout)
		}
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read answer: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, snippet(body))
	}
	if int64(len(body)) > f.maxBytes {
		return nil, fmt.Errorf("GET %s: catalog is larger than %d bytes", u, f.maxBytes)
	}
	var cat struct {
		Data *[]upstreamModel `json:"data"`
	}
	if err := json.Unmarshal(body, &cat); err != nil {
		return nil, fmt.Errorf("GET %s: not a model catalog: %w", u, err)
	}
	// An empty list is far likelier an upstream fault than a router with no models, and taking
	// it at its word would mark the whole catalog unavailable.
	if cat.Data == nil || len(*cat.Data) == 0 {
		return nil, fmt.Errorf("GET %s: the catalog lists no models (want {\"data\": [...]})", u)
	}
	if len(*cat.Data) > f.maxCount {
		return nil, fmt.Errorf("GET %s: the catalog lists %d models, more than the %d allowed", u, len(*cat.Data), f.maxCount)
	}
	return *cat.Data, nil
}

// snippet is the start of an error answer, on one line, for the sync error.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// entry is the catalog part of a model record; the upstream URL is the catalog it came from.
func (m upstreamModel) entry(r config.ModelRouter) catalogEntry {
	author, _, found := strings.Cut(m.ID, "/")
	if !found {
		author = ""
	}
	return catalogEntry{
		CanonicalSlug:       m.CanonicalSlug,
		Name:                m.Name,
		Author:              author,
		Description:         m.Description,
		ContextLength:       m.ContextLength,
		PromptPrice:         m.Pricing.Prompt,
		CompletionPrice:     m.Pricing.Completion,
		CacheReadPrice:      m.Pricing.InputCacheRead,
		CacheWritePrice:     m.Pricing.InputCacheWrite,
		MaxCompletionTokens: max(ptrOr(m.TopProvider.MaxCompletionTokens), 0),
		InputModalities:     nonEmpty(m.Architecture.InputModalities),
		OutputModalities:    nonEmpty(m.Architecture.OutputModalities),
		SupportedParameters: nonEmpty(m.SupportedParameters),
		ModelHubID:          m.HuggingFaceID,
		UpstreamURL:         catalogURL(r),
	}
}

// ptrOr is *p, or 0 when p is nil.
func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
