package signin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"
	"unicode"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/store"
)

// `hangar login` is RFC 8628's device authorization grant with Hangar as the authorization server:
// the CLI asks httpapi.DeviceCodePath for a device code and a user code, a signed-in person
// approves the user code at httpapi.DevicePath, and the CLI's next poll of httpapi.DeviceTokenPath
// receives a new personal API key. The device code is kept only as its hash; the user code is short
// (RFC 8628 §6.1: 8 letters of a 20-letter alphabet, about 34.5 bits), so failed lookups of it are
// rate limited per person and per address.
const (
	grantsCollection    = "deviceGrants"
	userCodesCollection = "deviceUserCodes"
	deviceGrantType     = "urn:ietf:params:oauth:grant-type:device_code"
	deviceCodePrefix    = "hgd_"
	// userCodeAlphabet has no vowels (no words) and no look-alike letters, after RFC 8628 §6.1.
	userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"
	userCodeLen      = 8
	// slowDownStep is what slow_down adds to a grant's interval (RFC 8628 §3.5).
	slowDownStep = 5 * time.Second
	maxMachine   = 60
	// maxFormBytes bounds the body of a device grant request, a few short fields.
	maxFormBytes = 16 << 10
)

// Grant statuses.
const (
	grantPending  = "pending"
	grantApproved = "approved"
	grantDenied   = "denied"
	grantIssued   = "issued"
)

// grant is a device authorization waiting for, or past, its approval.
type grant struct {
	UserCode string `firestore:"user_code"`
	Machine  string `firestore:"machine"`
	// From is the address that asked for the code, shown on the approval page.
	From       string        `firestore:"from"`
	Status     string        `firestore:"status"`
	UserID     string        `firestore:"user_id"`
	Admin      bool          `firestore:"admin"`
	CreatedAt  time.Time     `firestore:"created_at"`
	ExpiresAt  time.Time     `firestore:"expires_at"`
	Interval   time.Duration `firestore:"interval"`
	LastPollAt time.Time     `firestore:"last_poll_at"`
	KeyID      string        `firestore:"key_id"`
}

// deviceAuthorization is RFC 8628 §3.2's response.
type deviceAuthorization struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// oauthError is RFC 6749 §5.2's error response, which RFC 8628 §3.5 extends.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, oauthError{Error: code, Description: description})
}

// deviceCode is POST /api/auth/device/code: client_id=hangar-cli, and machine, the name the key
// will carry.
func (s *Service) deviceCode(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return
	}
	if r.PostForm.Get("client_id") != httpapi.CLIClientID {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "client_id must be "+httpapi.CLIClientID)
		return
	}
	now := s.d.Clock.Now()
	client := s.d.Authn.ClientAddress(r.RemoteAddr, r.Header)
	if !s.starts.take(r.Context(), "device code:"+client) {
		writeOAuthError(w, http.StatusTooManyRequests, "slow_down", "too many device codes asked for from this address; wait a minute")
		return
	}
	machine := cleanMachine(r.PostForm.Get("machine"))
	deviceCode := deviceCodePrefix + rand.Text() + rand.Text()
	g := grant{
		Machine: machine, From: client, Status: grantPending, CreatedAt: now,
		ExpiresAt: now.Add(s.d.Config.DeviceCodeTTL), Interval: s.d.Config.DeviceInterval,
	}
	var err error
	for range 3 { // a user code taken by a live grant is drawn again
		if g.UserCode, err = newUserCode(); err != nil {
			break
		}
		if err = s.saveGrant(r.Context(), deviceCode, g); !errors.Is(err, errUserCodeTaken) && !store.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		s.d.Log.Error("device code", "err", err)
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Hangar could not save the device code; retry")
		return
	}
	verify := strings.TrimRight(s.d.Config.PublicURL, "/") + httpapi.DevicePath
	writeJSON(w, http.StatusOK, deviceAuthorization{
		DeviceCode: deviceCode, UserCode: displayCode(g.UserCode), VerificationURI: verify,
		VerificationURIComplete: verify + "?user_code=" + displayCode(g.UserCode),
		ExpiresIn:               int(s.d.Config.DeviceCodeTTL / time.Second), Interval: int(g.Interval / time.Second),
	})
}

