// Package auth owns identity: users, API keys (stored only as SHA-256 hashes), the Connect
// interceptor that turns an x-api-key header into a Principal, and the rule that admin-only
// services refuse everyone else.
package auth
