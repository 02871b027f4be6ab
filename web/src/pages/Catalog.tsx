import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useQuery as useWhoami } from "@tanstack/react-query";
import { Link, useParams, useSearchParams } from "react-router-dom";

import { useAuth } from "../auth";
import { ConfirmButton } from "../components/ConfirmButton";
import { ListWithCreate, When } from "../components/ListWithCreate";
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
      <ListWithCreate
        title="Harnesses"
        level={1}
        errors={[remove.error]}
        query={list}
        what="harnesses"
        rows={(d) => d.harnesses}
        rowKey={(h) => h.name}
        empty="No harnesses."
        columns={[
          {
            header: "Harness",
            cell: (h) => (
              <>
                <strong>{h.descriptor?.label || h.name}</strong> <code className="muted">{h.name}</code>
                {h.builtIn && <span className="status"> built-in</span>}
                {h.descriptor?.description && <div className="muted">{h.descriptor.description}</div>}
              </>
            ),
          },
          { header: "Models", cell: (h) => options(h.descriptor?.models ?? []) },
          { header: "Effort", cell: (h) => options(h.descriptor?.effort ?? []) },
          { header: "Modes", cell: (h) => options(h.descriptor?.modes ?? []) },
          {
            header: "",
            cell: (h) =>
              admin && !h.builtIn && <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ name: h.name })} />,
          },
        ]}
      />
    </section>
  );
}

// ModelRoutersPage lists the configured model routers with their sync state.
export function ModelRoutersPage() {
  const list = useQuery(ModelRouterService.method.listModelRouters, {});
  return (
    <section>
      <ListWithCreate
        title="Model routers"
        level={1}
        query={list}
        what="model routers"
        rows={(d) => d.routers}
        rowKey={(r) => r.id}
        empty="No model routers configured (HANGAR_MODEL_ROUTERS)."
        columns={[
          {
            header: "Router",
            cell: (r) => (
              <>
                <Link to={`/model-routers/${r.id}`}>{r.label || r.id}</Link>
                {r.description && <div className="muted">{r.description}</div>}
              </>
            ),
          },
          { header: "Models", cell: (r) => `${r.enabledModelCount} enabled · ${r.availableModelCount} available · ${r.modelCount} known` },
          { header: "Key", cell: (r) => (r.credentialConfigured ? <code>{r.credentialSecret}</code> : <span className="muted">not set</span>) },
          {
            header: "Last sync",
            cell: (r) =>
              r.lastSyncError ? <span className="error-text">{r.lastSyncError}</span> : r.lastSuccessfulSyncAt ? <When at={r.lastSuccessfulSyncAt} /> : "never",
          },
        ]}
      />
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
      <ListWithCreate
        label="Models"
        errors={[refresh.error, policy.error]}
        query={models}
        what="models"
        rows={(d) => d.models}
        rowKey={(m) => m.id}
        empty="No models for this audience."
        columns={[
          {
            header: "Model",
            cell: (m) => (
              <>
                {m.name || m.id} <code className="muted">{m.id}</code>
                {!m.available && <span className="status status-failed"> unavailable</span>}
              </>
            ),
          },
          { header: "Context", cell: (m) => String(m.contextLength) },
          { header: "Max output", cell: (m) => (m.maxCompletionTokens === undefined ? "—" : String(m.maxCompletionTokens)) },
          { header: "Price (prompt / completion)", cell: (m) => `${m.promptPrice ?? "—"} / ${m.completionPrice ?? "—"}` },
          { header: "Cache (read / write)", cell: (m) => `${m.inputCacheReadPrice ?? "—"} / ${m.inputCacheWritePrice ?? "—"}` },
          {
            header: "Enabled",
            cell: (m) => (
              <input
                type="checkbox"
                aria-label={`${m.id} enabled`}
                checked={m.enabled}
                disabled={!admin || policy.isPending}
                onChange={(e) => policy.mutate({ routerId, modelId: m.id, enabled: e.target.checked, userEnabled: m.userEnabled })}
              />
            ),
          },
          {
            header: "For users",
            cell: (m) => (
              <input
                type="checkbox"
                aria-label={`${m.id} for users`}
                checked={m.userEnabled}
                disabled={!admin || policy.isPending}
                onChange={(e) => policy.mutate({ routerId, modelId: m.id, enabled: m.enabled, userEnabled: e.target.checked })}
              />
            ),
          },
        ]}
      />
    </section>
  );
}
