// Package auth owns identity: users, API keys (stored only as SHA-256 hashes), dashboard
// sessions, and the one decision of who a request's caller is (Identify, identify.go), which
// the Connect interceptor and every plain HTTP route call with the use and credentials they
// declare. Which services are admin-only and which methods authenticate themselves is read from
// the protos' options (access.go).
package auth
