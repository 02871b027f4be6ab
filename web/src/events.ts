// A session's event log as the dashboard reads it: followed live over the server-sent-events
// route (by fetch, so the API key header and the cookie both work), resumed with Last-Event-ID
// after a drop so nothing is lost or shown twice, and folded into a conversation.
import { storedKey } from "./api";

export type SessionEvent = { idx: number; kind: string; payload: Record<string, unknown> };

// parseFrames splits server-sent-events text into complete events and the unfinished rest.
export function parseFrames(buffer: string): { events: SessionEvent[]; rest: string } {
  const events: SessionEvent[] = [];
  const frames = buffer.replace(/\r\n/g, "\n").split("\n\n");
  const rest = frames.pop() ?? "";
  for (const frame of frames) {
    let id = "";
    let kind = "message";
    const data: string[] = [];
    for (const line of frame.split("\n")) {
      const colon = line.indexOf(":");
      if (colon === 0) continue; // a comment (keep-alive)
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") kind = value;
      else if (field === "data") data.push(value);
    }
    if (id === "") continue;
    let payload: Record<string, unknown> = {};
    try {
      payload = JSON.parse(data.join("\n") || "{}");
    } catch {
      payload = { raw: data.join("\n") };
    }
    events.push({ idx: Number(id), kind, payload });
  }
  return { events, rest };
}

export type FollowOptions = {
  onEvent: (e: SessionEvent) => void;
  onState?: (state: "live" | "reconnecting", why?: string) => void;
  signal: AbortSignal;
  fetchImpl?: typeof fetch;
  retryMs?: number;
};

// followEvents streams a session's events until signal aborts, reconnecting after any drop from
// the last event it delivered.
export async function followEvents(sessionId: string, opts: FollowOptions): Promise<void> {
  const doFetch = opts.fetchImpl ?? fetch;
  let last = -1;
  while (!opts.signal.aborted) {
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      const key = storedKey();
      if (key) headers["x-api-key"] = key;
      if (last >= 0) headers["Last-Event-ID"] = String(last);
      const resp = await doFetch(`/api/v1/sessions/${encodeURIComponent(sessionId)}/events`, {
        headers,
        credentials: "same-origin",
        signal: opts.signal,
      });
      if (!resp.ok || !resp.body) throw new Error(`${resp.status} ${await resp.text()}`);
      opts.onState?.("live");
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const { events, rest } = parseFrames(buffer + value);
        buffer = rest;
        for (const e of events) {
          if (e.idx <= last) continue;
          last = e.idx;
          opts.onEvent(e);
        }
      }
      opts.onState?.("reconnecting", "the stream ended");
    } catch (err) {
      if (opts.signal.aborted) return;
      opts.onState?.("reconnecting", String(err));
    }
    await new Promise((r) => setTimeout(r, opts.retryMs ?? 1000));
  }
}

// SessionLog is what the session page reads of the log: every event so far, the artifacts
// among them, and whether the stream is live.
export type SessionLog = { events: SessionEvent[]; artifacts: SessionEvent[]; live: "live" | "reconnecting" };

// EventStore holds a followed session's log for React's useSyncExternalStore: an event
// appended here is rendered in the same task (an external store's update is synchronous),
// not after a scheduler task, so it reaches the page as soon as the stream brings it. Each
// append makes a new snapshot; the artifacts keep their identity until an artifact comes.
export class EventStore {
  private log: SessionLog = { events: [], artifacts: [], live: "reconnecting" };
  private listeners = new Set<() => void>();

  subscribe = (listener: () => void) => {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  };

  snapshot = () => this.log;

  append = (e: SessionEvent) => {
    const artifacts = e.kind === "artifact.created" ? [...this.log.artifacts, e] : this.log.artifacts;
    this.set({ ...this.log, events: [...this.log.events, e], artifacts });
  };

  setLive = (live: SessionLog["live"]) => {
    if (live !== this.log.live) this.set({ ...this.log, live });
  };

  private set(log: SessionLog) {
    this.log = log;
    for (const l of this.listeners) l();
  }
}

