package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// The signature headers of an inbound webhook delivery (InboundWebhookPath).
const (
	// GitHubSignatureHeader is GitHub's, "sha256=<hex of HMAC-SHA256(secret, raw body)>". It
	// signs the body only, so a github registration also refuses a body it saw within the
	// automation's dedupe window under another delivery id (automation/dispatch).
	GitHubSignatureHeader = "X-Hub-Signature-256"
	// SignatureHeader is the one a generic sender uses: Stripe's scheme, "t=<unix seconds>,
	// v1=<hex of HMAC-SHA256(secret, "<t>.<raw body>")>" (Sign makes it). The timestamp is
	// signed, so a captured delivery is refused once it is older than the signature tolerance,
	// and replayed within it it has the same delivery key.
	SignatureHeader = "X-Hangar-Signature"
)

// Sign is SignatureHeader's value for body sent at t under secret: what a generic sender
// computes for each delivery.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(SignatureSum(secret, SignedMessage(ts, body)))
}

// SignedMessage is what a generic signature covers: the timestamp as sent, a dot, the raw body.
func SignedMessage(ts string, body []byte) []byte {
	return append([]byte(ts+"."), body...)
}

// SignatureSum is the HMAC-SHA256 of msg under secret, the sum both signature schemes send in
// hex.
func SignatureSum(secret, msg []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}
