import { useMutation, useQuery } from "@connectrpc/connect-query";
import { lazy, memo, Suspense, useEffect, useMemo, useState, useSyncExternalStore, type FormEvent } from "react";
import { Link, useParams } from "react-router-dom";

import { ErrorView, Loading } from "../components/States";
import { EventStore, fold, followEvents, type Turn } from "../events";
import { SessionService } from "../gen/svc/app/v1/session_pb";
import { SessionApps } from "./SessionApps";
import { Files } from "./SessionFiles";

// SessionPage is one session at work: its state, the live conversation, a prompt box with the
// queue, its apps, its checkpoints, and its files and artifacts.
export function SessionPage() {
  const { sessionId = "" } = useParams();
  const session = useQuery(SessionService.method.getSession, { sessionId }, { refetchInterval: 5000 });
  const { events, artifacts, live } = useEvents(sessionId);
  const conversation = useMemo(() => fold(events), [events]);

  if (session.isPending) return <Loading what="the session" />;
  if (session.isError) return <ErrorView error={session.error} />;
  const s = session.data.session!;
  // The session's own totals, kept by the API; the events' sum only before it has any.
  const usage = s.usage
    ? {
        inputTokens: Number(s.usage.inputTokens),
        outputTokens: Number(s.usage.outputTokens),
        cacheReadTokens: Number(s.usage.cacheReadTokens),
        cacheWriteTokens: Number(s.usage.cacheWriteTokens),
        costUsd: s.usage.costUsd,
      }
    : conversation.usage;
  return (
    <section className="session">
      <h1>
        Session <code>{s.id}</code>
      </h1>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <span className={`status status-${s.status}`}>{s.status}</span>{" "}
          <span className="muted" role="status" aria-label="Event stream">
            {live === "live" ? "● live" : "○ reconnecting…"}
          </span>
        </dd>
        <dt>Image</dt>
        <dd>
          <code>{s.image}</code>
        </dd>
        {s.hostId && (
          <>
            <dt>Host</dt>
            <dd>{s.hostId}</dd>
          </>
        )}
        <dt>Usage</dt>
        <dd>
          {usage.inputTokens} in · {usage.cacheReadTokens} cached · {usage.cacheWriteTokens} cache written · {usage.outputTokens} out
          {usage.costUsd > 0 && ` · $${usage.costUsd.toFixed(4)}`}
        </dd>
      </dl>
      <div className="columns">
        <div>
          <h2>Conversation</h2>
          <ol className="conversation" aria-label="Conversation">
            {conversation.turns.map((t) => (
              <TurnView key={t.idx} turn={t} />
            ))}
          </ol>
          <PromptBox sessionId={sessionId} running={conversation.running} queued={conversation.queued} />
          <Suspense fallback={<Loading what="the terminal" />}>
            <SessionTerminal sessionId={sessionId} />
          </Suspense>
        </div>
        <aside>
          <SessionApps sessionId={sessionId} status={s.status} apps={s.apps} />
          <Checkpoints sessionId={sessionId} />
          <SessionFiles sessionId={sessionId} artifacts={artifacts} />
        </aside>
      </div>
    </section>
  );
}

// useEvents follows the session's events into an EventStore of its own, from which the page
// renders each event in the task that brought it.
function useEvents(sessionId: string) {
  // A store per session: another session starts from an empty log.
  const store = useMemo(() => new EventStore(), [sessionId]);
  useEffect(() => {
    const ctl = new AbortController();
    void followEvents(sessionId, { signal: ctl.signal, onEvent: store.append, onState: store.setLive });
    return () => ctl.abort();
  }, [sessionId, store]);
  return useSyncExternalStore(store.subscribe, store.snapshot);
}

// The panels beside the conversation depend only on their props: memo keeps a new event from
// rendering them again. The terminal (xterm.js, about a third of the dashboard's code) is its
// own chunk, loaded when a session page opens rather than with every page.
const SessionTerminal = lazy(() => import("./Terminal").then((m) => ({ default: memo(m.Terminal) })));
const SessionFiles = memo(Files);