export type PromptTurn = { type: "prompt"; idx: number; promptId: string; text: string; state: "queued" | "running" | "dequeued" };
export type ToolTurn = { type: "tool"; idx: number; id: string; name: string; input: unknown; result?: string; isError?: boolean };
export type Turn =
  | PromptTurn
  | ToolTurn
  | { type: "assistant"; idx: number; text: string }
  | { type: "error"; idx: number; text: string }
  | { type: "note"; idx: number; kind: string; text: string };

export type Conversation = {
  turns: Turn[];
  queued: { promptId: string; text: string }[];
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number };
  running: boolean;
};

const str = (v: unknown) => (typeof v === "string" ? v : "");
const num = (v: unknown) => (typeof v === "number" ? v : 0);

// fold turns the event log into what the session page shows: prompts with their state, the
// assistant's messages, each tool call with its result, errors, and the rest as short notes.
export function fold(events: SessionEvent[]): Conversation {
  const c: Conversation = { turns: [], queued: [], usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, running: false };
  const prompts = new Map<string, PromptTurn>();
  const tools = new Map<string, ToolTurn>();
  for (const e of events) {
    const p = e.payload;
    switch (e.kind) {
      case "prompt.queued": {
        const turn: PromptTurn = { type: "prompt", idx: e.idx, promptId: str(p.prompt_id), text: str(p.text), state: "queued" };
        prompts.set(turn.promptId, turn);
        c.turns.push(turn);
        break;
      }
      case "prompt.edited": {
        const t = prompts.get(str(p.prompt_id));
        if (t) t.text = str(p.text);
        break;
      }
      case "prompt.dequeued": {
        const t = prompts.get(str(p.prompt_id));
        if (t) t.state = "dequeued";
        break;
      }
      case "prompt.started": {
        const t = prompts.get(str(p.prompt_id));
        if (t) t.state = "running";
        c.running = true;
        break;
      }
      case "assistant.message":
        c.turns.push({ type: "assistant", idx: e.idx, text: str(p.text) });
        break;
      case "tool.call": {
        const turn: ToolTurn = { type: "tool", idx: e.idx, id: str(p.tool_call_id), name: str(p.tool_name), input: p.input };
        tools.set(turn.id, turn);
        c.turns.push(turn);
        break;
      }
      case "tool.result": {
        const t = tools.get(str(p.tool_call_id));
        if (t) {
          t.result = str(p.text);
          t.isError = p.is_error === true;
        } else {
          c.turns.push({ type: "note", idx: e.idx, kind: e.kind, text: str(p.text) });
        }
        break;
      }
      case "usage": {
        const u = (p.usage ?? {}) as Record<string, unknown>;
        c.usage.inputTokens += num(u.input_tokens);
        c.usage.outputTokens += num(u.output_tokens);
        // A usage event is its turn's alone, its cache tokens apart from input_tokens.
        c.usage.cacheReadTokens += num(u.cache_read_tokens);
        c.usage.cacheWriteTokens += num(u.cache_write_tokens);
        c.usage.costUsd += num(u.cost_usd);
        break;
      }
      case "error":
        c.turns.push({ type: "error", idx: e.idx, text: str(p.text) });
        break;
      case "turn.done":
      case "interrupted":
        c.running = false;
        c.turns.push({ type: "note", idx: e.idx, kind: e.kind, text: e.kind === "interrupted" ? "interrupted" : "turn done" });
        break;
      default:
        c.turns.push({ type: "note", idx: e.idx, kind: e.kind, text: summary(e) });
    }
  }
  for (const t of prompts.values()) if (t.state === "queued") c.queued.push({ promptId: t.promptId, text: t.text });
  return c;
}

function summary(e: SessionEvent): string {
  const p = e.payload;
  if (e.kind === "session.status") return `${str(p.from)} → ${str(p.to)}${p.reason ? ` (${str(p.reason)})` : ""}`;
  if (e.kind === "exec.started") return Array.isArray(p.argv) && p.argv.length > 0 ? p.argv.join(" ") : str(p.command);
  if (e.kind === "exec.exited") return `exit status ${num(p.exit_status)}`;
  if (e.kind === "file.written") return str(p.path);
  if (e.kind === "shell.opened" || e.kind === "shell.closed") return str(p.shell_id);
  if (e.kind === "snapshot.taken") return `${str(p.snapshot_id)} · ${num(p.files)} files · ${num(p.bytes_uploaded)} bytes uploaded`;
  return JSON.stringify(p).slice(0, 200);
}
