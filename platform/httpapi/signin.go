package httpapi

// The sign-in routes, all under AuthPrefix, which the load balancer sends to the sign-in
// function. OAuthCallbackPath is OAuthCredentialService's redirect page, mounted beside them.
const (
	AuthPrefix         = "/api/auth"
	LoginPath          = AuthPrefix + "/login"
	CallbackPath       = AuthPrefix + "/callback"
	LogoutPath         = AuthPrefix + "/logout"
	WhoamiPath         = AuthPrefix + "/whoami"
	DevSignInPath      = AuthPrefix + "/dev"
	DevicePath         = AuthPrefix + "/device"
	DeviceCodePath     = AuthPrefix + "/device/code"
	DeviceTokenPath    = AuthPrefix + "/device/token"
	RevokeSessionsPath = AuthPrefix + "/sessions/revoke"
	OAuthCallbackPath  = AuthPrefix + "/oauth/callback"
)

// CLIClientID is the client_id `hangar login` sends: the only client of the device grant.
const CLIClientID = "hangar-cli"

// Whoami is WhoamiPath's answer: who the caller is (by API key or sign-in cookie), and through
// which key.
type Whoami struct {
	UserID  string `json:"user_id"`
	Email   string `json:"email,omitempty"`
	Name    string `json:"name,omitempty"`
	Kind    string `json:"kind"`
	Admin   bool   `json:"admin"`
	KeyID   string `json:"key_id,omitempty"`
	KeyName string `json:"key_name,omitempty"`
}

// RevokedSessions is RevokeSessionsPath's answer: POST [?user_id=…] signs a person out of every
// dashboard session at once.
type RevokedSessions struct {
	UserID  string `json:"user_id"`
	Revoked int    `json:"revoked_sessions"`
}
