// Package httpapi is Hangar's plain-HTTP contract, beside the Connect services generated into
// gen/: the routes that are not RPCs (each path defined here once), the header names, the
// inbound webhook signature scheme, and the JSON those routes speak. Servers mount and answer
// by these names and the CLI builds its requests from them, so the two cannot drift; the
// semantics of each route are documented where it is served.
package httpapi

import "net/url"

// RPCPrefix is where the Connect API is served: POST /rpc/svc.app.v1.<Service>/<Method>.
const RPCPrefix = "/rpc"

// The routes of a session beside SessionService. {id} is the session id (a Go 1.22 ServeMux
// pattern); each needs the same caller as the RPCs.
const (
	// EventsPath streams the session's events as server-sent events (Last-Event-ID resumes).
	EventsPath = "/api/v1/sessions/{id}/events"
	// FilesPath reads (GET) and writes (PUT) one file of the session's sandbox.
	FilesPath = "/api/v1/sessions/{id}/files/{path...}"
	// ShellPath is the WebSocket of an interactive shell (ShellMessage).
	ShellPath = "/api/v1/sessions/{id}/shell"
	// NetworkUsagePath answers the session's egress totals (NetworkUsage).
	NetworkUsagePath = "/api/v1/sessions/{id}/network-usage"
	// AppsPath proxies an app the sandbox serves (an IDE, a browser), WebSockets included.
	AppsPath = "/api/v1/sessions/{id}/apps/{name}/{rest...}"
)

// AppURLPath is where the app name of session id is served.
func AppURLPath(id, name string) string {
	return "/api/v1/sessions/" + url.PathEscape(id) + "/apps/" + name + "/"
}

// InboundWebhookPath is where senders post deliveries to registration {id}, outside RPCPrefix
// and without an API key: the signature (SignatureHeader, GitHubSignatureHeader) authenticates.
const InboundWebhookPath = "/api/v1/webhooks/{id}"

// AutomationDraftFile is where a drafting agent writes an automation's definition in its
// session's sandbox, for its owner to review and save (`hangar automations draft-save` reads
// it through FilesPath): the agent holds no credential of the API.
const AutomationDraftFile = "/draft/automation.json"
