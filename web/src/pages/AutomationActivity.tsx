// The automation page's activity tabs: its instances (one per key its entrypoints open), the
// events it dropped and why, and the samples of the events it starts on. What a tab shows
// in detail (an instance, an event key) is in the URL, so it is a link.
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { Link, useOutletContext, useSearchParams } from "react-router-dom";

import { ConfirmButton } from "../components/ConfirmButton";
import { ListWithCreate, When } from "../components/ListWithCreate";
import { Loaded } from "../components/Loaded";
import { AutomationService } from "../gen/svc/app/v1/automation_pb";
import { AutomationRunService } from "../gen/svc/app/v1/automation_run_pb";
import type { AutomationContext } from "./Automation";

const listLimit = 50;

// useParam is one search parameter of the URL and a way to set it (or drop it, given "").
function useParam(name: string): [string, (v: string) => void] {
  const [params, setParams] = useSearchParams();
  const set = (v: string) => {
    const next = new URLSearchParams(params);
    if (v) next.set(name, v);
    else next.delete(name);
    setParams(next);
  };
  return [params.get(name) ?? "", set];
}

// JSONBlock pretty-prints a JSON text in a collapsed block ("—" when it is empty).
export function JSONBlock({ summary, json }: { summary: string; json: string }) {
  if (!json || json === "{}") return <>—</>;
  let text = json;
  try {
    text = JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    // Not JSON after all: shown as it came.
  }
  return (
    <details>
      <summary>{summary}</summary>
      <pre>{text}</pre>
    </details>
  );
}

// InstancesTab lists the automation's instances (open ones; closed too when asked, ?closed=1),
// closes one, and shows the one in ?instance= with its handles and runs.
export function InstancesTab() {
  const { automation: a } = useOutletContext<AutomationContext>();
  const [closed, setClosed] = useParam("closed");
  const [instance, setInstance] = useParam("instance");
  const list = useQuery(AutomationRunService.method.listInstances, { automationId: a.id, includeClosed: closed === "1", limit: listLimit });
  const close = useMutation(AutomationRunService.method.closeInstance, { onSuccess: () => void list.refetch() });
  return (
    <>
      {instance && <InstanceDetail key={instance} id={instance} onClose={() => setInstance("")} />}
      <ListWithCreate
        title="Instances"
        above={
          <label className="chip">
            <input type="checkbox" checked={closed === "1"} onChange={(e) => setClosed(e.target.checked ? "1" : "")} /> Show closed
          </label>
        }
        errors={[close.error]}
        query={list}
        what="instances"
        rows={(d) => d.instances}
        rowKey={(i) => i.id}
        empty={closed === "1" ? "No instances yet." : "No open instances."}
        columns={[
          {
            header: "Instance",
            cell: (i) => (
              <button type="button" className="link" onClick={() => setInstance(i.id)} aria-current={i.id === instance || undefined}>
                {i.id}
              </button>
            ),
          },
          { header: "Key", cell: (i) => <code>{i.key}</code> },
          { header: "Status", cell: (i) => <span className={`status status-${i.status === "open" ? "running" : "cancelled"}`}>{i.status}</span> },
          { header: "Opened", cell: (i) => <When at={i.openedAt} /> },
          { header: "By", cell: (i) => i.openedBy },
          {
            header: "Closed",
            cell: (i) => (
              <>
                <When at={i.closedAt} />
                {i.closeReason && <div className="muted">{i.closeReason}</div>}
              </>
            ),
          },
          { header: "Inputs", cell: (i) => <JSONBlock summary="inputs" json={i.inputsJson} /> },
          {
            header: "",
            cell: (i) =>
              !i.closedAt && <ConfirmButton label="Close" disabled={close.isPending} onConfirm={() => close.mutate({ id: i.id, reason: "closed from the dashboard" })} />,
          },
        ]}
      />
    </>
  );
}

