import { useQuery } from "@connectrpc/connect-query";
import { Link, useSearchParams } from "react-router-dom";

import { ListWithCreate } from "../components/ListWithCreate";
import { AutomationService } from "../gen/svc/app/v1/automation_pb";
import { JSONBlock } from "./AutomationActivity";

// The providers ListEventCatalog knows (automation/catalog).
export const providers = ["github", "webhook", "schedule"];

// EventCatalogPage lists a provider's events (the provider in the URL, ?provider=), each with
// its schema and a sample, marking those this deployment has received; with the provider's
// scope and the webhook variables an automation may read.
export function EventCatalogPage() {
  const [params, setParams] = useSearchParams();
  const provider = params.get("provider") || providers[0];
  const [hidden, setHidden] = [params.get("hidden") === "1", (v: boolean) => setParams(v ? { provider, hidden: "1" } : { provider })];
  const list = useQuery(AutomationService.method.listEventCatalog, { provider });
  const d = list.data;
  return (
    <section>
      <p>
        <Link to="/automations">← Automations</Link>
      </p>
      <ListWithCreate
        title="Event catalog"
        level={1}
        above={
          <div className="filters">
            <label>
              Provider
              <select value={provider} onChange={(e) => setParams({ provider: e.target.value })}>
                {providers.map((p) => (
                  <option key={p} value={p}>
                    {p}
                  </option>
                ))}
              </select>
            </label>
            <label className="chip">
              <input type="checkbox" checked={hidden} onChange={(e) => setHidden(e.target.checked)} /> Show hidden events
            </label>
            {d?.scope && (
              <span>
                Scoped by <code>{d.scope.key}</code> ({d.scope.label})
              </span>
            )}
          </div>
        }
        label="Events"
        query={list}
        what="events"
        rows={(x) => x.events.filter((e) => hidden || !e.hidden)}
        rowKey={(e) => e.key}
        empty={`${provider} has no events.`}
        columns={[
          {
            header: "Event",
            cell: (e) => (
              <>
                <strong>{e.label}</strong> <code className="muted">{e.key}</code>
                {e.hidden && <span className="status"> hidden</span>}
              </>
            ),
          },
          { header: "Description", cell: (e) => e.description },
          { header: "Received here", cell: (e) => (e.observed ? <span className="status status-completed">yes</span> : <span className="muted">not yet</span>) },
          { header: "Schema", cell: (e) => <JSONBlock summary="schema" json={e.schemaJson} /> },
          { header: "Sample", cell: (e) => <JSONBlock summary="sample" json={e.sampleJson} /> },
        ]}
      />
      {d && d.variables.length > 0 && (
        <>
          <h2>Webhook variables</h2>
          <ul aria-label="Webhook variables">
            {d.variables.map((v) => (
              <li key={v.path}>
                <code>{v.alias}</code> ← <code>{v.path}</code>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
