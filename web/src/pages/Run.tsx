import { useMutation, useQuery } from "@connectrpc/connect-query";
import { Link, useNavigate, useParams } from "react-router-dom";

import { ErrorView, Loading } from "../components/States";
import { AutomationRunService } from "../gen/svc/app/v1/automation_run_pb";

// finished are the run states automation/runs ends in.
const finished = ["completed", "failed", "filtered", "stopped"];

// RunPage is one automation run as a timeline of its steps: each attempt with its state,
// timing, error, inputs and outputs, and the sessions it started; refreshed until it ends.
export function RunPage() {
  const { runId = "" } = useParams();
  const navigate = useNavigate();
  const got = useQuery(
    AutomationRunService.method.getRun,
    { runId },
    { refetchInterval: (q) => (finished.includes(q.state.data?.run?.brief?.status ?? "") ? false : 2000) },
  );
  const stop = useMutation(AutomationRunService.method.stopRun, { onSuccess: () => void got.refetch() });
  const retry = useMutation(AutomationRunService.method.retryRun, { onSuccess: (r) => navigate(`/runs/${r.runId}`) });
  if (got.isPending) return <Loading what="the run" />;
  if (got.isError) return <ErrorView error={got.error} />;
  const run = got.data.run!;
  const b = run.brief!;
  return (
    <section>
      <p>
        <Link to={`/automations/${b.automationId}`}>← Automation</Link>
      </p>
      <h1>
        Run <code>{b.id}</code>
      </h1>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <span className={`status status-${b.status}`}>{b.status}</span>
          {b.dryRun && " (dry run)"}
        </dd>
        <dt>Version</dt>
        <dd>{b.version}</dd>
        <dt>Started by</dt>
        <dd>{b.triggerSource}</dd>
        {b.error && (
          <>
            <dt>Error</dt>
            <dd className="error">{b.error}</dd>
          </>
        )}
      </dl>
      <div className="actions">
        <button disabled={finished.includes(b.status) || stop.isPending} onClick={() => stop.mutate({ runId })}>
          Stop
        </button>
        <button disabled={!finished.includes(b.status) || retry.isPending} onClick={() => retry.mutate({ runId })}>
          Retry
        </button>
      </div>
      {stop.isError && <ErrorView error={stop.error} />}
      {retry.isError && <ErrorView error={retry.error} />}
      <h2>Steps</h2>
      <ol className="timeline" aria-label="Steps">
        {run.steps.map((s) => (
          <li key={`${s.blockId}-${s.attempt}`} className={`step status-${s.status}`}>
            <strong>{s.blockId}</strong> <span className={`status status-${s.status}`}>{s.status}</span>
            {s.attempt > 1 && <em> attempt {s.attempt}</em>}
            <span className="muted">
              {" "}
              {new Date(s.startedAt).toLocaleTimeString()}
              {s.endedAt && ` · ${Math.max(0, Date.parse(s.endedAt) - Date.parse(s.startedAt))} ms`}
            </span>
            {s.error && <p className="error">{s.error}</p>}
            {s.sessionId && (
              <p>
                Session <Link to={`/sessions/${s.sessionId}`}>{s.sessionId}</Link>
              </p>
            )}
            <details>
              <summary>Inputs and outputs</summary>
              <pre>{s.inputsJson}</pre>
              <pre>{s.outputsJson}</pre>
            </details>
          </li>
        ))}
      </ol>
    </section>
  );
}
