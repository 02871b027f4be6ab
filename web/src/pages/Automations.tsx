import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";
import { Link, useNavigate } from "react-router-dom";

import { BlockErrors, blockErrorsOf } from "../components/BlockErrors";
import { ListWithCreate } from "../components/ListWithCreate";
import { ErrorView } from "../components/States";
import { AutomationService } from "../gen/svc/app/v1/automation_pb";

// starter is a definition that validates as it is: one manual entrypoint and one code block.
export const starter = `{
  "version": 1,
  "entrypoints": [{ "id": "manual", "type": "manual" }],
  "blocks": [
    { "id": "hello", "type": "code", "source": "return { greeting: 'hello from an automation' };" }
  ]
}`;

// AutomationsPage lists automations with what starts them and how their last run went, and
// creates new ones.
export function AutomationsPage() {
  const [archived, setArchived] = useState(false);
  const list = useQuery(AutomationService.method.listAutomations, { includeArchived: archived });
  return (
    <section>
      <ListWithCreate
        title="Automations"
        level={1}
        above={
          <div className="filters">
            <label className="chip">
              <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.target.checked)} /> Show archived
            </label>
            <Link to="/event-catalog">Event catalog</Link>
          </div>
        }
        query={list}
        what="automations"
        rows={(d) => d.automations}
        rowKey={(x) => x.automation!.id}
        empty="No automations yet. Create one below."
        columns={[
          { header: "Name", cell: ({ automation: a }) => <Link to={`/automations/${a!.id}`}>{a!.name}</Link> },
          { header: "Starts on", cell: (x) => x.triggerSummary },
          { header: "State", cell: ({ automation: a }) => (a!.archived ? "archived" : a!.enabled ? "enabled" : "disabled") },
          { header: "Last run", cell: ({ lastRun }) => (lastRun ? <span className={`status status-${lastRun.status}`}>{lastRun.status}</span> : "—") },
        ]}
      />
      <NewAutomation />
    </section>
  );
}

function NewAutomation() {
  const navigate = useNavigate();
  const [name, setName] = useState("");
  const [definition, setDefinition] = useState(starter);
  const create = useMutation(AutomationService.method.createAutomation, {
    onSuccess: (res) => navigate(`/automations/${res.automation!.id}`),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, definitionJson: definition });
  };
  const problems = blockErrorsOf(create.error);
  return (
    <form className="editor" onSubmit={submit} aria-label="New automation">
      <h2>New automation</h2>
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={120} />
      </label>
      <label>
        Definition (JSON)
        <textarea className="code" rows={12} value={definition} onChange={(e) => setDefinition(e.target.value)} spellCheck={false} />
      </label>
      <BlockErrors errors={problems} />
      {create.isError && problems.length === 0 && <ErrorView error={create.error} />}
      <button type="submit" disabled={create.isPending}>
        Create
      </button>
    </form>
  );
}
