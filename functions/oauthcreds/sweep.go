package oauthcreds

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/records/credentials"
)

// Sweep is the durable half of the service: it polls the device flows whose poll is due and
// refreshes (or marks expired) the credentials whose refresh_at has come, and deletes flows kept
// long enough past their expiry (credentials.FlowKept). Each item is claimed
// in a transaction first, so sweeps on several instances share the work and one that dies
// mid-item leaves it due again after its lease. The automation worker's tick calls it.
func (s *Service) Sweep(ctx context.Context) error {
	flows, ferr := s.d.Flows.DuePolls(ctx, sweepBatch)
	for _, f := range flows {
		if _, err := s.pollDevice(ctx, f.ID); err != nil {
			s.d.Log.Warn("oauth device poll", "flow", f.ID, "err", err)
		}
	}
	due, cerr := s.d.Store.Due(ctx, sweepBatch)
	for _, m := range due {
		if err := s.refresh(ctx, m.Subject(), m.Provider); err != nil {
			s.d.Log.Warn("oauth refresh", "provider", m.Provider, "subject", m.Subject().String(), "err", err)
		}
	}
	_, derr := s.d.Flows.DeleteExpired(ctx, sweepBatch)
	if err := errors.Join(ferr, cerr, derr); err != nil {
		return fmt.Errorf("oauth sweep: %w", err)
	}
	return nil
}

// refresh renews one due credential with its refresh token (oauth2's TokenSource), keeping the
// bundle's format, and saves it only if nobody changed the credential meanwhile (a session's
// update wins: its bundle is as new). A credential without a refresh token is marked expired
// at expires_at. A failed refresh is retried a lease later until the access token expires;
// then a refresh token the provider refuses (invalid_grant) marks it revoked, any other failure
// refresh_failed.
func (s *Service) refresh(ctx context.Context, sub credentials.Subject, provider string) error {
	bundle, meta, ok, err := s.d.Store.Claim(ctx, sub, provider, pollLease)
	if err != nil || !ok {
		return err
	}
	p, known := s.d.Providers[provider]
	if !known {
		p = Provider{ID: provider}
	}
	old := credentials.DecodeBundle(p.Bundle, bundle)
	now := s.d.Clock.Now()
	mark := func(status, why string) error {
		if _, _, err := s.d.Store.Mark(ctx, sub, provider, meta.Version, status); err != nil {
			return err
		}
		s.d.Log.Info("oauth credential "+status, "provider", provider, "subject", sub.String(), "why", why)
		return nil
	}
	if old.RefreshToken == "" || !known {
		if meta.ExpiresAt != nil && !now.Before(*meta.ExpiresAt) {
			return mark(credentials.StatusExpired, "no refresh token")
		}
		return nil
	}
	e := endpoints{}
	if u, err := s.checkURL("token_url", p.TokenURL); err == nil {
		e.token = u.String()
	} else {
		return mark(credentials.StatusRefreshFailed, "token_url refused")
	}
	conf, err := s.config(ctx, sub, p, nil, e, "")
	if err != nil {
		return mark(credentials.StatusRefreshFailed, "no client")
	}
	old.Expiry = time.Unix(1, 0) // long expired: the token source refreshes at once
	tok, err := conf.TokenSource(s.withClient(ctx), &old).Token()
	if err != nil {
		code, _, safe := providerError("refresh", err)
		// Until the access token expires every failure is retried when the claim's lease ends,
		// invalid_grant too: a session may have refreshed with the same (rotating) refresh
		// token a moment ago and be about to save its bundle, which the next claim then reads.
		if meta.ExpiresAt == nil || now.Before(*meta.ExpiresAt) {
			return safe
		}
		if code == "invalid_grant" {
			return mark(credentials.StatusRevoked, code)
		}
		return mark(credentials.StatusRefreshFailed, safe.Error())
	}
	_, err = s.d.Store.Save(ctx, sub, provider, credentials.Grant{
		Bundle: credentials.RewrapBundle(p.Bundle, bundle, tok, p.Scopes, now), ExpiresAt: tok.Expiry, Refreshable: tok.RefreshToken != "",
	}, meta.Version, "token")
	if err != nil {
		return fmt.Errorf("save the refreshed credential: %w", err)
	}
	s.d.Log.Info("oauth credential refreshed", "provider", provider, "subject", sub.String())
	return nil
}