// InstanceDetail is one instance: its state, the handles written to it, and its runs.
function InstanceDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const got = useQuery(AutomationRunService.method.getInstance, { id });
  const runs = useQuery(AutomationRunService.method.listRuns, { automationId: got.data?.instance?.automationId ?? "", instanceId: id, limit: 20 }, { enabled: !!got.data?.instance });
  return (
    <section className="job" aria-label="Instance">
      <h2>
        Instance <code>{id}</code>{" "}
        <button type="button" onClick={onClose}>
          Hide
        </button>
      </h2>
      <Loaded query={got} what="the instance">
        {(d) => (
          <>
            <p>
              <code>{d.instance?.key}</code> <span className="muted">· {d.instance?.status}</span>
            </p>
            <ListWithCreate
              label="Handles"
              query={got}
              what="handles"
              rows={(x) => x.handles}
              rowKey={(h) => h.handle}
              empty="No handles written."
              columns={[
                { header: "Handle", cell: (h) => <code>{h.handle}</code> },
                { header: "Written by", cell: (h) => h.writtenBy },
                { header: "At", cell: (h) => <When at={h.createdAt} /> },
              ]}
            />
            <ListWithCreate
              label="Instance runs"
              query={runs}
              what="runs"
              rows={(x) => x.runs}
              rowKey={(r) => r.id}
              empty="No runs of this instance."
              columns={[
                { header: "Run", cell: (r) => <Link to={`/runs/${r.id}`}>{r.id}</Link> },
                {
                  header: "Status",
                  cell: (r) => (
                    <>
                      <span className={`status status-${r.status}`}>{r.status}</span>
                      {r.dryRun && <span className="muted"> · dry run</span>}
                    </>
                  ),
                },
                { header: "Version", cell: (r) => `v${r.version}` },
              ]}
            />
          </>
        )}
      </Loaded>
    </section>
  );
}

// DropsTab lists the events the automation received but did not run on, newest first, and why.
export function DropsTab() {
  const { automation: a } = useOutletContext<AutomationContext>();
  const list = useQuery(AutomationRunService.method.listRecentDrops, { automationId: a.id, limit: listLimit });
  return (
    <ListWithCreate
      title="Dropped events"
      query={list}
      what="drops"
      rows={(d) => d.drops}
      rowKey={(d) => `${d.droppedAt} ${d.entrypointId} ${d.eventKey} ${d.detail}`}
      empty="Nothing dropped or filtered out: every event that reached the automation ran it."
      columns={[
        { header: "Dropped", cell: (d) => <When at={d.droppedAt} /> },
        { header: "Entrypoint", cell: (d) => <code>{d.entrypointId}</code> },
        { header: "Event", cell: (d) => <code>{d.eventKey}</code> },
        { header: "Why", cell: (d) => <span className="status status-cancelled">{d.reason}</span> },
        { header: "Detail", cell: (d) => d.detail || "—" },
      ]}
    />
  );
}

// SamplesTab lists the newest payloads received of the automation's events (of one event key
// when ?event= names it), each of which a dry run can replay.
export function SamplesTab() {
  const { automation: a } = useOutletContext<AutomationContext>();
  const [eventKey, setEventKey] = useParam("event");
  const list = useQuery(AutomationService.method.listEventSamples, { automationId: a.id, eventKey: eventKey || undefined, limit: 20 });
  const dry = useMutation(AutomationService.method.dryRun);
  const keys = [...new Set([...(list.data?.samples.map((s) => s.eventKey) ?? []), ...(eventKey ? [eventKey] : [])])];
  return (
    <ListWithCreate
      title="Event samples"
      above={
        <div className="filters">
          <label>
            Event
            <select value={eventKey} onChange={(e) => setEventKey(e.target.value)}>
              <option value="">Every event it starts on</option>
              {keys.map((k) => (
                <option key={k} value={k}>
                  {k}
                </option>
              ))}
            </select>
          </label>
          <Link to="/event-catalog">Event catalog</Link>
          {dry.data && (
            <span role="status">
              Dry run <Link to={`/runs/${dry.data.runId}`}>{dry.data.runId}</Link>
            </span>
          )}
        </div>
      }
      errors={[dry.error]}
      query={list}
      what="samples"
      rows={(d) => d.samples}
      rowKey={(s) => s.id}
      empty="No samples yet: they are kept as events arrive."
      columns={[
        { header: "Received", cell: (s) => <When at={s.receivedAt} /> },
        { header: "Event", cell: (s) => <code>{s.eventKey}</code> },
        { header: "Payload", cell: (s) => <JSONBlock summary="payload" json={s.payloadJson} /> },
        {
          header: "",
          cell: (s) => (
            <button type="button" disabled={dry.isPending || a.archived} onClick={() => dry.mutate({ automationId: a.id, sample: { case: "sampleId", value: s.id } })}>
              Dry run
            </button>
          ),
        },
      ]}
    />
  );
}

