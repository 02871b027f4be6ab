import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";
import { Link } from "react-router-dom";

import { ConfirmButton } from "../components/ConfirmButton";
import { CreateForm, ListWithCreate } from "../components/ListWithCreate";
import { HarnessCatalogService } from "../gen/svc/app/v1/harness_pb";
import { ProfileService } from "../gen/svc/app/v1/profile_pb";
import { ReviewService, type RepoEnrollment } from "../gen/svc/app/v1/review_pb";
import { At } from "./Reviews";

// The values UpsertEnrollment accepts (functions/reviews/states.go), each with what it means.
export const triggerModes: [string, string][] = [
  ["automatic", "Automatic: every pull request push"],
  ["on_request", "On request: when asked on the pull request"],
  ["manual", "Manual: only from Hangar"],
];
export const autofixModes: [string, string][] = [
  ["off", "Off"],
  ["suggest", "Suggest: findings carry suggested changes"],
  ["task", "Task: a task pushes a fix commit"],
];
const short = (values: [string, string][], v: string) => values.find(([k]) => k === v)?.[1].split(":")[0] ?? v;

// EnrollmentsPage lists the repositories enrolled in reviews, enrolls one or changes its
// enrollment (admins only: the API answers permission_denied to others), and removes one.
export function EnrollmentsPage() {
  const list = useQuery(ReviewService.method.listEnrollments, {});
  const [editing, setEditing] = useState<RepoEnrollment | undefined>();
  // saved renews the form after each save, so it comes back empty.
  const [saved, setSaved] = useState(0);
  const profiles = useQuery(ProfileService.method.listProfiles, {});
  const profileName = (id: string) => profiles.data?.profiles.find((p) => p.id === id)?.name ?? id;
  const remove = useMutation(ReviewService.method.deleteEnrollment, { onSuccess: () => void list.refetch() });
  return (
    <section>
      <p>
        <Link to="/reviews">← Reviews</Link>
      </p>
      <ListWithCreate
        title="Review enrollments"
        level={1}
        create={
          <EnrollmentForm
            key={`${editing?.repo ?? ""} ${saved}`}
            enrollment={editing}
            onSaved={() => (setEditing(undefined), setSaved((n) => n + 1), void list.refetch())}
            onCancel={editing && (() => setEditing(undefined))}
          />
        }
        errors={[remove.error]}
        query={list}
        what="enrollments"
        rows={(d) => d.enrollments}
        rowKey={(e) => e.repo}
        empty="No repository is enrolled: pull requests are not reviewed."
        columns={[
          { header: "Repository", cell: (e) => <Link to={`/reviews?repo=${encodeURIComponent(e.repo)}`}>{e.repo}</Link> },
          { header: "Trigger", cell: (e) => short(triggerModes, e.triggerMode) },
          { header: "Autofix", cell: (e) => short(autofixModes, e.autofix) },
          { header: "Profile", cell: (e) => (e.profileId ? <Link to={`/profiles/${e.profileId}`}>{profileName(e.profileId)}</Link> : "—") },
          { header: "Engine", cell: (e) => e.engine || <span className="muted">the profile's</span> },
          { header: "Updated", cell: (e) => <At ts={e.updatedAt} /> },
          {
            header: "",
            className: "actions",
            cell: (e) => (
              <>
                <button type="button" onClick={() => setEditing(e)}>
                  Edit
                </button>
                <ConfirmButton label="Remove" disabled={remove.isPending} onConfirm={() => remove.mutate({ repo: e.repo })} />
              </>
            ),
          },
        ]}
      />
    </section>
  );
}

function Choice({ name, value, onChange, values }: { name: string; value: string; onChange: (v: string) => void; values: [string, string][] }) {
  return (
    <label>
      {name}
      <select aria-label={name} value={value} onChange={(e) => onChange(e.target.value)}>
        {values.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
}

// choices are a select's values from a list the API answered, keeping the current value even
// when the list lacks it (a deleted profile, a harness no longer registered).
function choices(first: [string, string], listed: [string, string][] | undefined, current: string): [string, string][] {
  const all: [string, string][] = [first, ...(listed ?? [])];
  if (current && !all.some(([v]) => v === current)) all.push([current, current]);
  return all;
}

// EnrollmentForm enrolls a repository, or (given an enrollment) changes it: UpsertEnrollment
// replaces the repository's enrollment with what the form holds.
function EnrollmentForm({ enrollment: e, onSaved, onCancel }: { enrollment?: RepoEnrollment; onSaved: () => void; onCancel?: () => void }) {
  const [repo, setRepo] = useState(e?.repo ?? "");
  const [triggerMode, setTriggerMode] = useState(e?.triggerMode ?? "automatic");
  const [autofix, setAutofix] = useState(e?.autofix ?? "off");
  const [profileId, setProfileId] = useState(e?.profileId ?? "");
  const [engine, setEngine] = useState(e?.engine ?? "");
  const profiles = useQuery(ProfileService.method.listProfiles, {});
  const harnesses = useQuery(HarnessCatalogService.method.listHarnesses, {});
  const upsert = useMutation(ReviewService.method.upsertEnrollment, { onSuccess: onSaved });
  return (
    <CreateForm
      title={e ? `Change ${e.repo}` : "Enroll a repository"}
      label="Enrollment"
      submitLabel={e ? "Save enrollment" : "Enroll"}
      call={upsert}
      onSubmit={() => upsert.mutate({ repo, triggerMode, autofix, profileId: profileId || undefined, engine })}
      after={
        onCancel && (
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        )
      }
    >
      <label>
        Repository
        <input value={repo} onChange={(x) => setRepo(x.target.value)} required placeholder="owner/name" readOnly={!!e} />
      </label>
      <Choice name="Trigger" value={triggerMode} onChange={setTriggerMode} values={triggerModes} />
      <Choice name="Autofix" value={autofix} onChange={setAutofix} values={autofixModes} />
      <Choice
        name="Profile"
        value={profileId}
        onChange={setProfileId}
        values={choices(["", "Choose a profile…"], profiles.data?.profiles.map((p) => [p.id, p.name]), profileId)}
      />
      <Choice
        name="Engine"
        value={engine}
        onChange={setEngine}
        values={choices(["", "The profile's harness"], harnesses.data?.harnesses.map((h) => [h.name, h.descriptor?.label || h.name]), engine)}
      />
    </CreateForm>
  );
}
