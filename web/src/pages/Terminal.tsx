// The session's interactive shell in the page: xterm.js over the shell WebSocket route, whose
// binary messages are the terminal's bytes and whose text messages are resize, signal, exit
// and error (functions/sessions ShellMessage).
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as XTerm } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { useEffect, useRef, useState } from "react";

import { storedKey } from "../api";

type ShellMessage = { type: string; exit_status?: number; exit_signal?: number; message?: string };

// shellURL is the WebSocket address of a session's shell, sized like the terminal; a pasted
// key rides in the query, since a browser's WebSocket cannot set headers (the cookie needs none).
export function shellURL(origin: string, sessionId: string, rows: number, cols: number, key: string | null): string {
  const u = new URL(`/api/v1/sessions/${encodeURIComponent(sessionId)}/shell`, origin);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  u.searchParams.set("rows", String(rows));
  u.searchParams.set("cols", String(cols));
  u.searchParams.set("term", "xterm-256color");
  if (key) u.searchParams.set("api_key", key);
  return u.toString();
}

export function Terminal({ sessionId }: { sessionId: string }) {
  const [open, setOpen] = useState(false);
  const [status, setStatus] = useState("");
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (!open || !box.current) return;
    const term = new XTerm({ convertEol: false, cursorBlink: true, fontSize: 13 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current);
    fit.fit();
    const ws = new WebSocket(shellURL(location.origin, sessionId, term.rows, term.cols, storedKey()));
    ws.binaryType = "arraybuffer";
    const enc = new TextEncoder();
    setStatus("connecting…");
    ws.onopen = () => setStatus("connected");
    ws.onmessage = (m) => {
      if (m.data instanceof ArrayBuffer) {
        term.write(new Uint8Array(m.data));
        return;
      }
      const msg = JSON.parse(String(m.data)) as ShellMessage;
      if (msg.type === "exit") setStatus(msg.exit_signal ? `exited on signal ${msg.exit_signal}` : `exited with status ${msg.exit_status ?? 0}`);
      if (msg.type === "error") setStatus(`error: ${msg.message}`);
    };
    ws.onclose = (e) => setStatus((s) => (s.startsWith("exited") ? s : `closed${e.reason ? `: ${e.reason}` : ""}`));
    ws.onerror = () => setStatus("the shell could not be opened (is the session running?)");
    const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
    const resize = term.onResize(({ rows, cols }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", rows, cols })));
    const refit = () => fit.fit();
    window.addEventListener("resize", refit);
    term.focus();
    return () => {
      window.removeEventListener("resize", refit);
      input.dispose();
      resize.dispose();
      ws.close();
      term.dispose();
    };
  }, [open, sessionId]);

  return (
    <section aria-label="Terminal">
      <h2>Terminal</h2>
      <div className="actions">
        <button onClick={() => setOpen((o) => !o)}>{open ? "Close the terminal" : "Open a terminal"}</button>
        {open && (
          <span className="muted" role="status" aria-label="Terminal status">
            {status}
          </span>
        )}
      </div>
      {open && <div className="terminal" ref={box} />}
    </section>
  );
}
