import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useCallback, useEffect, useState } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../../components/ListWithCreate";
import { ErrorView } from "../../components/States";
import { OAuthCredentialService, OauthSubjectKind } from "../../gen/svc/app/v1/oauth_pb";

// me is the caller's own subject: a USER subject with an empty id.
const me = { kind: OauthSubjectKind.USER, id: "" };
const builtIn = ["anthropic", "openai", "github", "gitlab"];

// OAuthPage lists the caller's OAuth connections, disconnects one, and connects a provider by a
// device code (shown with the flow's state until it ends) or in the browser (a redirect flow
// that ends at /api/auth/oauth/callback).
export function OAuthPage() {
  const list = useQuery(OAuthCredentialService.method.listCredentials, { subject: me });
  const { refetch } = list;
  const refresh = useCallback(() => void refetch(), [refetch]);
  const disconnect = useMutation(OAuthCredentialService.method.disconnect, { onSuccess: refresh });
  return (
    <ListWithCreate
      title="OAuth connections"
      create={<Connect onDone={refresh} />}
      errors={[disconnect.error]}
      query={list}
      what="connections"
      rows={(d) => d.credentials}
      rowKey={(c) => c.provider}
      empty="No connections yet."
      columns={[
        { header: "Provider", cell: (c) => c.provider },
        { header: "Status", cell: (c) => <span className={`status status-${c.connected ? "completed" : "cancelled"}`}>{c.status}</span> },
        { header: "Account", cell: (c) => c.account?.displayName || c.account?.workspaceName || "—" },
        { header: "Expires", cell: (c) => <When at={c.expiresAt} /> },
        { header: "Updated", cell: (c) => <When at={c.updatedAt} /> },
        {
          header: "",
          cell: (c) =>
            c.connected && (
              <ConfirmButton
                label="Disconnect"
                disabled={disconnect.isPending}
                onConfirm={() => disconnect.mutate({ subject: me, provider: c.provider, expectedVersion: c.version })}
              />
            ),
        },
      ]}
    />
  );
}

function Connect({ onDone }: { onDone: () => void }) {
  const [provider, setProvider] = useState("github");
  const device = useMutation(OAuthCredentialService.method.beginFlow);
  const redirect = useMutation(OAuthCredentialService.method.beginRedirectFlow);
  const flowId = redirect.data?.flow?.id ?? device.data?.flow?.id ?? "";
  const byCode = () => {
    redirect.reset();
    device.mutate({ subject: me, provider });
  };
  const inBrowser = () => {
    device.reset();
    redirect.mutate({ subject: me, provider, redirectUri: `${location.origin}/api/auth/oauth/callback` });
  };
  const after = (
    <>
      <button type="button" disabled={redirect.isPending} onClick={inBrowser}>
        Connect in the browser
      </button>
      {redirect.isError && <ErrorView error={redirect.error} />}
      {device.data && (
        <p>
          Open <a href={device.data.verificationUrl} target="_blank" rel="noreferrer noopener">{device.data.verificationUrl}</a> and enter{" "}
          <code className="user-code">{device.data.userCode}</code>
        </p>
      )}
      {redirect.data && (
        <p>
          <a href={redirect.data.authorizeUrl} target="_blank" rel="noreferrer noopener">
            Continue at {provider}
          </a>{" "}
          (the page comes back to Hangar when you approve).
        </p>
      )}
      {flowId && <FlowState key={flowId} flowId={flowId} onEnded={onDone} />}
    </>
  );
  return (
    <CreateForm title="Connect a provider" submitLabel="Connect with a code" call={device} onSubmit={byCode} after={after}>
      <label>
        Provider
        <input list="oauth-providers" value={provider} onChange={(e) => setProvider(e.target.value)} required />
        <datalist id="oauth-providers">
          {builtIn.map((p) => (
            <option key={p} value={p} />
          ))}
        </datalist>
      </label>
    </CreateForm>
  );
}

// FlowState follows a flow until it leaves pending (GetFlow also polls a due device flow).
function FlowState({ flowId, onEnded }: { flowId: string; onEnded: () => void }) {
  const flow = useQuery(
    OAuthCredentialService.method.getFlow,
    { subject: me, flowId },
    { refetchInterval: (q) => (q.state.data?.flow?.status === "pending" || !q.state.data ? 3000 : false) },
  );
  const cancel = useMutation(OAuthCredentialService.method.cancelFlow, { onSuccess: () => void flow.refetch() });
  const f = flow.data?.flow;
  const ended = !!f && f.status !== "pending";
  useEffect(() => {
    if (ended) onEnded();
  }, [ended, onEnded]);
  if (flow.isError) return <ErrorView error={flow.error} />;
  if (!f) return null;
  return (
    <p role="status" aria-label="Flow">
      <span className={`status status-${f.status === "completed" ? "completed" : f.status === "pending" ? "running" : "failed"}`}>{f.status}</span>
      {f.errorCode && <code> {f.errorCode}</code>}
      {f.status === "pending" && (
        <>
          {" "}
          until <When at={f.expiresAt} />{" "}
          <button type="button" onClick={() => cancel.mutate({ subject: me, flowId })}>
            Cancel
          </button>
        </>
      )}
    </p>
  );
}
