import type { MessageInitShape } from "@bufbuild/protobuf";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../../components/ListWithCreate";
import { ImageService, type AddRegistryRequestSchema } from "../../gen/svc/app/v1/image_pb";

type AuthKind = "static" | "anonymous" | "workloadIdentity" | "cloudRegistry";

// RegistriesPage lists the registry credentials every image pull signs in with, adds one (a
// password is sealed and never answered back) and deletes.
export function RegistriesPage() {
  const list = useQuery(ImageService.method.listRegistries, {});
  const remove = useMutation(ImageService.method.deleteRegistry, { onSuccess: () => void list.refetch() });
  return (
    <ListWithCreate
      title="Registries"
      create={<AddRegistry onAdded={() => void list.refetch()} />}
      errors={[remove.error]}
      query={list}
      what="registries"
      rows={(d) => d.registries}
      rowKey={(r) => r.id}
      empty="No registry credentials: pulls are anonymous."
      columns={[
        { header: "Host", cell: (r) => <code>{r.registryHost}</code> },
        { header: "Auth", cell: (r) => r.authKind },
        { header: "As", cell: (r) => r.authPrincipal ?? "—" },
        { header: "Added", cell: (r) => <When at={r.createdAt} /> },
        {
          header: "",
          cell: (r) => <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ host: r.registryHost })} />,
        },
      ]}
    />
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
  const submit = () => {
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
    <CreateForm title="Add a registry" label="Add registry" submitLabel="Add registry" call={add} onSubmit={submit}>
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
    </CreateForm>
  );
}
