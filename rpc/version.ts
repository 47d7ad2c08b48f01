/** The program's version, shared by `isb` and `isx`. */
export const VERSION = "0.1.0";

/** The `isb rpc` protocol number; it has always been 1. */
export const PROTOCOL = 1;
