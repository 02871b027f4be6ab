import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { Loaded } from "../../components/Loaded";
import { ErrorView } from "../../components/States";
import { OrgSecretService, OrgSecretVisibility, type OrgSecret, type OrgSecretAccess } from "../../gen/svc/app/v1/org_secret_pb";
import { When } from "./Settings";

const visibilities: [OrgSecretVisibility, string][] = [
  [OrgSecretVisibility.ADMINS_ONLY, "Admins only"],
  [OrgSecretVisibility.ALL_USERS, "All users"],
  [OrgSecretVisibility.SELECTED, "Selected users, keys and profiles"],
];

const visibilityName = (v?: OrgSecretVisibility) =>
  visibilities.find(([x]) => x === v)?.[1] ?? "Admins only";

// SecretsPage lists the organisation's secrets (names and policies: the API never answers a
// value), puts a new value, deletes, and edits who may use each.
export function SecretsPage() {
  const list = useQuery(OrgSecretService.method.listOrgSecrets, {});
  const [editing, setEditing] = useState<string | null>(null);
  const remove = useMutation(OrgSecretService.method.deleteOrgSecret, { onSuccess: () => void list.refetch() });
  return (
    <>
      <h2>Org secrets</h2>
      <PutSecret onSaved={() => void list.refetch()} />
      {remove.isError && <ErrorView error={remove.error} />}
      <Loaded query={list} what="secrets" isEmpty={(d) => d.secrets.length === 0} empty="No org secrets.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Org secrets">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Description</th>
                  <th>Version</th>
                  <th>Who may use it</th>
                  <th>Updated</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.secrets.map((s) => (
                  <tr key={s.name}>
                    <td>
                      <code>{s.name}</code>
                    </td>
                    <td>{s.description}</td>
                    <td>{String(s.version)}</td>
                    <td>
                      {editing === s.name ? (
                        <AccessEditor secret={s} onDone={() => (setEditing(null), void list.refetch())} />
                      ) : (
                        <>
                          {visibilityName(s.access?.visibility)}{" "}
                          <button type="button" onClick={() => setEditing(s.name)}>
                            Edit access
                          </button>
                        </>
                      )}
                    </td>
                    <td>
                      <When at={s.updatedAt} />
                    </td>
                    <td>
                      <ConfirmButton
                        label="Delete"
                        disabled={remove.isPending}
                        onConfirm={() => remove.mutate({ name: s.name, expectedVersion: s.version })}
                      />
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

// PutSecret creates a secret or gives it a new value; the value field is cleared once sent.
function PutSecret({ onSaved }: { onSaved: () => void }) {
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [description, setDescription] = useState("");
  const put = useMutation(OrgSecretService.method.putOrgSecret, {
    onSuccess: () => {
      setValue("");
      onSaved();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    put.mutate({ name, value, description: description || undefined });
  };
  return (
    <form className="form" aria-label="Put secret" onSubmit={submit}>
      <h2>Set a secret</h2>
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={128} pattern="[A-Za-z0-9_./\-]+" />
      </label>
      <label>
        Value
        <input type="password" autoComplete="off" value={value} onChange={(e) => setValue(e.target.value)} required />
      </label>
      <label>
        Description
        <input value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <button type="submit" disabled={put.isPending}>
        Save secret
      </button>
      {put.data && (
        <span role="status">
          {put.data.created ? "Created" : "Updated"} <code>{put.data.secret?.name}</code> (version {String(put.data.secret?.version)})
        </span>
      )}
      {put.isError && <ErrorView error={put.error} />}
    </form>
  );
}

const ids = (s: string) =>
  s
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

function AccessEditor({ secret, onDone }: { secret: OrgSecret; onDone: () => void }) {
  const a: Partial<OrgSecretAccess> = secret.access ?? {};
  const [visibility, setVisibility] = useState(a.visibility || OrgSecretVisibility.ADMINS_ONLY);
  const [users, setUsers] = useState((a.userIds ?? []).join(", "));
  const [keys, setKeys] = useState((a.serviceKeyIds ?? []).join(", "));
  const [profiles, setProfiles] = useState((a.profileIds ?? []).join(", "));
  const set = useMutation(OrgSecretService.method.setOrgSecretAccess, { onSuccess: onDone });
  const selected = visibility === OrgSecretVisibility.SELECTED;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    set.mutate({
      name: secret.name,
      access: selected
        ? { visibility, userIds: ids(users), serviceKeyIds: ids(keys), profileIds: ids(profiles) }
        : { visibility },
    });
  };
  return (
    <form aria-label={`Access to ${secret.name}`} className="editor" onSubmit={submit}>
      <label>
        Visibility
        <select value={visibility} onChange={(e) => setVisibility(Number(e.target.value))}>
          {visibilities.map(([v, label]) => (
            <option key={v} value={v}>
              {label}
            </option>
          ))}
        </select>
      </label>
      {selected && (
        <>
          <label>
            User ids
            <input value={users} onChange={(e) => setUsers(e.target.value)} />
          </label>
          <label>
            Service key ids
            <input value={keys} onChange={(e) => setKeys(e.target.value)} />
          </label>
          <label>
            Profile ids
            <input value={profiles} onChange={(e) => setProfiles(e.target.value)} />
          </label>
        </>
      )}
      <div className="actions">
        <button type="submit" disabled={set.isPending}>
          Save access
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {set.isError && <ErrorView error={set.error} />}
    </form>
  );
}
