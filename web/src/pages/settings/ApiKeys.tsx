import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { Loaded } from "../../components/Loaded";
import { SecretOnce } from "../../components/SecretOnce";
import { ErrorView } from "../../components/States";
import { ApiKeyService } from "../../gen/svc/app/v1/api_key_pb";
import { When } from "./Settings";

// ApiKeysPage lists the keys the caller may see (an admin: everyone's), creates one (its secret
// shown once) and revokes.
export function ApiKeysPage() {
  const [revoked, setRevoked] = useState(false);
  const keys = useQuery(ApiKeyService.method.listApiKeys, { includeRevoked: revoked });
  const revoke = useMutation(ApiKeyService.method.revokeApiKey, { onSuccess: () => void keys.refetch() });
  return (
    <>
      <h2>API keys</h2>
      <NewKey onCreated={() => void keys.refetch()} />
      <label className="chip">
        <input type="checkbox" checked={revoked} onChange={(e) => setRevoked(e.target.checked)} /> Show revoked
      </label>
      {revoke.isError && <ErrorView error={revoke.error} />}
      <Loaded query={keys} what="API keys" isEmpty={(d) => d.apiKeys.length === 0} empty="No API keys.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="API keys">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Key</th>
                  <th>Kind</th>
                  <th>User</th>
                  <th>Last used</th>
                  <th>Created</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.apiKeys.map((k) => (
                  <tr key={k.id}>
                    <td>
                      {k.name}
                      {k.admin && <span className="status"> admin</span>}
                    </td>
                    <td>
                      <code>{k.prefix}…</code>
                    </td>
                    <td>{k.kind}</td>
                    <td>{k.user?.email || k.user?.name || k.userId}</td>
                    <td>
                      <When at={k.lastUsedAt} />
                    </td>
                    <td>
                      <When at={k.createdAt} />
                    </td>
                    <td>
                      {k.revokedAt ? (
                        <span className="status status-cancelled">revoked</span>
                      ) : (
                        <ConfirmButton label="Revoke" disabled={revoke.isPending} onConfirm={() => revoke.mutate({ id: k.id })} />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </>
  );
}

function NewKey({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState("");
  const [kind, setKind] = useState("personal");
  const [email, setEmail] = useState("");
  const [admin, setAdmin] = useState(false);
  const [secret, setSecret] = useState("");
  const create = useMutation(ApiKeyService.method.createApiKey, {
    onSuccess: (res) => {
      setSecret(res.secret);
      setName("");
      onCreated();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, kind, userEmail: kind === "personal" ? email : "", admin });
  };
  return (
    <>
      {secret && <SecretOnce label="The new API key" secret={secret} onDone={() => setSecret("")} />}
      <form className="form" aria-label="New API key" onSubmit={submit}>
        <h2>New API key</h2>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
        </label>
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.target.value)}>
            <option value="personal">Personal</option>
            <option value="service_account">Service account</option>
          </select>
        </label>
        {kind === "personal" && (
          <label>
            For (email; empty: you)
            <input type="email" value={email} onChange={(e) => setEmail(e.target.value)} />
          </label>
        )}
        <label className="chip">
          <input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} /> Admin
        </label>
        <button type="submit" disabled={create.isPending}>
          Create key
        </button>
        {create.isError && <ErrorView error={create.error} />}
      </form>
    </>
  );
}
