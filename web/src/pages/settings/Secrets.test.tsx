import { create } from "@bufbuild/protobuf";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";

import {
  OrgSecretSchema,
  OrgSecretService,
  OrgSecretVisibility,
  type OrgSecret,
  type PutOrgSecretRequest,
  type SetOrgSecretAccessRequest,
} from "../../gen/svc/app/v1/org_secret_pb";
import { renderApp } from "../../testing";

describe("org secrets settings", () => {
  it("sends a value once and clears it, then sets an access policy for selected users and profiles", async () => {
    const secrets: OrgSecret[] = [];
    const puts: PutOrgSecretRequest[] = [];
    const access: SetOrgSecretAccessRequest[] = [];
    renderApp("/settings/secrets", (r) =>
      r.service(OrgSecretService, {
        listOrgSecrets: () => ({ secrets }),
        putOrgSecret(req) {
          puts.push(req);
          const s = create(OrgSecretSchema, { name: req.name, version: 1n });
          secrets.push(s);
          return { secret: s, created: true };
        },
        setOrgSecretAccess(req) {
          access.push(req);
          secrets[0] = create(OrgSecretSchema, { ...secrets[0], access: req.access });
          return { secret: secrets[0] };
        },
      }),
    );
    await screen.findByText("No org secrets.");
    const form = screen.getByRole("form", { name: "Put secret" });
    fireEvent.change(within(form).getByLabelText("Name"), { target: { value: "GH_TOKEN" } });
    fireEvent.change(within(form).getByLabelText("Value"), { target: { value: "ghp_value" } });
    fireEvent.click(within(form).getByRole("button", { name: "Save secret" }));
    await within(form).findByText(/Created/);
    expect(puts[0]).toMatchObject({ name: "GH_TOKEN", value: "ghp_value" });
    expect((within(form).getByLabelText("Value") as HTMLInputElement).value).toBe("");

    const table = await screen.findByRole("table", { name: "Org secrets" });
    fireEvent.click(within(table).getByRole("button", { name: "Edit access" }));
    const editor = screen.getByRole("form", { name: "Access to GH_TOKEN" });
    fireEvent.change(within(editor).getByLabelText("Visibility"), { target: { value: String(OrgSecretVisibility.SELECTED) } });
    fireEvent.change(within(editor).getByLabelText("User ids"), { target: { value: "user_a, user_b" } });
    fireEvent.change(within(editor).getByLabelText("Profile ids"), { target: { value: "prof_1" } });
    fireEvent.click(within(editor).getByRole("button", { name: "Save access" }));
    await waitFor(() => expect(screen.getByRole("table", { name: "Org secrets" }).textContent).toContain("Selected users, keys and profiles"));
    expect(access[0]).toMatchObject({
      name: "GH_TOKEN",
      access: { visibility: OrgSecretVisibility.SELECTED, userIds: ["user_a", "user_b"], serviceKeyIds: [], profileIds: ["prof_1"] },
    });
  });
});
