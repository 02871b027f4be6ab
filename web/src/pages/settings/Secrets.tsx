import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../../components/ListWithCreate";
import { ErrorView } from "../../components/States";
import { OrgSecretService, OrgSecretVisibility, type OrgSecret, type OrgSecretAccess } from "../../gen/svc/app/v1/org_secret_pb";

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
    <ListWithCreate
      title="Org secrets"
      create={<PutSecret onSaved={() => void list.refetch()} />}
      errors={[remove.error]}
      query={list}
      what="secrets"
      rows={(d) => d.secrets}
      rowKey={(s) => s.name}
      empty="No org secrets."
      columns={[
        { header: "Name", cell: (s) => <code>{s.name}</code> },
        { header: "Description", cell: (s) => s.description },
        { header: "Version", cell: (s) => String(s.version) },
        {
          header: "Who may use it",
          cell: (s) =>
            editing === s.name ? (
              <AccessEditor secret={s} onDone={() => (setEditing(null), void list.refetch())} />
            ) : (
              <>
                {visibilityName(s.access?.visibility)}{" "}
                <button type="button" onClick={() => setEditing(s.name)}>
                  Edit access
                </button>
              </>
            ),
        },
        { header: "Updated", cell: (s) => <When at={s.updatedAt} /> },
        {
          header: "",
          cell: (s) => (
            <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ name: s.name, expectedVersion: s.version })} />
          ),
        },
      ]}
    />
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
  const saved = put.data && (
    <span role="status">
      {put.data.created ? "Created" : "Updated"} <code>{put.data.secret?.name}</code> (version {String(put.data.secret?.version)})
    </span>
  );
  return (
    <CreateForm
      title="Set a secret"
      label="Put secret"
      submitLabel="Save secret"
      call={put}
      onSubmit={() => put.mutate({ name, value, description: description || undefined })}
      after={saved}
    >
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
    </CreateForm>
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
