import { create } from "@bufbuild/protobuf";
import { fireEvent, screen, waitFor } from "@testing-library/react";

import { ModelRouterService, RouterModelAudience, RouterModelSchema, type ListRouterModelsRequest, type UpdateRouterModelPolicyRequest } from "../gen/svc/app/v1/model_router_pb";
import { renderApp, signedIn } from "../testing";

function renderModels(path: string, auth = signedIn) {
  const asked: ListRouterModelsRequest[] = [];
  const updates: UpdateRouterModelPolicyRequest[] = [];
  let enabled = false;
  renderApp(
    path,
    (r) =>
      r.service(ModelRouterService, {
        listRouterModels(req) {
          asked.push(req);
          return { models: [create(RouterModelSchema, { routerId: "or", id: "acme/fast", name: "Fast", available: true, enabled, contextLength: 8192n })] };
        },
        updateRouterModelPolicy(req) {
          updates.push(req);
          enabled = req.enabled;
          return {};
        },
      }),
    auth,
  );
  return { asked, updates };
}

describe("model router catalog", () => {
  it("shows an admin the whole catalog and toggles a model's policy", async () => {
    const { asked, updates } = renderModels("/model-routers/or");
    await waitFor(() => expect(asked.at(-1)).toMatchObject({ routerId: "or", audience: RouterModelAudience.ADMIN_CATALOG }));
    const toggle = (await screen.findByRole("checkbox", { name: "acme/fast enabled" })) as HTMLInputElement;
    await waitFor(() => expect(toggle.disabled).toBe(false));
    expect(toggle.checked).toBe(false);
    fireEvent.click(toggle);
    await waitFor(() => expect((screen.getByRole("checkbox", { name: "acme/fast enabled" }) as HTMLInputElement).checked).toBe(true));
    expect(updates).toEqual([expect.objectContaining({ routerId: "or", modelId: "acme/fast", enabled: true, userEnabled: false })]);
  });

  it("asks for the users' audience for a non-admin, whose toggles are read-only", async () => {
    const { asked } = renderModels("/model-routers/or?audience=user", { ...signedIn, whoami: async () => ({ user_id: "u", kind: "web_session", admin: false }) });
    const toggle = (await screen.findByRole("checkbox", { name: "acme/fast for users" })) as HTMLInputElement;
    expect(asked[0].audience).toBe(RouterModelAudience.USER);
    await waitFor(() => expect(toggle.disabled).toBe(true));
    expect(screen.queryByRole("button", { name: "Refresh from the router" })).toBeNull();
  });
});
