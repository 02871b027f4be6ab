import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../../components/ListWithCreate";
import { SecretOnce } from "../../components/SecretOnce";
import { ApiKeyService } from "../../gen/svc/app/v1/api_key_pb";

// ApiKeysPage lists the keys the caller may see (an admin: everyone's), creates one (its secret
// shown once) and revokes.
export function ApiKeysPage() {
  const [revoked, setRevoked] = useState(false);
  const [secret, setSecret] = useState("");
  const keys = useQuery(ApiKeyService.method.listApiKeys, { includeRevoked: revoked });
  const revoke = useMutation(ApiKeyService.method.revokeApiKey, { onSuccess: () => void keys.refetch() });
  return (
    <ListWithCreate
      title="API keys"
      above={secret && <SecretOnce label="The new API key" secret={secret} onDone={() => setSecret("")} />}
      create={
        <>
          <NewKey onCreated={(s) => (setSecret(s), void keys.refetch())} />
          <label className="chip">
            <input type="checkbox" checked={revoked} onChange={(e) => setRevoked(e.target.checked)} /> Show revoked
          </label>
        </>
      }
      errors={[revoke.error]}
      query={keys}
      what="API keys"
      rows={(d) => d.apiKeys}
      rowKey={(k) => k.id}
      empty="No API keys."
      columns={[
        {
          header: "Name",
          cell: (k) => (
            <>
              {k.name}
              {k.admin && <span className="status"> admin</span>}
            </>
          ),
        },
        { header: "Key", cell: (k) => <code>{k.prefix}…</code> },
        { header: "Kind", cell: (k) => k.kind },
        { header: "User", cell: (k) => k.user?.email || k.user?.name || k.userId },
        { header: "Last used", cell: (k) => <When at={k.lastUsedAt} /> },
        { header: "Created", cell: (k) => <When at={k.createdAt} /> },
        {
          header: "",
          cell: (k) =>
            k.revokedAt ? (
              <span className="status status-cancelled">revoked</span>
            ) : (
              <ConfirmButton label="Revoke" disabled={revoke.isPending} onConfirm={() => revoke.mutate({ id: k.id })} />
            ),
        },
      ]}
    />
  );
}

function NewKey({ onCreated }: { onCreated: (secret: string) => void }) {
  const [name, setName] = useState("");
  const [kind, setKind] = useState("personal");
  const [email, setEmail] = useState("");
  const [admin, setAdmin] = useState(false);
  const create = useMutation(ApiKeyService.method.createApiKey, {
    onSuccess: (res) => {
      setName("");
      onCreated(res.secret);
    },
  });
  const submit = () => create.mutate({ name, kind, userEmail: kind === "personal" ? email : "", admin });
  return (
    <CreateForm title="New API key" submitLabel="Create key" call={create} onSubmit={submit}>
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
    </CreateForm>
  );
}
