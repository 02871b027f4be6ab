import type { MessageInitShape } from "@bufbuild/protobuf";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { Loaded } from "../../components/Loaded";
import { ErrorView } from "../../components/States";
import { ImageService, type AddRegistryRequestSchema } from "../../gen/svc/app/v1/image_pb";
import { When } from "./Settings";

type AuthKind = "static" | "anonymous" | "workloadIdentity" | "cloudRegistry";

// RegistriesPage lists the registry credentials every image pull signs in with, adds one (a
// password is sealed and never answered back) and deletes.
export function RegistriesPage() {
  const list = useQuery(ImageService.method.listRegistries, {});
  const remove = useMutation(ImageService.method.deleteRegistry, { onSuccess: () => void list.refetch() });
  return (
    <>
      <h2>Registries</h2>
      <AddRegistry onAdded={() => void list.refetch()} />
      {remove.isError && <ErrorView error={remove.error} />}
      <Loaded query={list} what="registries" isEmpty={(d) => d.registries.length === 0} empty="No registry credentials: pulls are anonymous.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Registries">
              <thead>
                <tr>
                  <th>Host</th>
                  <th>Auth</th>
                  <th>As</th>
                  <th>Added</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.registries.map((r) => (
                  <tr key={r.id}>
                    <td>
                      <code>{r.registryHost}</code>
                    </td>
                    <td>{r.authKind}</td>
                    <td>{r.authPrincipal ?? "—"}</td>
                    <td>
                      <When at={r.createdAt} />
                    </td>
                    <td>
                      <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ host: r.registryHost })} />
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

function AddRegistry({ onAdded }: { onAdded: () => void }) {
  const [host, setHost] = useState("");
  const [kind, setKind] = useState<AuthKind>("static");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [principal, setPrincipal] = useState("");
  const add = useMutation(ImageService.method.addRegistry, {
    onSuccess: () => {
      setPassword("");
      onAdded();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const auth: MessageInitShape<typeof AddRegistryRequestSchema>["auth"] =
      kind === "static"
        ? { case: "static", value: { username, password } }
        : kind === "anonymous"
          ? { case: "anonymous", value: {} }
          : kind === "workloadIdentity"
            ? { case: "workloadIdentity", value: { impersonateSa: principal || undefined } }
            : { case: "cloudRegistry", value: { assumeRoleArn: principal || undefined } };
    add.mutate({ host, auth });
  };
  return (
    <form className="form" aria-label="Add registry" onSubmit={submit}>
      <h2>Add a registry</h2>
      <label>
        Host
        <input value={host} onChange={(e) => setHost(e.target.value)} required placeholder="ghcr.io" />
      </label>
      <label>
        Sign in with
        <select value={kind} onChange={(e) => setKind(e.target.value as AuthKind)}>
          <option value="static">Username and password</option>
          <option value="anonymous">Anonymous</option>
          <option value="workloadIdentity">Workload identity (Artifact Registry)</option>
          <option value="cloudRegistry">Cloud role (ECR)</option>
        </select>
      </label>
      {kind === "static" && (
        <>
          <label>
            Username
            <input value={username} onChange={(e) => setUsername(e.target.value)} required autoComplete="off" />
          </label>
          <label>
            Password or token
            <input type="password" value={password} onChange={(e) => setPassword(e.target.value)} required autoComplete="off" />
          </label>
        </>
      )}
      {(kind === "workloadIdentity" || kind === "cloudRegistry") && (
        <label>
          {kind === "workloadIdentity" ? "Impersonate service account (optional)" : "Assume role ARN (optional)"}
          <input value={principal} onChange={(e) => setPrincipal(e.target.value)} />
        </label>
      )}
      <button type="submit" disabled={add.isPending}>
        Add registry
      </button>
      {add.isError && <ErrorView error={add.error} />}
    </form>
  );
}
