import { ConnectError } from "@connectrpc/connect";

import { BlockErrorSchema, type BlockError } from "../gen/svc/app/v1/automation_pb";

// blockErrorsOf are the BlockError details of a refused definition (an empty list for any other
// error), so an editor can show each problem at its block and field.
export function blockErrorsOf(err: unknown): BlockError[] {
  return err ? ConnectError.from(err).findDetails(BlockErrorSchema) : [];
}

export function BlockErrors({ errors }: { errors: BlockError[] }) {
  if (errors.length === 0) return null;
  return (
    <ul className="block-errors" aria-label="Problems">
      {errors.map((e, i) => (
        <li key={i}>
          {e.blockId && <code>{e.blockId}</code>}
          {e.field && (
            <>
              {" "}
              · <code>{e.field}</code>
            </>
          )}{" "}
          <span className="muted">[{e.code}]</span> {e.message}
        </li>
      ))}
    </ul>
  );
}
