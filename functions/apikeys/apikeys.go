// Package apikeys serves ApiKeyService: admins mint personal and service-account keys, list them
// by prefix, and revoke them. The keys themselves live in platform/auth, which verifies them.
package apikeys

import (
	"context"
	"errors"
	"net/mail"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

// Service implements ApiKeyService. The auth interceptor admits only admins to it.
type Service struct {
	keys  *auth.Keys
	users *auth.Users
	clock clock.Clock
	lim   config.Limits
}

var _ appv1connect.ApiKeyServiceHandler = (*Service)(nil)

// New returns the service over the given key store and user directory.
func New(keys *auth.Keys, users *auth.Users, c clock.Clock, lim config.Limits) *Service {
	return &Service{keys: keys, users: users, clock: c, lim: lim}
}

const maxNameLen = 100

// CreateApiKey mints a key for a person (by email, or the caller) or a new service account.
func (s *Service) CreateApiKey(ctx context.Context, req *connect.Request[appv1.CreateApiKeyRequest]) (*connect.Response[appv1.CreateApiKeyResponse], error) {
	m := req.Msg
	caller, _ := auth.Caller(ctx)
	var v apierr.Violations
	name := strings.TrimSpace(m.GetName())
	switch {
	case name == "":
		v.Add("name", "is required")
	case utf8.RuneCountInString(name) > maxNameLen:
		v.Addf("name", "must be at most %d characters", maxNameLen)
	}
	kind := m.GetKind()
	if kind == "" {
		kind = auth.KindPersonal
	}
	if kind != auth.KindPersonal && kind != auth.KindServiceAccount {
		v.Addf("kind", "must be %q or %q", auth.KindPersonal, auth.KindServiceAccount)
	}
	if m.GetUserEmail() != "" {
		if kind == auth.KindServiceAccount {
			v.Add("user_email", "must be empty for a service-account key (it gets a user of its own)")
		} else if _, err := mail.ParseAddress(m.GetUserEmail()); err != nil || strings.ContainsAny(m.GetUserEmail(), "<> ") {
			v.Add("user_email", "must be a plain email address such as ada@example.com")
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var user auth.User
	var err error
	switch {
	case kind == auth.KindServiceAccount:
		user, err = s.users.CreateServiceAccount(ctx, name, now)
	case m.GetUserEmail() != "":
		user, err = s.users.EnsureHuman(ctx, m.GetUserEmail(), m.GetUserName(), now)
	default:
		user, err = s.users.Get(ctx, caller.UserID)
	}
	if err != nil {
		return nil, err
	}
	k, secret, err := s.keys.Create(ctx, auth.NewKeyInput{
		Name: name, Kind: kind, UserID: user.ID, Admin: m.GetAdmin(), CreatedBy: caller.UserID,
	}, now)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CreateApiKeyResponse{ApiKey: toProto(k, user), Secret: secret}), nil
}

// ListApiKeys lists keys newest first, without secrets.
func (s *Service) ListApiKeys(ctx context.Context, req *connect.Request[appv1.ListApiKeysRequest]) (*connect.Response[appv1.ListApiKeysResponse], error) {
	keys, err := s.keys.List(ctx, req.Msg.GetIncludeRevoked(), s.lim.ApiKeys.Max)
	if err != nil {
		return nil, err
	}
	userIDs := make([]string, len(keys))
	for i, k := range keys {
		userIDs[i] = k.UserID
	}
	users, err := s.users.GetMany(ctx, userIDs)
	if err != nil {
		return nil, err
	}
	out := make([]*appv1.ApiKey, len(keys))
	for i, k := range keys {
		out[i] = toProto(k, users[k.UserID])
	}
	return connect.NewResponse(&appv1.ListApiKeysResponse{ApiKeys: out}), nil
}

// RevokeApiKey revokes a key by id; it stops authenticating at once.
func (s *Service) RevokeApiKey(ctx context.Context, req *connect.Request[appv1.RevokeApiKeyRequest]) (*connect.Response[appv1.RevokeApiKeyResponse], error) {
	id := strings.TrimPrefix(req.Msg.GetId(), "hgr_")
	if err := ids.Check("id", id); err != nil {
		return nil, err
	}
	k, err := s.keys.Revoke(ctx, id, s.clock.Now())
	if errors.Is(err, auth.ErrKeyNotFound) {
		return nil, apierr.NotFound("api key", req.Msg.GetId())
	}
	if err != nil {
		return nil, err
	}
	users, err := s.users.GetMany(ctx, []string{k.UserID})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RevokeApiKeyResponse{ApiKey: toProto(k, users[k.UserID])}), nil
}

func toProto(k auth.Key, u auth.User) *appv1.ApiKey {
	out := &appv1.ApiKey{
		Id: k.ID, Name: k.Name, Kind: k.Kind, Prefix: k.Prefix(), UserId: k.UserID, Admin: k.Admin,
		CreatedAt: clock.Format(k.CreatedAt), RevokedAt: clock.FormatPtr(k.RevokedAt),
		LastUsedAt: clock.FormatPtr(k.LastUsedAt),
	}
	if k.CreatedBy != "" {
		out.CreatedByUserId = &k.CreatedBy
	}
	out.User = u.Proto()
	return out
}
