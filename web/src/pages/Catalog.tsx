import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQuery as useWhoami } from "@tanstack/react-query";
import { Link, useParams, useSearchParams } from "react-router-dom";

import { useAuth } from "../auth";
import { ConfirmButton } from "../components/ConfirmButton";
import { Loaded } from "../components/Loaded";
import { ErrorView } from "../components/States";
import { HarnessCatalogService } from "../gen/svc/app/v1/harness_pb";
import { ModelRouterService, RouterModelAudience } from "../gen/svc/app/v1/model_router_pb";

function useIsAdmin() {
  const auth = useAuth();
  return useWhoami({ queryKey: ["auth", "whoami"], queryFn: () => auth.whoami() }).data?.admin ?? false;
}

// HarnessesPage is the harness catalog: each harness's models, efforts and modes; an admin may
// delete a registered (not built-in) one.
export function HarnessesPage() {
  const list = useQuery(HarnessCatalogService.method.listHarnesses, {});
  const admin = useIsAdmin();
  const remove = useMutation(HarnessCatalogService.method.deleteHarness, { onSuccess: () => void list.refetch() });
  const options = (o: { id: string; label?: string; default: boolean }[]) =>
    o.map((x) => (x.default ? `${x.label || x.id} (default)` : x.label || x.id)).join(", ") || "—";
  return (
    <section>
      <h1>Harnesses</h1>
      {remove.isError && <ErrorView error={remove.error} />}
      <Loaded query={list} what="harnesses" isEmpty={(d) => d.harnesses.length === 0} empty="No harnesses.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Harnesses">
              <thead>
                <tr>
                  <th>Harness</th>
                  <th>Models</th>
                  <th>Effort</th>
                  <th>Modes</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.harnesses.map((h) => (
                  <tr key={h.name}>
                    <td>
                      <strong>{h.descriptor?.label || h.name}</strong> <code className="muted">{h.name}</code>
                      {h.builtIn && <span className="status"> built-in</span>}
                      {h.descriptor?.description && <div className="muted">{h.descriptor.description}</div>}
                    </td>
                    <td>{options(h.descriptor?.models ?? [])}</td>
                    <td>{options(h.descriptor?.effort ?? [])}</td>
                    <td>{options(h.descriptor?.modes ?? [])}</td>
                    <td>
                      {admin && !h.builtIn && (
                        <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ name: h.name })} />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </section>
  );
}

// ModelRoutersPage lists the configured model routers with their sync state.
export function ModelRoutersPage() {
  const list = useQuery(ModelRouterService.method.listModelRouters, {});
  return (
    <section>
      <h1>Model routers</h1>
      <Loaded query={list} what="model routers" isEmpty={(d) => d.routers.length === 0} empty="No model routers configured (HANGAR_MODEL_ROUTERS).">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Model routers">
              <thead>
                <tr>
                  <th>Router</th>
                  <th>Models</th>
                  <th>Key</th>
                  <th>Last sync</th>
                </tr>
              </thead>
              <tbody>
                {d.routers.map((r) => (
                  <tr key={r.id}>
                    <td>
                      <Link to={`/model-routers/${r.id}`}>{r.label || r.id}</Link>
                      {r.description && <div className="muted">{r.description}</div>}
                    </td>
                    <td>
                      {r.enabledModelCount} enabled · {r.availableModelCount} available · {r.modelCount} known
                    </td>
                    <td>{r.credentialConfigured ? <code>{r.credentialSecret}</code> : <span className="muted">not set</span>}</td>
                    <td>
                      {r.lastSyncError ? <span className="error-text">{r.lastSyncError}</span> : r.lastSuccessfulSyncAt ? new Date(r.lastSuccessfulSyncAt).toLocaleString() : "never"}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </section>
  );
}

const audiences: [string, RouterModelAudience, string][] = [
  ["user", RouterModelAudience.USER, "What users may pick"],
  ["programmatic", RouterModelAudience.PROGRAMMATIC, "What automations may use"],
  ["admin", RouterModelAudience.ADMIN_CATALOG, "Everything (admins)"],
];

// RouterModelsPage is one router's catalog for an audience (in the URL), searchable; admins
// refresh it from the router and toggle each model's policy.
export function RouterModelsPage() {
  const { routerId = "" } = useParams();
  const [params, setParams] = useSearchParams();
  const admin = useIsAdmin();
  const audienceKey = params.get("audience") ?? (admin ? "admin" : "user");
  const audience = audiences.find(([k]) => k === audienceKey)?.[1] ?? RouterModelAudience.USER;
  const search = params.get("q") ?? "";
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    setParams(next);
  };
  const models = useQuery(ModelRouterService.method.listRouterModels, { routerId, audience, search });
  const refresh = useMutation(ModelRouterService.method.refreshRouterModels, { onSuccess: () => void models.refetch() });
  const policy = useMutation(ModelRouterService.method.updateRouterModelPolicy, { onSuccess: () => void models.refetch() });
  return (
    <section>
      <p>
        <Link to="/model-routers">← Model routers</Link>
      </p>
      <h1>
        Models of <code>{routerId}</code>
      </h1>
      <div className="filters">
        <label>
          Audience
          <select value={audienceKey} onChange={(e) => set("audience", e.target.value)}>
            {audiences.map(([k, , label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Search
          <input type="search" defaultValue={search} onKeyDown={(e) => e.key === "Enter" && set("q", e.currentTarget.value)} onBlur={(e) => set("q", e.target.value)} />
        </label>
        {admin && (
          <button type="button" disabled={refresh.isPending} onClick={() => refresh.mutate({ routerId })}>
            Refresh from the router
          </button>
        )}
        {refresh.data && (
          <span role="status">
            {refresh.data.discovered} discovered · {refresh.data.available} available · {refresh.data.markedUnavailable} gone
          </span>
        )}
      </div>
      {refresh.isError && <ErrorView error={refresh.error} />}
      {policy.isError && <ErrorView error={policy.error} />}
      <Loaded query={models} what="models" isEmpty={(d) => d.models.length === 0} empty="No models for this audience.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Models">
              <thead>
                <tr>
                  <th>Model</th>
                  <th>Context</th>
                  <th>Price (prompt / completion)</th>
                  <th>Enabled</th>
                  <th>For users</th>
                </tr>
              </thead>
              <tbody>
                {d.models.map((m) => (
                  <tr key={m.id}>
                    <td>
                      {m.name || m.id} <code className="muted">{m.id}</code>
                      {!m.available && <span className="status status-failed"> unavailable</span>}
                    </td>
                    <td>{String(m.contextLength)}</td>
                    <td>
                      {m.promptPrice ?? "—"} / {m.completionPrice ?? "—"}
                    </td>
                    <td>
                      <input
                        type="checkbox"
                        aria-label={`${m.id} enabled`}
                        checked={m.enabled}
                        disabled={!admin || policy.isPending}
                        onChange={(e) => policy.mutate({ routerId, modelId: m.id, enabled: e.target.checked, userEnabled: m.userEnabled })}
                      />
                    </td>
                    <td>
                      <input
                        type="checkbox"
                        aria-label={`${m.id} for users`}
                        checked={m.userEnabled}
                        disabled={!admin || policy.isPending}
                        onChange={(e) => policy.mutate({ routerId, modelId: m.id, enabled: m.enabled, userEnabled: e.target.checked })}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </section>
  );
}
