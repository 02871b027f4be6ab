import { useQuery, useQueryClient } from "@tanstack/react-query";
import { NavLink, Outlet } from "react-router-dom";

import { useAuth } from "../auth";

export function Layout() {
  return (
    <div className="shell">
      <header className="top">
        <NavLink to="/tasks" className="brand">
          Hangar
        </NavLink>
        <nav aria-label="Main">
          <NavLink to="/tasks">Tasks</NavLink>
          <NavLink to="/automations">Automations</NavLink>
          <NavLink to="/reviews">Reviews</NavLink>
          <NavLink to="/profiles">Profiles</NavLink>
          <NavLink to="/images">Images</NavLink>
          <NavLink to="/harnesses">Harnesses</NavLink>
          <NavLink to="/model-routers">Models</NavLink>
          <NavLink to="/settings">Settings</NavLink>
        </nav>
        <Account />
      </header>
      <main>
        <Outlet />
      </main>
    </div>
  );
}

// Account is who the dashboard is signed in as, with sign-out; nothing while signed out (the
// page itself then shows the sign-in).
function Account() {
  const auth = useAuth();
  const client = useQueryClient();
  const me = useQuery({ queryKey: ["auth", "whoami"], queryFn: () => auth.whoami() });
  if (!me.data) return null;
  const signOut = async () => {
    await auth.signOut();
    await client.resetQueries();
  };
  return (
    <div className="account" aria-label="Account" role="group">
      <span>
        {me.data.name || me.data.email || me.data.user_id}
        {me.data.admin && <span className="muted"> · admin</span>}
      </span>
      <button type="button" onClick={() => void signOut()}>
        Sign out
      </button>
    </div>
  );
}
