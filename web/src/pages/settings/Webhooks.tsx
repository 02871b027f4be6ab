import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";

import { ConfirmButton } from "../../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../../components/ListWithCreate";
import { SecretOnce } from "../../components/SecretOnce";
import { WebhookRegistrationService } from "../../gen/svc/app/v1/webhook_registration_pb";

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
    <ListWithCreate
      title="Webhooks"
      above={secret && <SecretOnce label={secret.label} secret={secret.value} onDone={() => setSecret(null)} />}
      create={<NewWebhook onCreated={(name, value) => (setSecret({ label: `The signing secret of ${name}`, value }), refetch())} />}
      errors={[rotate.error, remove.error]}
      query={list}
      what="webhooks"
      rows={(d) => d.registrations}
      rowKey={(w) => w.id}
      empty="No webhooks yet."
      columns={[
        { header: "Name", cell: (w) => w.name },
        { header: "Provider", cell: (w) => w.provider },
        { header: "URL", cell: (w) => <code>{location.origin + w.urlPath}</code> },
        { header: "Last delivery", cell: (w) => <When at={w.lastDeliveryAt} /> },
        { header: "Secret set", cell: (w) => <When at={w.secretRotatedAt} /> },
        {
          header: "",
          className: "actions",
          cell: (w) => (
            <>
              <ConfirmButton label="Rotate secret" disabled={rotate.isPending} onConfirm={() => rotate.mutate({ id: w.id })} />
              <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ id: w.id })} />
            </>
          ),
        },
      ]}
    />
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
  return (
    <CreateForm title="New webhook" submitLabel="Create webhook" call={create} onSubmit={() => create.mutate({ name, provider })}>
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
    </CreateForm>
  );
}
