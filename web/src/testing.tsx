// Helpers of the component tests: the whole App at a path, over an in-memory API.
import { createRouterTransport, type ConnectRouter } from "@connectrpc/connect";
import { render } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";

import { App } from "./App";
import type { Auth } from "./auth";

// signedIn is an Auth whose caller is an admin signed in by cookie, outside `hangar dev`.
export const signedIn: Auth = {
  whoami: async () => ({ user_id: "user_admin", name: "Ada", kind: "web_session", admin: true }),
  devSignIn: async () => false,
  signOut: async () => {},
};

export function renderApp(path: string, routes: (router: ConnectRouter) => void, auth: Auth = signedIn) {
  return render(
    <MemoryRouter initialEntries={[path]}>
      <App transport={createRouterTransport(routes)} auth={auth} />
    </MemoryRouter>,
  );
}
