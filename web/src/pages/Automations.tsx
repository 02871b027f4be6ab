import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";
import { Link, useNavigate } from "react-router-dom";

import { BlockErrors, blockErrorsOf } from "../components/BlockErrors";
import { Empty, ErrorView, Loading } from "../components/States";
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
      <h1>Automations</h1>
      <label className="chip">
        <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.target.checked)} /> Show archived
      </label>
      {list.isPending ? (
        <Loading what="automations" />
      ) : list.isError ? (
        <ErrorView error={list.error} />
      ) : list.data.automations.length === 0 ? (
        <Empty>No automations yet. Create one below.</Empty>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th>Starts on</th>
              <th>State</th>
              <th>Last run</th>
            </tr>
          </thead>
          <tbody>
            {list.data.automations.map(({ automation: a, triggerSummary, lastRun }) => (
              <tr key={a!.id}>
                <td>
                  <Link to={`/automations/${a!.id}`}>{a!.name}</Link>
                </td>
                <td>{triggerSummary}</td>
                <td>{a!.archived ? "archived" : a!.enabled ? "enabled" : "disabled"}</td>
                <td>{lastRun ? <span className={`status status-${lastRun.status}`}>{lastRun.status}</span> : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
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