// saveGrant stores g under its device code's hash, with its user code's index; a user code whose
// index names an expired grant is taken over.
func (s *Service) saveGrant(ctx context.Context, deviceCode string, g grant) error {
	id := hashOf(deviceCode)
	idx := s.d.DB.Collection(userCodesCollection).Doc(g.UserCode)
	return s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := store.Read[userCodeIndex](ctx, tx, idx)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case g.CreatedAt.Before(cur.ExpiresAt):
			return errUserCodeTaken
		}
		if err := tx.Set(idx, userCodeIndex{GrantID: id, ExpiresAt: g.ExpiresAt}); err != nil {
			return err
		}
		return tx.Create(s.d.DB.Collection(grantsCollection).Doc(id), g)
	})
}

// errUserCodeTaken is a drawn user code a live grant holds.
var errUserCodeTaken = errors.New("user code in use")

// userCodeIndex finds a grant by its user code.
type userCodeIndex struct {
	GrantID   string    `firestore:"grant_id"`
	ExpiresAt time.Time `firestore:"expires_at"`
}

// deviceToken is POST /api/auth/device/token, RFC 8628 §3.4's token request.
func (s *Service) deviceToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != deviceGrantType:
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be "+deviceGrantType)
		return
	case f.Get("client_id") != httpapi.CLIClientID:
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "client_id must be "+httpapi.CLIClientID)
		return
	case f.Get("device_code") == "":
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "device_code is required")
		return
	}
	now := s.d.Clock.Now()
	// Unknown device codes are guesses (or garbage) costing a read each: limited per address as
	// wrong user codes are.
	guesser := "device code guesses:" + s.d.Authn.ClientAddress(r.RemoteAddr, r.Header)
	if !s.lookups.allowed(guesser) {
		writeOAuthError(w, http.StatusTooManyRequests, "slow_down", "too many unknown device codes from this address; wait a minute")
		return
	}
	ref := s.d.DB.Collection(grantsCollection).Doc(hashOf(f.Get("device_code")))
	var g grant
	var answer string // an RFC 8628 error code, "" when the key was issued
	var key string
	// The key is minted in the transaction that marks the grant issued: both are written or
	// neither is, so a failure leaves the grant approved and the CLI's next poll issues it.
	err := s.d.DB.RunTransaction(r.Context(), func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := store.Read[grant](ctx, tx, ref)
		if err != nil {
			return err
		}
		g = *cur
		if answer, err = pollAnswer(&g, now); err != nil {
			return err
		}
		if answer == "" {
			k, whole, err := s.d.Keys.CreateIn(tx, auth.NewKeyInput{
				Name: "hangar login on " + g.Machine, Kind: auth.KindPersonal, UserID: g.UserID, Admin: g.Admin, CreatedBy: g.UserID,
			}, now)
			if err != nil {
				return fmt.Errorf("mint the key of %s: %w", g.UserID, err)
			}
			g.KeyID, key = k.ID, whole
			if s.beforeIssue != nil {
				if err := s.beforeIssue(); err != nil {
					return err
				}
			}
		}
		return tx.Set(ref, g)
	})
	if errors.Is(err, store.ErrNotFound) {
		s.lookups.fail(r.Context(), guesser)
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "unknown device_code")
		return
	}
	if err != nil {
		s.d.Log.Error("device token", "err", err)
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "nothing was issued; poll again")
		return
	}
	if answer != "" {
		writeOAuthError(w, http.StatusBadRequest, answer, answerDescriptions[answer])
		return
	}
	s.d.Log.Info("device login", "user", g.UserID, "key", g.KeyID, "machine", g.Machine)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": key, "token_type": "Bearer", "key_id": g.KeyID})
}

var answerDescriptions = map[string]string{
	"authorization_pending": "the code has not been approved yet",
	"slow_down":             "polling too fast: wait the interval, now 5 seconds longer",
	"access_denied":         "the code was denied",
	"expired_token":         "the code expired: run hangar login again",
	"invalid_grant":         "the code was already used",
}

