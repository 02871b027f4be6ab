import { EventStore, fold, followEvents, parseFrames, type SessionEvent } from "./events";
import { sameTurn } from "./pages/Session";

const frame = (idx: number, kind: string, payload: object) => `id: ${idx}\nevent: ${kind}\ndata: ${JSON.stringify(payload)}\n\n`;

describe("parseFrames", () => {
  it("keeps an unfinished frame for the next chunk", () => {
    const whole = frame(1, "assistant.message", { text: "hi" }) + frame(2, "turn.done", {});
    const cut = whole.length - 5;
    const first = parseFrames(whole.slice(0, cut));
    expect(first.events.map((e) => e.idx)).toEqual([1]);
    const second = parseFrames(first.rest + whole.slice(cut));
    expect(second.events).toEqual([{ idx: 2, kind: "turn.done", payload: {} }]);
    expect(second.rest).toBe("");
  });

  it("skips comments, joins data lines and keeps a payload that is not JSON", () => {
    const { events } = parseFrames(": keep-alive\n\nid: 3\nevent: note\ndata: not\ndata: json\n\n");
    expect(events).toEqual([{ idx: 3, kind: "note", payload: { raw: "not\njson" } }]);
  });
});

// stream answers one fetch with the frames as a body that then ends, like a dropped connection.
function stream(...frames: string[]): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const f of frames) c.enqueue(new TextEncoder().encode(f));
      c.close();
    },
  });
  return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
}

describe("followEvents", () => {
  it("reconnects after a drop from the last event it delivered, never twice the same", async () => {
    const asked: (string | null)[] = [];
    const answers = [
      stream(frame(1, "a", {}), frame(2, "b", {})),
      // The server may repeat what the client already has; it is not delivered again.
      stream(frame(2, "b", {}), frame(3, "c", {})),
    ];
    const ctl = new AbortController();
    const got: number[] = [];
    const done = followEvents("sess_1", {
      signal: ctl.signal,
      retryMs: 1,
      fetchImpl: async (_url, init) => {
        asked.push(new Headers(init?.headers).get("Last-Event-ID"));
        const next = answers.shift();
        if (!next) {
          ctl.abort();
          throw new DOMException("aborted", "AbortError");
        }
        return next;
      },
      onEvent: (e) => got.push(e.idx),
    });
    await done;
    expect(got).toEqual([1, 2, 3]);
    expect(asked).toEqual([null, "2", "3"]);
  });
});

describe("fold", () => {
  const ev = (idx: number, kind: string, payload: Record<string, unknown> = {}): SessionEvent => ({ idx, kind, payload });

  it("pairs tool calls with results, sums usage and tracks the queue", () => {
    const c = fold([
      ev(1, "prompt.queued", { prompt_id: "p1", text: "fix it" }),
      ev(2, "prompt.started", { prompt_id: "p1" }),
      ev(3, "prompt.queued", { prompt_id: "p2", text: "then this" }),
      ev(4, "prompt.queued", { prompt_id: "p3", text: "and that" }),
      ev(5, "prompt.edited", { prompt_id: "p2", text: "then this, better" }),
      ev(6, "prompt.dequeued", { prompt_id: "p3" }),
      ev(7, "tool.call", { tool_call_id: "t1", tool_name: "Edit", input: { path: "a.go" } }),
      ev(8, "tool.result", { tool_call_id: "t1", text: "ok" }),
      ev(9, "assistant.message", { text: "Done." }),
      ev(10, "usage", { usage: { input_tokens: 10, output_tokens: 5, cost_usd: 0.01 } }),
      ev(11, "usage", { usage: { input_tokens: 1, output_tokens: 1, cache_read_tokens: 40, cache_write_tokens: 3 } }),
    ]);
    expect(c.running).toBe(true);
    expect(c.queued).toEqual([{ promptId: "p2", text: "then this, better" }]);
    expect(c.usage).toEqual({ inputTokens: 11, outputTokens: 6, cacheReadTokens: 40, cacheWriteTokens: 3, costUsd: 0.01 });
    expect(c.turns.find((t) => t.type === "tool")).toMatchObject({ name: "Edit", result: "ok", isError: false });
    expect(c.turns.filter((t) => t.type === "prompt").map((t) => t.type === "prompt" && t.state)).toEqual([
      "running",
      "queued",
      "dequeued",
    ]);
  });

  it("ends the running turn on turn.done or an interrupt", () => {
    expect(fold([ev(1, "prompt.started", { prompt_id: "p" }), ev(2, "turn.done")]).running).toBe(false);
    expect(fold([ev(1, "prompt.started", { prompt_id: "p" }), ev(2, "interrupted")]).running).toBe(false);
  });
});

describe("sameTurn", () => {
  it("finds a turn folded again from a longer log the same, and a prompt whose state moved not", () => {
    const log: SessionEvent[] = [
      { idx: 1, kind: "prompt.queued", payload: { prompt_id: "p1", text: "hi" } },
      { idx: 2, kind: "tool.call", payload: { tool_call_id: "t1", tool_name: "bash", input: { cmd: "ls" } } },
    ];
    const before = fold(log).turns;
    const after = fold([...log, { idx: 3, kind: "prompt.started", payload: { prompt_id: "p1" } }]).turns;
    expect(sameTurn(before[1], after[1])).toBe(true);
    expect(sameTurn(before[0], after[0])).toBe(false);
  });
});

describe("EventStore", () => {
  it("makes a new snapshot for each event and tells its listeners, keeping the artifacts until an artifact comes", () => {
    const store = new EventStore();
    let told = 0;
    const stop = store.subscribe(() => told++);
    const first = store.snapshot();
    store.append({ idx: 1, kind: "exec.started", payload: {} });
    const second = store.snapshot();
    expect(second).not.toBe(first);
    expect(second.events.map((e) => e.idx)).toEqual([1]);
    expect(second.artifacts).toBe(first.artifacts);
    store.append({ idx: 2, kind: "artifact.created", payload: { artifact_id: "a1" } });
    expect(store.snapshot().artifacts.map((e) => e.idx)).toEqual([2]);
    store.setLive("live");
    store.setLive("live");
    expect(told).toBe(3);
    stop();
    store.append({ idx: 3, kind: "usage", payload: {} });
    expect(told).toBe(3);
  });
});
