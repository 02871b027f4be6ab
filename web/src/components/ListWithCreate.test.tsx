import { Code, ConnectError } from "@connectrpc/connect";
import type { UseQueryResult } from "@tanstack/react-query";
import { fireEvent, render, screen, within } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";

import { CreateForm, ListWithCreate } from "./ListWithCreate";

type Data = { items: { id: string; name: string }[] };

// A query in one of its states, as react-query hands it to a page.
const query = (state: Partial<UseQueryResult<Data>>) => ({ isPending: false, isError: false, ...state }) as UseQueryResult<Data>;

function renderList(q: UseQueryResult<Data>, errors: unknown[] = []) {
  return render(
    <MemoryRouter>
      <ListWithCreate
        title="Things"
        create={<p>the form</p>}
        errors={errors}
        query={q}
        what="things"
        rows={(d) => d.items}
        rowKey={(r) => r.id}
        empty="No things."
        columns={[
          { header: "Name", cell: (r) => r.name },
          { header: "", cell: (r) => <button type="button">Delete {r.name}</button> },
        ]}
      />
    </MemoryRouter>,
  );
}

describe("ListWithCreate", () => {
  it("shows the heading and form in every state, with loading, empty, error and rows in turn", () => {
    const { rerender } = renderList(query({ isPending: true }));
    expect(screen.getByRole("heading", { name: "Things" })).toBeTruthy();
    expect(screen.getByText("the form")).toBeTruthy();
    expect(screen.getByRole("status").textContent).toBe("Loading things…");

    const again = (q: UseQueryResult<Data>, errors: unknown[] = []) =>
      rerender(
        <MemoryRouter>
          <ListWithCreate title="Things" errors={errors} query={q} what="things" rows={(d) => d.items} rowKey={(r) => r.id} empty="No things." columns={[{ header: "Name", cell: (r) => r.name }]} />
        </MemoryRouter>,
      );
    again(query({ data: { items: [] } }));
    expect(screen.getByText("No things.")).toBeTruthy();
    again(query({ isError: true, error: new ConnectError("no such thing", Code.NotFound) }));
    expect(screen.getByRole("alert").textContent).toBe("not_found: no such thing");
    again(query({ data: { items: [{ id: "1", name: "one" }, { id: "2", name: "two" }] } }), [null, new ConnectError("in use", Code.FailedPrecondition)]);
    const table = screen.getByRole("table", { name: "Things" });
    expect(within(table).getAllByRole("row").map((r) => r.textContent)).toEqual(["Name", "one", "two"]);
    expect(screen.getAllByRole("alert").map((a) => a.textContent)).toEqual(["failed_precondition: in use"]);
  });

  it("submits its form once per press, disabled while the call is in flight, and shows the call's error", () => {
    let sent = 0;
    const { rerender } = render(
      <CreateForm title="New thing" submitLabel="Create" call={{ isPending: false, error: null }} onSubmit={() => sent++}>
        <label>
          Name
          <input defaultValue="x" />
        </label>
      </CreateForm>,
    );
    const form = screen.getByRole("form", { name: "New thing" });
    fireEvent.click(within(form).getByRole("button", { name: "Create" }));
    expect(sent).toBe(1);
    rerender(
      <CreateForm title="New thing" submitLabel="Create" call={{ isPending: true, error: new ConnectError("name is taken", Code.AlreadyExists) }} onSubmit={() => sent++}>
        <label>
          Name
          <input defaultValue="x" />
        </label>
      </CreateForm>,
    );
    expect((within(form).getByRole("button", { name: "Create" }) as HTMLButtonElement).disabled).toBe(true);
    expect(within(form).getByRole("alert").textContent).toBe("already_exists: name is taken");
  });
});
