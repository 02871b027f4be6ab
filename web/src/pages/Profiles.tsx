import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";

import { ConfirmButton } from "../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../components/ListWithCreate";
import { ErrorView, Loading } from "../components/States";
import { ImageService } from "../gen/svc/app/v1/image_pb";
import { ProfileService, type Profile } from "../gen/svc/app/v1/profile_pb";

// ProfilesPage lists profiles (what a task's sessions start from) and creates one.
export function ProfilesPage() {
  const [archived, setArchived] = useState(false);
  const list = useQuery(ProfileService.method.listProfiles, { includeArchived: archived });
  const navigate = useNavigate();
  return (
    <section>
      <ListWithCreate
        title="Profiles"
        level={1}
        above={
          <label className="chip">
            <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.target.checked)} /> Show archived
          </label>
        }
        query={list}
        what="profiles"
        rows={(d) => d.profiles}
        rowKey={(p) => p.id}
        empty="No profiles yet. Create one below."
        columns={[
          {
            header: "Name",
            cell: (p) => (
              <>
                <Link to={`/profiles/${p.id}`}>{p.name}</Link>
                {p.archived && <span className="muted"> (archived)</span>}
              </>
            ),
          },
          { header: "Image", cell: (p) => <code>{p.imageId}</code> },
          { header: "Harness", cell: (p) => [p.harness, p.model].filter(Boolean).join(" · ") || "—" },
          { header: "Updated", cell: (p) => <When at={p.updatedAt} /> },
        ]}
      />
      <ProfileForm title="New profile" submitLabel="Create profile" onSaved={(p) => navigate(`/profiles/${p.id}`)} />
    </section>
  );
}

// ProfilePage is one profile: edited in place, deleted after a confirmation.
export function ProfilePage() {
  const { profileId = "" } = useParams();
  const navigate = useNavigate();
  const got = useQuery(ProfileService.method.getProfile, { id: profileId });
  const remove = useMutation(ProfileService.method.deleteProfile, { onSuccess: () => navigate("/profiles") });
  if (got.isPending) return <Loading what="the profile" />;
  if (got.isError) return <ErrorView error={got.error} />;
  const p = got.data.profile!;
  return (
    <section>
      <p>
        <Link to="/profiles">← Profiles</Link>
      </p>
      <h1>{p.name}</h1>
      <p className="muted">
        <code>{p.id}</code>
      </p>
      <div className="actions">
        <ConfirmButton label="Delete" disabled={remove.isPending} onConfirm={() => remove.mutate({ id: p.id })} />
      </div>
      {remove.isError && <ErrorView error={remove.error} />}
      <ProfileForm key={p.updatedAt} profile={p} title="Edit" submitLabel="Save profile" onSaved={() => void got.refetch()} />
    </section>
  );
}

const envText = (env: Record<string, string>) =>
  Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n");

function envOf(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const at = line.indexOf("=");
    if (line.trim() && at > 0) env[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return env;
}

// ProfileForm creates a profile, or (given one) replaces the fields it shows and keeps the
// others as they are (UpdateProfile replaces the whole profile).
function ProfileForm({ profile, title, submitLabel, onSaved }: { profile?: Profile; title: string; submitLabel: string; onSaved: (p: Profile) => void }) {
  const images = useQuery(ImageService.method.listEnabledImages, {});
  const [name, setName] = useState(profile?.name ?? "");
  const [description, setDescription] = useState(profile?.description ?? "");
  const [imageId, setImageId] = useState(profile?.imageId ?? "");
  const [harness, setHarness] = useState(profile?.harness ?? "");
  const [model, setModel] = useState(profile?.model ?? "");
  const [env, setEnv] = useState(envText(profile?.envVars ?? {}));
  const onSuccess = (res: { profile?: Profile }) => onSaved(res.profile!);
  const createProfile = useMutation(ProfileService.method.createProfile, { onSuccess });
  const updateProfile = useMutation(ProfileService.method.updateProfile, { onSuccess });
  const save = profile ? updateProfile : createProfile;
  const submit = () => {
    const fields = { name, description, imageId, harness: harness || undefined, model: model || undefined, envVars: envOf(env) };
    if (profile) {
      const { $typeName: _, createdAt: _c, updatedAt: _u, archived: _a, ...rest } = profile;
      updateProfile.mutate({ ...rest, ...fields });
    } else createProfile.mutate(fields);
  };
  return (
    <CreateForm title={title} label={title === "Edit" ? "Edit profile" : title} submitLabel={submitLabel} call={save} onSubmit={submit}>
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
      </label>
      <label>
        Description
        <input value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <label>
        Image
        <input list="enabled-images" value={imageId} onChange={(e) => setImageId(e.target.value)} placeholder="img_… or an enabled image's uri" />
        <datalist id="enabled-images">
          {images.data?.images.map((i) => (
            <option key={i.id} value={i.id}>
              {i.imageUri}
            </option>
          ))}
        </datalist>
      </label>
      <label>
        Harness
        <input value={harness} onChange={(e) => setHarness(e.target.value)} placeholder="claude-code" />
      </label>
      <label>
        Model
        <input value={model} onChange={(e) => setModel(e.target.value)} />
      </label>
      <label>
        Environment (KEY=value per line)
        <textarea className="code" rows={3} value={env} onChange={(e) => setEnv(e.target.value)} spellCheck={false} />
      </label>
    </CreateForm>
  );
}
