import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useEffect, useState } from "react";
import { Link, NavLink, Outlet, useOutletContext, useParams } from "react-router-dom";

import { BlockErrors, blockErrorsOf } from "../components/BlockErrors";
import { Empty, ErrorView, Loading } from "../components/States";
import { AutomationService, type Automation } from "../gen/svc/app/v1/automation_pb";
import { AutomationRunService } from "../gen/svc/app/v1/automation_run_pb";

// AutomationPage is one automation: its controls and, one tab (and one deep link) each, its
// definition (edited with validation as you type, saved as a new version, with its versions, its
// runs and a playground for code blocks), its instances, the events it dropped, and the samples
// of the events it starts on.
export function AutomationPage() {
  const { automationId = "" } = useParams();
  const got = useQuery(AutomationService.method.getAutomation, { lookup: { case: "id", value: automationId } });
  if (got.isPending) return <Loading what="the automation" />;
  if (got.isError) return <ErrorView error={got.error} />;
  const a = got.data.automation!;
  const context: AutomationContext = { automation: a, refetch: () => void got.refetch() };
  return (
    <section>
      <p>
        <Link to="/automations">← Automations</Link>
      </p>
      <h1>{a.name}</h1>
      <p className="muted">{a.description}</p>
      <Controls automation={a} onChange={context.refetch} />
      <nav className="tabs" aria-label="Automation">
        <NavLink to={`/automations/${a.id}`} end>
          Definition
        </NavLink>
        <NavLink to={`/automations/${a.id}/instances`}>Instances</NavLink>
        <NavLink to={`/automations/${a.id}/drops`}>Drops</NavLink>
        <NavLink to={`/automations/${a.id}/samples`}>Event samples</NavLink>
      </nav>
      <Outlet context={context} />
    </section>
  );
}

// AutomationContext is what the automation page hands its tabs.
export type AutomationContext = { automation: Automation; refetch: () => void };

// DefinitionTab is the editor beside the runs and versions, and the code playground.
export function DefinitionTab() {
  const { automation: a, refetch } = useOutletContext<AutomationContext>();
  return (
    <>
      <div className="columns">
        <Editor key={a.currentVersion} automation={a} onSaved={refetch} />
        <aside>
          <Runs automationId={a.id} />
          <Versions automationId={a.id} />
        </aside>
      </div>
      <Playground />
    </>
  );
}

function Controls({ automation: a, onChange }: { automation: Automation; onChange: () => void }) {
  const enable = useMutation(AutomationService.method.setAutomationEnabled, { onSuccess: onChange });
  const run = useMutation(AutomationService.method.runNow);
  return (
    <div className="actions">
      <span className={`status status-${a.enabled ? "running" : "cancelled"}`}>{a.enabled ? "enabled" : "disabled"}</span>
      <button disabled={a.archived || enable.isPending} onClick={() => enable.mutate({ id: a.id, enabled: !a.enabled })}>
        {a.enabled ? "Disable" : "Enable"}
      </button>
      <button disabled={a.archived || run.isPending} onClick={() => run.mutate({ automationId: a.id })}>
        Run now
      </button>
      {run.data && (
        <span>
          Started <Link to={`/runs/${run.data.runId}`}>{run.data.runId}</Link>
        </span>
      )}
      {enable.isError && <ErrorView error={enable.error} />}
      {run.isError && <ErrorView error={run.error} />}
    </div>
  );
}

