/**
 * The JSON-RPC faults of `tools/call` (an unknown tool, non-object arguments): a leaf, so
 * the protocol layer names it without loading the tool table (start-up, issue 11).
 *
 * @module
 */

/** A JSON-RPC error the server answers instead of a result. */
export class ProtocolFault extends Error {
  /** The JSON-RPC code. */
  readonly code: number;
  /** A fault with `code`. */
  constructor(code: number, message: string) {
    super(message);
    this.name = "ProtocolFault";
    this.code = code;
  }
}