// pollAnswer is the one rule of a poll of g at now: the RFC 8628 error to answer ("" issues the
// key), with g updated to store.
func pollAnswer(g *grant, now time.Time) (string, error) {
	switch {
	case g.Status == grantIssued:
		return "invalid_grant", nil
	case !now.Before(g.ExpiresAt):
		return "expired_token", nil
	case g.Status == grantDenied:
		return "access_denied", nil
	case g.Status == grantApproved:
		g.Status = grantIssued
		return "", nil
	}
	early := !g.LastPollAt.IsZero() && now.Sub(g.LastPollAt) < g.Interval
	g.LastPollAt = now
	if early {
		g.Interval += slowDownStep
		return "slow_down", nil
	}
	return "authorization_pending", nil
}

// findGrant returns the live pending grant of a user code as typed, counting a failure against
// who and client; limited is true when they have no failures left.
func (s *Service) findGrant(ctx context.Context, typed, who, client string) (ref *firestore.DocumentRef, g *grant, limited bool, err error) {
	now := s.d.Clock.Now()
	if !s.lookups.allowed("user:"+who, "address:"+client) {
		return nil, nil, true, nil
	}
	code := normalizeCode(typed)
	fail := func() (*firestore.DocumentRef, *grant, bool, error) {
		s.lookups.fail(ctx, "user:"+who, "address:"+client)
		return nil, nil, false, nil
	}
	if len(code) != userCodeLen {
		return fail()
	}
	snap, err := s.d.DB.Collection(userCodesCollection).Doc(code).Get(ctx)
	if store.IsNotFound(err) {
		return fail()
	}
	if err != nil {
		return nil, nil, false, err
	}
	var idx userCodeIndex
	if err := snap.DataTo(&idx); err != nil {
		return nil, nil, false, err
	}
	ref = s.d.DB.Collection(grantsCollection).Doc(idx.GrantID)
	gs, err := ref.Get(ctx)
	if store.IsNotFound(err) {
		return fail()
	}
	if err != nil {
		return nil, nil, false, err
	}
	g = new(grant)
	if err := gs.DataTo(g); err != nil {
		return nil, nil, false, err
	}
	if g.Status != grantPending || !now.Before(g.ExpiresAt) {
		return fail()
	}
	return ref, g, false, nil
}

// decide approves or denies the pending grant at ref for p; a grant no longer pending is
// errGrantGone.
func (s *Service) decide(ctx context.Context, ref *firestore.DocumentRef, p auth.Principal, approve bool) error {
	now := s.d.Clock.Now()
	return s.d.DB.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		g, err := store.Read[grant](ctx, tx, ref)
		if err != nil {
			return err
		}
		if g.Status != grantPending || !now.Before(g.ExpiresAt) {
			return errGrantGone
		}
		g.Status, g.UserID, g.Admin = grantDenied, p.UserID, p.Admin
		if approve {
			g.Status = grantApproved
		}
		return tx.Set(ref, g)
	})
}

var errGrantGone = errors.New("the code is no longer waiting for approval")

func newUserCode() (string, error) {
	var b strings.Builder
	for range userCodeLen {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(userCodeAlphabet))))
		if err != nil {
			return "", fmt.Errorf("draw a user code: %w", err)
		}
		b.WriteByte(userCodeAlphabet[n.Int64()])
	}
	return b.String(), nil
}

// displayCode is a user code as shown: BCDF-GHJK.
func displayCode(c string) string { return c[:4] + "-" + c[4:] }

// normalizeCode is a user code as typed, without case, dashes or spaces (RFC 8628 §6.1).
func normalizeCode(typed string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(typed) {
		if strings.ContainsRune(userCodeAlphabet, r) {
			b.WriteRune(r)
		} else if r != '-' && !unicode.IsSpace(r) {
			return ""
		}
	}
	return b.String()
}

// cleanMachine is the machine name the CLI sent, printable and bounded.
func cleanMachine(m string) string {
	m = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, strings.TrimSpace(m))
	if r := []rune(m); len(r) > maxMachine {
		m = string(r[:maxMachine])
	}
	if m == "" {
		return "an unnamed machine"
	}
	return m
}
