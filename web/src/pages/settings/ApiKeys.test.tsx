import { create } from "@bufbuild/protobuf";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";

import { ApiKeySchema, ApiKeyService, type ApiKey, type CreateApiKeyRequest } from "../../gen/svc/app/v1/api_key_pb";
import { renderApp } from "../../testing";

describe("API keys settings", () => {
  it("shows a new key's secret once, lists the key without it, and revokes after a confirmation", async () => {
    const keys: ApiKey[] = [];
    const created: CreateApiKeyRequest[] = [];
    renderApp("/settings/keys", (r) =>
      r.service(ApiKeyService, {
        listApiKeys: () => ({ apiKeys: keys }),
        createApiKey(req) {
          created.push(req);
          const k = create(ApiKeySchema, { id: "k1", name: req.name, kind: req.kind, prefix: "hgr_k1", createdAt: "2026-11-25T10:00:00Z" });
          keys.push(k);
          return { apiKey: k, secret: "hgr_k1.s3cret" };
        },
        revokeApiKey(req) {
          keys[0] = create(ApiKeySchema, { ...keys[0], revokedAt: "2026-11-25T11:00:00Z" });
          return { apiKey: keys.find((k) => k.id === req.id) };
        },
      }),
    );
    await screen.findByText("No API keys.");
    const form = screen.getByRole("form", { name: "New API key" });
    fireEvent.change(within(form).getByLabelText("Name"), { target: { value: "ci" } });
    fireEvent.change(within(form).getByLabelText("Kind"), { target: { value: "service_account" } });
    fireEvent.click(within(form).getByRole("button", { name: "Create key" }));

    const once = await screen.findByRole("region", { name: "The new API key" });
    expect((within(once).getByLabelText("Secret") as HTMLInputElement).value).toBe("hgr_k1.s3cret");
    expect(created[0]).toMatchObject({ name: "ci", kind: "service_account", userEmail: "", admin: false });
    const table = await screen.findByRole("table", { name: "API keys" });
    expect(table.textContent).toContain("hgr_k1…");
    expect(table.textContent).not.toContain("s3cret");

    fireEvent.click(within(once).getByRole("button", { name: "I have saved it" }));
    expect(screen.queryByRole("region", { name: "The new API key" })).toBeNull();
    expect(document.body.textContent).not.toContain("s3cret");
    expect([...document.querySelectorAll("input")].some((i) => i.value.includes("s3cret"))).toBe(false);

    fireEvent.click(within(table).getByRole("button", { name: "Revoke" }));
    fireEvent.click(within(table).getByRole("button", { name: "Confirm revoke" }));
    await waitFor(() => expect(screen.getByRole("table", { name: "API keys" }).textContent).toContain("revoked"));
  });
});