// sameTurn says whether two folds of the log made the same turn: fold makes new objects each
// time, so memo compares their fields (a tool call's input is the same payload object).
export function sameTurn(a: Turn, b: Turn): boolean {
  const ka = Object.keys(a) as (keyof Turn)[];
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

// TurnView is rendered again only when its turn changed, not for every event of the session.
const TurnView = memo(function TurnView({ turn }: { turn: Turn }) {
  switch (turn.type) {
    case "prompt":
      return (
        <li className={`turn prompt ${turn.state}`}>
          <strong>You</strong> {turn.state !== "running" && <em>({turn.state})</em>}
          <p>{turn.text}</p>
        </li>
      );
    case "assistant":
      return (
        <li className="turn assistant">
          <strong>Agent</strong>
          <p>{turn.text}</p>
        </li>
      );
    case "tool":
      return (
        <li className={`turn tool${turn.isError ? " failed" : ""}`}>
          <details>
            <summary>
              🔧 <code>{turn.name}</code> {turn.result === undefined ? "…" : turn.isError ? "failed" : "done"}
            </summary>
            <pre>{JSON.stringify(turn.input, null, 2)}</pre>
            {turn.result !== undefined && <pre className="output">{turn.result}</pre>}
          </details>
        </li>
      );
    case "error":
      return (
        <li className="turn error" role="alert">
          {turn.text}
        </li>
      );
    case "note":
      return (
        <li className="turn note">
          <span className="kind">{turn.kind}</span> {turn.text}
        </li>
      );
  }
}, (a, b) => sameTurn(a.turn, b.turn));

function PromptBox(props: { sessionId: string; running: boolean; queued: { promptId: string; text: string }[] }) {
  const [text, setText] = useState("");
  const send = useMutation(SessionService.method.sendPrompt);
  const interrupt = useMutation(SessionService.method.interrupt);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    // A prompt id makes a retried send (a double click, a dropped answer) queue it once.
    send.mutate(
      { sessionId: props.sessionId, text, promptId: `web-${crypto.randomUUID()}` },
      { onSuccess: () => setText("") },
    );
  };
  return (
    <div className="promptbox">
      {props.queued.length > 0 && (
        <ul className="queue" aria-label="Queued prompts">
          {props.queued.map((q) => (
            <QueuedPrompt key={q.promptId} sessionId={props.sessionId} {...q} />
          ))}
        </ul>
      )}
      <form onSubmit={submit} aria-label="Send a prompt">
        <label>
          Prompt
          <textarea value={text} onChange={(e) => setText(e.target.value)} rows={3} required />
        </label>
        <div className="actions">
          <button type="submit" disabled={send.isPending}>
            {props.running ? "Queue" : "Send"}
          </button>
          <button
            type="button"
            disabled={!props.running || interrupt.isPending}
            onClick={() => interrupt.mutate({ sessionId: props.sessionId, source: "dashboard" })}
          >
            Interrupt
          </button>
        </div>
        {send.isError && <ErrorView error={send.error} />}
        {interrupt.isError && <ErrorView error={interrupt.error} />}
      </form>
    </div>
  );
}

function QueuedPrompt({ sessionId, promptId, text }: { sessionId: string; promptId: string; text: string }) {
  const [draft, setDraft] = useState<string | null>(null);
  const edit = useMutation(SessionService.method.editQueuedPrompt);
  const dequeue = useMutation(SessionService.method.dequeueQueuedPrompt);
  return (
    <li>
      {draft === null ? (
        <>
          <span>{text}</span> <button onClick={() => setDraft(text)}>Edit</button>{" "}
          <button onClick={() => dequeue.mutate({ sessionId, promptId })}>Remove</button>
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            edit.mutate({ sessionId, promptId, text: draft }, { onSuccess: () => setDraft(null) });
          }}
        >
          <input aria-label="Queued prompt" value={draft} onChange={(e) => setDraft(e.target.value)} />
          <button type="submit">Save</button> <button onClick={() => setDraft(null)}>Cancel</button>
        </form>
      )}
      {edit.isError && <ErrorView error={edit.error} />}
      {dequeue.isError && <ErrorView error={dequeue.error} />}
    </li>
  );
}

const Checkpoints = memo(function Checkpoints({ sessionId }: { sessionId: string }) {
  const list = useQuery(SessionService.method.listCheckpoints, { sessionId });
  const refetch = { onSettled: () => void list.refetch() };
  const snapshot = useMutation(SessionService.method.snapshot, refetch);
  const evict = useMutation(SessionService.method.evictLocal, refetch);
  const resume = useMutation(SessionService.method.resume, refetch);
  const failed = [snapshot, evict, resume].find((m) => m.isError);
  return (
    <section aria-label="Checkpoints">
      <h2>Checkpoints</h2>
      <div className="actions">
        <button onClick={() => snapshot.mutate({ sessionId })} disabled={snapshot.isPending}>
          Snapshot
        </button>
        <button onClick={() => evict.mutate({ sessionId })} disabled={evict.isPending}>
          Evict
        </button>
        <button onClick={() => resume.mutate({ sessionId })} disabled={resume.isPending}>
          Resume
        </button>
      </div>
      {failed && <ErrorView error={failed.error} />}
      {list.isPending ? (
        <Loading what="checkpoints" />
      ) : list.isError ? (
        <ErrorView error={list.error} />
      ) : list.data.checkpoints.length === 0 ? (
        <p className="empty">No checkpoints yet.</p>
      ) : (
        <ul>
          {list.data.checkpoints.map((c) => (
            <li key={c.snapshotId}>
              <code>{c.snapshotId}</code> {c.isLatest && <em>latest</em>}
              <br />
              <span className="muted">
                {new Date(c.createdAt).toLocaleString()} · {Number(c.sizeBytes)} bytes
              </span>
            </li>
          ))}
        </ul>
      )}
      <p>
        <Link to="/tasks">← Tasks</Link>
      </p>
    </section>
  );
});
