import { fold, followEvents, parseFrames, type SessionEvent } from "./events";

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
      ev(11, "usage", { usage: { input_tokens: 1, output_tokens: 1 } }),
    ]);
    expect(c.running).toBe(true);
    expect(c.queued).toEqual([{ promptId: "p2", text: "then this, better" }]);
    expect(c.usage).toEqual({ inputTokens: 11, outputTokens: 6, costUsd: 0.01 });
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
