import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";

import { HarnessCatalogService } from "../gen/svc/app/v1/harness_pb";
import { ProfileService } from "../gen/svc/app/v1/profile_pb";
import { RepoEnrollmentSchema, ReviewService, type RepoEnrollment, type UpsertEnrollmentRequest } from "../gen/svc/app/v1/review_pb";
import { renderApp } from "../testing";

function renderEnrollments(refuse = false) {
  const enrollments: RepoEnrollment[] = [];
  const upserts: UpsertEnrollmentRequest[] = [];
  const deleted: string[] = [];
  renderApp("/reviews/enrollments", (r) => {
    r.service(ReviewService, {
      listEnrollments: () => ({ enrollments }),
      upsertEnrollment(req) {
        if (refuse) throw new ConnectError("only admins enroll repositories", Code.PermissionDenied);
        upserts.push(req);
        const e = create(RepoEnrollmentSchema, { repo: req.repo, triggerMode: req.triggerMode, autofix: req.autofix, profileId: req.profileId, engine: req.engine ?? "" });
        const at = enrollments.findIndex((x) => x.repo === req.repo);
        if (at >= 0) enrollments[at] = e;
        else enrollments.push(e);
        return { enrollment: e };
      },
      deleteEnrollment(req) {
        deleted.push(req.repo);
        enrollments.splice(0, enrollments.length);
        return {};
      },
    });
    r.service(ProfileService, { listProfiles: () => ({ profiles: [{ id: "prof_1", name: "reviewer" }] }) });
    r.service(HarnessCatalogService, { listHarnesses: () => ({ harnesses: [{ name: "claude-code", descriptor: { label: "Claude Code" } }] }) });
  });
  return { upserts, deleted };
}

describe("review enrollments", () => {
  it("enrolls a repository with the trigger, autofix, profile and engine chosen from selects, edits it and removes it", async () => {
    const { upserts, deleted } = renderEnrollments();
    await screen.findByText("No repository is enrolled: pull requests are not reviewed.");
    const form = screen.getByRole("form", { name: "Enrollment" });
    fireEvent.change(within(form).getByLabelText("Repository"), { target: { value: "acme/app" } });
    fireEvent.change(within(form).getByLabelText("Trigger"), { target: { value: "on_request" } });
    fireEvent.change(within(form).getByLabelText("Autofix"), { target: { value: "task" } });
    await within(form).findByRole("option", { name: "reviewer" });
    fireEvent.change(within(form).getByLabelText("Profile"), { target: { value: "prof_1" } });
    await within(form).findByRole("option", { name: "Claude Code" });
    fireEvent.change(within(form).getByLabelText("Engine"), { target: { value: "claude-code" } });
    fireEvent.click(within(form).getByRole("button", { name: "Enroll" }));
    const table = await screen.findByRole("table", { name: "Review enrollments" });
    expect(upserts[0]).toMatchObject({ repo: "acme/app", triggerMode: "on_request", autofix: "task", profileId: "prof_1", engine: "claude-code" });
    expect(table.textContent).toContain("On request");
    expect(table.textContent).toContain("reviewer");
    expect((within(screen.getByRole("form", { name: "Enrollment" })).getByLabelText("Repository") as HTMLInputElement).value).toBe("");

    fireEvent.click(within(table).getByRole("button", { name: "Edit" }));
    const edit = screen.getByRole("form", { name: "Enrollment" });
    expect((within(edit).getByLabelText("Trigger") as HTMLSelectElement).value).toBe("on_request");
    fireEvent.change(within(edit).getByLabelText("Autofix"), { target: { value: "suggest" } });
    fireEvent.click(within(edit).getByRole("button", { name: "Save enrollment" }));
    await waitFor(() => expect(screen.getByRole("table", { name: "Review enrollments" }).textContent).toContain("Suggest"));
    expect(upserts[1]).toMatchObject({ repo: "acme/app", triggerMode: "on_request", autofix: "suggest" });

    const again = screen.getByRole("table", { name: "Review enrollments" });
    fireEvent.click(within(again).getByRole("button", { name: "Remove" }));
    fireEvent.click(within(again).getByRole("button", { name: "Confirm remove" }));
    await screen.findByText("No repository is enrolled: pull requests are not reviewed.");
    expect(deleted).toEqual(["acme/app"]);
  });

  it("shows the API's refusal with its code", async () => {
    renderEnrollments(true);
    const form = await screen.findByRole("form", { name: "Enrollment" });
    fireEvent.change(within(form).getByLabelText("Repository"), { target: { value: "acme/app" } });
    fireEvent.click(within(form).getByRole("button", { name: "Enroll" }));
    expect((await within(form).findByRole("alert")).textContent).toBe("permission_denied: only admins enroll repositories");
  });
});
