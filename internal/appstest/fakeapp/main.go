// Command fakeapp stands in for the servers a sandbox's apps run, in tests: an app, an IDE
// server (installed as code-server) and a headless Chromium (installed as chromium). It serves
// HTTP on 127.0.0.1 at the port its flags name, in each real program's own flag syntax: GET /
// says what it saw, /ws echoes WebSocket messages, /json/version answers as DevTools does.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/coder/websocket"
)

func main() {
	name := filepath.Base(os.Args[0])
	addr := listenAddr(os.Args[1:])
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s saw %s %s host=%s api-key=%q cookie=%q prefix=%q\n", name, r.Method, r.URL.RequestURI(), r.Host,
			r.Header.Get("x-api-key"), r.Header.Get("Cookie"), r.Header.Get("X-Forwarded-Prefix"))
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/json/version", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"Browser": "FakeChromium/1.0", "webSocketDebuggerUrl": "ws://" + addr + "/devtools/browser/fake"})
	})
	log.Fatal(http.ListenAndServe(addr, mux))
}

// listenAddr reads the address from code-server's --bind-addr, openvscode-server's --port,
// Chromium's --remote-debugging-port or a plain --listen; default 127.0.0.1:8080.
func listenAddr(args []string) string {
	addr := "127.0.0.1:8080"
	for i, a := range args {
		flag, val, ok := strings.Cut(a, "=")
		if !ok && i+1 < len(args) {
			val = args[i+1]
		}
		switch flag {
		case "--bind-addr", "--listen":
			addr = val
		case "--port", "--remote-debugging-port":
			addr = "127.0.0.1:" + val
		}
	}
	return addr
}