function Editor({ automation: a, onSaved }: { automation: Automation; onSaved: () => void }) {
  const [draft, setDraft] = useState(a.version?.definitionJson ?? "");
  const [checked, setChecked] = useState(draft);
  // Check the draft once typing pauses, not at every key.
  useEffect(() => {
    const t = setTimeout(() => setChecked(draft), 400);
    return () => clearTimeout(t);
  }, [draft]);
  const render = useQuery(AutomationService.method.testRender, {
    automationId: a.id,
    draftDefinitionJson: checked,
    sample: { case: "payloadJson", value: "{}" },
  });
  const save = useMutation(AutomationService.method.saveVersion, { onSuccess: onSaved });
  const problems = render.isError ? blockErrorsOf(render.error) : (render.data?.errors ?? []);
  const valid = !render.isPending && !render.isError && problems.length === 0;
  return (
    <form
      className="editor"
      aria-label="Definition"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate({ automationId: a.id, definitionJson: draft });
      }}
    >
      <h2>Definition · version {a.currentVersion}</h2>
      <label>
        Definition (JSON)
        <textarea className="code" rows={18} value={draft} onChange={(e) => setDraft(e.target.value)} spellCheck={false} />
      </label>
      <p role="status" aria-label="Validation" className={valid ? "ok" : "muted"}>
        {draft !== checked || render.isFetching ? "Checking…" : valid ? "✓ Valid" : `${problems.length || "Some"} problem(s)`}
      </p>
      <BlockErrors errors={problems} />
      {render.isError && problems.length === 0 && <ErrorView error={render.error} />}
      {valid && render.data && render.data.blocks.length > 0 && (
        <details>
          <summary>Rendered with an empty event</summary>
          {render.data.blocks.map((b) => (
            <pre key={b.blockId}>
              {b.blockId} ({b.blockType}): {b.renderedJson}
            </pre>
          ))}
        </details>
      )}
      <button type="submit" disabled={save.isPending || a.archived || draft === a.version?.definitionJson}>
        Save as version {a.currentVersion + 1}
      </button>
      {save.isError && blockErrorsOf(save.error).length === 0 && <ErrorView error={save.error} />}
    </form>
  );
}

function Runs({ automationId }: { automationId: string }) {
  const runs = useQuery(AutomationRunService.method.listRuns, { automationId, limit: 20 }, { refetchInterval: 3000 });
  return (
    <section aria-label="Runs">
      <h2>Runs</h2>
      {runs.isPending ? (
        <Loading what="runs" />
      ) : runs.isError ? (
        <ErrorView error={runs.error} />
      ) : runs.data.runs.length === 0 ? (
        <Empty>No runs yet.</Empty>
      ) : (
        <ul>
          {runs.data.runs.map((r) => (
            <li key={r.id}>
              <Link to={`/runs/${r.id}`}>{r.id}</Link> <span className={`status status-${r.status}`}>{r.status}</span>
              {r.dryRun && <span className="muted"> · dry run</span>}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function Versions({ automationId }: { automationId: string }) {
  const versions = useQuery(AutomationService.method.listVersions, { automationId });
  return (
    <section aria-label="Versions">
      <h2>Versions</h2>
      {versions.isPending ? (
        <Loading what="versions" />
      ) : versions.isError ? (
        <ErrorView error={versions.error} />
      ) : (
        <ul>
          {versions.data.versions.map((v) => (
            <li key={v.number}>
              v{v.number} · <time dateTime={v.createdAt}>{new Date(v.createdAt).toLocaleString()}</time>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

// Playground evaluates a code block's JavaScript (or a CEL expression) in the same sandbox runs
// use.
function Playground() {
  const [mode, setMode] = useState("js");
  const [source, setSource] = useState("return { doubled: input.n * 2 };");
  const [input, setInput] = useState('{"n": 21}');
  const evalCode = useMutation(AutomationService.method.evalCode);
  const r = evalCode.data;
  return (
    <form
      className="editor"
      aria-label="Code playground"
      onSubmit={(e) => {
        e.preventDefault();
        evalCode.mutate({ source, mode, inputJson: input });
      }}
    >
      <h2>Code playground</h2>
      <label>
        Language
        <select value={mode} onChange={(e) => setMode(e.target.value)}>
          <option value="js">JavaScript</option>
          <option value="cel">CEL</option>
        </select>
      </label>
      <label>
        Source
        <textarea className="code" rows={5} value={source} onChange={(e) => setSource(e.target.value)} spellCheck={false} />
      </label>
      <label>
        Input (JSON)
        <input className="code" value={input} onChange={(e) => setInput(e.target.value)} />
      </label>
      <button type="submit" disabled={evalCode.isPending}>
        Evaluate
      </button>
      {evalCode.isError && <ErrorView error={evalCode.error} />}
      {r && (
        <div aria-label="Result">
          {r.errorName ? (
            <p className="error">
              {r.errorName}: {r.errorMessage}
              {r.errorLine !== undefined && ` (line ${r.errorLine})`}
            </p>
          ) : (
            <pre>{r.valueJson}</pre>
          )}
          {r.logs.length > 0 && <pre className="muted">{r.logs.join("\n")}</pre>}
          <p className="muted">{String(r.durationMs)} ms</p>
        </div>
      )}
    </form>
  );
}
