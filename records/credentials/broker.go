package credentials

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/hangar-dev/hangar/records/sessiondb"
)

// Broker environment: what a session created with an OAuth credential finds in its sandbox's
// environment, sealed into the session like its other secrets.
const (
	EnvBrokerToken = "HANGAR_OAUTH_BROKER_TOKEN"
	EnvSessionID   = "HANGAR_SESSION_ID"
)

// BrokerPrefix starts every broker token, so a leaked one is recognisable.
const BrokerPrefix = "hob_"

// NewBroker mints a broker token for a session bound to the credential of sub and provider:
// the token for the sandbox, and the record binding keeping only its hash.
func NewBroker(sub Subject, provider string) (string, *sessiondb.Broker, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token := BrokerPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, &sessiondb.Broker{
		TokenHash: BrokerHash(token), SubjectKind: sub.Kind, SubjectID: sub.ID, Provider: provider,
	}, nil
}

// BrokerHash is what a session record keeps of its broker token.
func BrokerHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
