import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState, type FormEvent } from "react";
import { Link, useNavigate } from "react-router-dom";

import { ProfileService } from "../gen/svc/app/v1/profile_pb";
import { TaskService } from "../gen/svc/app/v1/task_pb";
import { Empty, ErrorView, Loading } from "../components/States";
import { Pager, useUrlFilters } from "../components/UrlFilters";

export const taskStates = ["pending", "running", "waiting", "completed", "failed", "cancelled"];
export const pageSize = 25;

// TasksPage lists tasks with search, state and owner filters and paging; every filter lives in
// the URL, so a filtered page is a link.
export function TasksPage() {
  const { params, search, page, draft, setDraft, update, submitSearch } = useUrlFilters();
  const states = params.getAll("state");
  const scope = params.get("scope") === "all" ? "all" : "mine";
  const tasks = useQuery(TaskService.method.listTasks, { search, states, scope, page, pageSize });
  const total = tasks.data?.totalCount ?? 0;

  return (
    <section>
      <h1>Tasks</h1>
      <form
        className="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          submitSearch();
        }}
      >
        <label>
          Search
          <input type="search" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="title or name" />
        </label>
        <fieldset>
          <legend>States</legend>
          {taskStates.map((s) => (
            <label key={s} className="chip">
              <input
                type="checkbox"
                checked={states.includes(s)}
                onChange={(e) =>
                  update((p) => {
                    const rest = states.filter((x) => x !== s);
                    p.delete("state");
                    for (const x of e.target.checked ? [...rest, s] : rest) p.append("state", x);
                  })
                }
              />
              {s}
            </label>
          ))}
        </fieldset>
        <label>
          Owner
          <select value={scope} onChange={(e) => update((p) => p.set("scope", e.target.value))}>
            <option value="mine">Mine</option>
            <option value="all">Everyone's (admins)</option>
          </select>
        </label>
        <button type="submit">Search</button>
      </form>

      {tasks.isPending ? (
        <Loading what="tasks" />
      ) : tasks.isError ? (
        <ErrorView error={tasks.error} />
      ) : tasks.data.tasks.length === 0 ? (
        <Empty>No tasks match. Create one below, with `hangar tasks create` or from an automation.</Empty>
      ) : (
        <>
          <table className="list">
            <thead>
              <tr>
                <th>Task</th>
                <th>Status</th>
                <th>Type</th>
                <th>Created by</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {tasks.data.tasks.map((t) => (
                <tr key={t.id}>
                  <td>
                    <Link to={`/tasks/${t.id}`}>{t.title || t.localTaskName || t.id}</Link>
                  </td>
                  <td>
                    <span className={`status status-${t.status}`}>{t.status}</span>
                  </td>
                  <td>{t.type}</td>
                  <td>{t.createdBy?.name || t.createdBy?.email || t.createdByUserId}</td>
                  <td>
                    <time dateTime={t.createdAt}>{new Date(t.createdAt).toLocaleString()}</time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager page={page} pageSize={pageSize} total={total} noun="tasks" update={update} />
        </>
      )}
      {tasks.isSuccess && <NewTask />}
    </section>
  );
}

// NewTask starts an agent task from a profile with a first prompt, and opens it.
function NewTask() {
  const navigate = useNavigate();
  const profiles = useQuery(ProfileService.method.listProfiles, {});
  const [profileId, setProfileId] = useState("");
  const [title, setTitle] = useState("");
  const [prompt, setPrompt] = useState("");
  const create = useMutation(TaskService.method.createTask, { onSuccess: (res) => navigate(`/tasks/${res.task!.id}`) });
  const chosen = profileId || profiles.data?.profiles[0]?.id || "";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ type: "agent", profileId: chosen, title: title || undefined, prompt });
  };
  return (
    <form className="form" aria-label="New task" onSubmit={submit}>
      <h2>New task</h2>
      <label>
        Profile
        <select value={chosen} onChange={(e) => setProfileId(e.target.value)} required>
          {profiles.data?.profiles.length === 0 && <option value="">No profiles: create one first</option>}
          {profiles.data?.profiles.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Title
        <input value={title} onChange={(e) => setTitle(e.target.value)} />
      </label>
      <label>
        Prompt
        <textarea value={prompt} onChange={(e) => setPrompt(e.target.value)} required rows={2} />
      </label>
      <button type="submit" disabled={create.isPending || !chosen}>
        Start task
      </button>
      {profiles.isError && <ErrorView error={profiles.error} />}
      {create.isError && <ErrorView error={create.error} />}
    </form>
  );
}
