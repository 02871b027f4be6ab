// Package modelfake is a loopback stand-in for the model APIs the real agent CLIs talk to: the
// Anthropic Messages API (streaming, tool use) that Claude Code speaks and the OpenAI Responses
// API (streaming) that Codex speaks. It plays scripted conversations, so a test can run the real
// CLI, unchanged, against it and know what the CLI will do: ask for a tool, get its result,
// answer.
//
// The fake is stateless about conversations, as the real APIs are: each request carries the
// whole conversation, and the fake answers step n of the first script whose Match the
// conversation's user messages contain, n being the number of tool results in the request. So a CLI that
// retries, or asks a second conversation on the side (a subagent, a title), is answered
// consistently. A request no script matches gets a short plain answer.
//
// Every request is recorded with its headers, so a test can assert which credential reached the
// API.
//
// Beside the fake, the package holds what tests of the real CLIs share: the scenarios they play
// (scenarios.go), and finding the CLIs (`make agent-clis`) and the agent image (`make
// agent-image`), running a CLI and checking its run (realcli.go).
package modelfake

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// Script is one scripted conversation.
type Script struct {
	// Match picks the script: a substring of the text of the conversation's user messages (tool
	// results not included).
	Match string
	// Model is the model the answers claim to come from ("" for the one asked for).
	Model string
	// Steps answer the conversation: Steps[n] once the request holds n tool results. Past the
	// last step the last one is repeated.
	Steps []Step
}

// Step is one answer of the model.
type Step struct {
	// Text is said first ("" for nothing).
	Text string
	// Tool, when set, is the tool the model then calls; the answer stops for its result.
	Tool *ToolCall
	// InputTokens and OutputTokens are the usage the answer reports; CacheReadTokens and
	// CacheWriteTokens the prompt-cache tokens it reports beside them (Anthropic's
	// cache_read_input_tokens and cache_creation_input_tokens; OpenAI counts only reads, as
	// cached_tokens, a part of input_tokens).
	InputTokens, OutputTokens         int64
	CacheReadTokens, CacheWriteTokens int64
	// Drop ends the response stream abruptly after its first event, the way a broken
	// connection does, so the CLI has to retry. Only the first DropTimes requests of this step
	// are dropped; the retry is answered.
	DropTimes int
}

// ToolCall is a call of a tool by name with JSON arguments. For the OpenAI Responses API,
// Custom makes it a custom (freeform) tool call whose input is Input as a string, as Codex's
// apply_patch is.
type ToolCall struct {
	Name   string
	Input  any
	Custom bool
}

// Request is one request the fake received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         json.RawMessage
	// At is when it was received (its body read): benchmarks split a turn's time by it.
	At time.Time
}

// Server is a running fake of both APIs on loopback: Anthropic's under /v1/messages, OpenAI's
// under /v1/responses (and /responses, where a base URL without /v1 leads).
type Server struct {
	URL string

	srv     *httptest.Server
	scripts []Script

	mu       sync.Mutex
	requests []Request
	dropped  map[string]int // how many requests of a script step were dropped, by "match/step"
}

// Start serves scripts over plain HTTP on a loopback port until Close.
func Start(scripts ...Script) *Server {
	s := newServer(scripts)
	s.srv = httptest.NewServer(s.mux())
	s.URL = s.srv.URL
	return s
}

// StartTLS serves scripts over TLS on a loopback port until Close, with a certificate for names
// (api.anthropic.com, api.openai.com), so that a CLI reaches it at its real default host through
// the egress proxy's test resolver; Roots is what the proxy must trust.
func StartTLS(names []string, scripts ...Script) *Server {
	s := newServer(scripts)
	s.srv = testkit.UnstartedTLSServer(s.mux(), names...)
	// A CLI that reaches one of names through a pass-through (no secret to inject) does not
	// trust the certificate: its refused handshakes are expected, not worth a line each.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.StartTLS()
	s.URL = s.srv.URL
	return s
}

// Certificate is the server's certificate, which a client of a StartTLS server must trust.
func (s *Server) Certificate() *x509.Certificate { return s.srv.Certificate() }

// CertificatePEM is Certificate in PEM, as a CLI run on the machine trusts it
// (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE).
func (s *Server) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Addr is the server's loopback address (ip:port).
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

func newServer(scripts []Script) *Server {
	return &Server{scripts: scripts, dropped: map[string]int{}}
}

func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("POST /responses", s.responses)
	mux.HandleFunc("GET /v1/responses", s.noWebSocket)
	mux.HandleFunc("GET /responses", s.noWebSocket)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /models", s.models)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, nil)
		http.Error(w, "modelfake: no such endpoint "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	})
	return mux
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests is what the fake received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Credentials is every credential the fake was sent, once each: x-api-key values and
// Authorization bearer tokens.
func (s *Server) Credentials() []string {
	var creds []string
	for _, r := range s.Requests() {
		for _, c := range []string{r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")} {
			if c != "" && !slices.Contains(creds, c) {
				creds = append(creds, c)
			}
		}
	}
	return creds
}

// Models is every model the fake's conversations (Messages and Responses requests) asked for,
// once each.
func (s *Server) Models() []string {
	var models []string
	for _, r := range s.Requests() {
		var body struct {
			Model string `json:"model"`
		}
		if !strings.HasSuffix(r.Path, "/messages") && !strings.HasSuffix(r.Path, "/responses") || json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		if body.Model != "" && !slices.Contains(models, body.Model) {
			models = append(models, body.Model)
		}
	}
	return models
}

func (s *Server) record(r *http.Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()})
}

// step is what to answer to a conversation whose users said said and that holds results tool
// results: the step, its script's model, and whether to drop the response.
func (s *Server) step(said string, results int) (Step, string, bool) {
	for _, sc := range s.scripts {
		if sc.Match == "" || !strings.Contains(said, sc.Match) || len(sc.Steps) == 0 {
			continue
		}
		n := min(results, len(sc.Steps)-1)
		st := sc.Steps[n]
		key := fmt.Sprintf("%s/%d", sc.Match, n)
		s.mu.Lock()
		drop := s.dropped[key] < st.DropTimes
		if drop {
			s.dropped[key]++
		}
		s.mu.Unlock()
		return st, sc.Model, drop
	}
	return Step{Text: "OK.", InputTokens: 10, OutputTokens: 2}, "", false
}

// noWebSocket refuses the Responses API over WebSocket, which Codex tries first: the fake speaks
// the HTTP transport only, which Codex falls back to.
func (s *Server) noWebSocket(w http.ResponseWriter, r *http.Request) {
	s.record(r, nil)
	http.Error(w, "modelfake: the Responses API over WebSocket is not faked; use HTTP", http.StatusUpgradeRequired)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	s.record(r, nil)
	writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return sse{w: w, f: f}
}

func (e sse) send(event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("modelfake: encode %s: %v", event, err))
	}
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b)
	if e.f != nil {
		e.f.Flush()
	}
}

// drop cuts the connection under a response, as a network failure would: net/http closes it
// without ending the chunked body.
func drop() { panic(http.ErrAbortHandler) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("modelfake: encode tool input: %v", err))
	}
	return string(b)
}
