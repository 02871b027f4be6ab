import { NavLink, Outlet } from "react-router-dom";

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
        </nav>
      </header>
      <main>
        <Outlet />
      </main>
    </div>
  );
}
