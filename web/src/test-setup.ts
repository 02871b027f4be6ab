import { configure } from "@testing-library/react";

// The machine that runs make test is often busy: wait for the UI generously (never a timing
// assertion, only a deadline).
configure({ asyncUtilTimeout: 15000 });
