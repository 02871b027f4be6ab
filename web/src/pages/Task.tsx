import { useQuery } from "@connectrpc/connect-query";
import { Link, useParams } from "react-router-dom";

import { TaskService, type Task } from "../gen/svc/app/v1/task_pb";
import { ErrorView, Loading } from "../components/States";

// TaskPage is one task: what it is, who made it, and its session tree (sessions and the
// sub-tasks its sessions spawned).
export function TaskPage() {
  const { taskId = "" } = useParams();
  const task = useQuery(TaskService.method.getTask, { taskId });
  if (task.isPending) return <Loading what="the task" />;
  if (task.isError) return <ErrorView error={task.error} />;
  const t = task.data.task!;
  return (
    <section>
      <p>
        <Link to="/tasks">← Tasks</Link>
      </p>
      <h1>{t.title || t.localTaskName || t.id}</h1>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <span className={`status status-${t.status}`}>{t.status}</span>
        </dd>
        <dt>Type</dt>
        <dd>{t.type}</dd>
        <dt>Created by</dt>
        <dd>{t.createdBy?.name || t.createdBy?.email || t.createdByUserId}</dd>
        <dt>Created</dt>
        <dd>
          <time dateTime={t.createdAt}>{new Date(t.createdAt).toLocaleString()}</time>
        </dd>
        {t.harness && (
          <>
            <dt>Harness</dt>
            <dd>
              {t.harness}
              {t.model && ` · ${t.model}`}
            </dd>
          </>
        )}
      </dl>
      <h2>Sessions</h2>
      <SessionTree task={t} />
    </section>
  );
}

function SessionTree({ task }: { task: Task }) {
  if (task.sessions.length === 0 && task.descendants.length === 0) return <p className="empty">No sessions yet.</p>;
  return (
    <ul className="tree">
      {task.sessions.map((s) => (
        <li key={s.sessionId}>
          <Link to={`/sessions/${s.sessionId}`}>
            <code>{s.sessionId}</code>
          </Link>{" "}
          {s.role && <em>{s.role}</em>}{" "}
          {s.session && <span className={`status status-${s.session.status}`}>{s.session.status}</span>}
          {s.profile && <span className="muted"> · {s.profile.name}</span>}
        </li>
      ))}
      {task.descendants.map((d) => (
        <li key={d.id}>
          <Link to={`/tasks/${d.id}`}>{d.title || d.localTaskName || d.id}</Link>{" "}
          <span className={`status status-${d.status}`}>{d.status}</span>
          <SessionTree task={d} />
        </li>
      ))}
    </ul>
  );
}
