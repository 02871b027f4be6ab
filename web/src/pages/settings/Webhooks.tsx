import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { Loaded } from "../../components/Loaded";
import { SecretOnce } from "../../components/SecretOnce";
import { ErrorView } from "../../components/States";
import { WebhookRegistrationService } from "../../gen/svc/app/v1/webhook_registration_pb";
import { When } from "./Settings";

// WebhooksPage lists webhook registrations (where to point GitHub or any sender), creates one
// and rotates its signing secret (each shown once), and deletes.
export function WebhooksPage() {
  const list = useQuery(WebhookRegistrationService.method.listWebhookRegistrations, {});
  const [secret, setSecret] = useState<{ label: string; value: string } | null>(null);
  const refetch = () => void list.refetch();
  const rotate = useMutation(WebhookRegistrationService.method.rotateWebhookSecret, {
    onSuccess: (res) => {
      setSecret({ label: `The new signing secret of ${res.registration?.name}`, value: res.secret });
      refetch();
    },
  });
  const remove = useMutation(WebhookRegistrationService.method.deleteWebhookRegistration, { onSuccess: refetch });
  return (
    <>
      <h2>Webhooks</h2>
      {secret && <SecretOnce label={secret.label} secret={secret.value} onDone={() => setSecret(null)} />}
      <NewWebhook onCreated={(name, value) => (setSecret({ label: `The signing secret of ${name}`, value }), refetch())} />
      {rotate.isError && <ErrorView error={rotate.error} />}
      {remove.isError && <ErrorView error={remove.error} />}
      <Loaded query={list} what="webhooks" isEmpty={(d) => d.registrations.length === 0} empty="No webhooks yet.">
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label="Webhooks">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Provider</th>
                  <th>URL</th>
                  <th>Last delivery</th>
                  <th>Secret set</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.registrations.map((w) => (
                  <tr key={w.id}>
                    <td>{w.name}</td>
                    <td>{w.provider}</td>
                    <td>
                      <code>{location.origin + w.urlPath}</code>
                    </td>
                    <td>
                      <When at={w.lastDeliveryAt} />
                    </td>
                    <td>
                      <When at={w.secretRotatedAt} />
                    </td>
                    <td className="actions">
                      <ConfirmButton label="Rotate secret" disabled={rotate.isPending} onConfirm={() => rotate.mutate({ id: w.id })} />
                      <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ id: w.id })} />
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

function NewWebhook({ onCreated }: { onCreated: (name: string, secret: string) => void }) {
  const [name, setName] = useState("");
  const [provider, setProvider] = useState("github");
  const create = useMutation(WebhookRegistrationService.method.createWebhookRegistration, {
    onSuccess: (res) => {
      onCreated(res.registration?.name ?? name, res.secret);
      setName("");
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, provider });
  };
  return (
    <form className="form" aria-label="New webhook" onSubmit={submit}>
      <h2>New webhook</h2>
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
      </label>
      <label>
        Provider
        <select value={provider} onChange={(e) => setProvider(e.target.value)}>
          <option value="github">GitHub</option>
          <option value="webhook">Any sender (HMAC)</option>
        </select>
      </label>
      <button type="submit" disabled={create.isPending}>
        Create webhook
      </button>
      {create.isError && <ErrorView error={create.error} />}
    </form>
  );
}
