/**
 * Warm pools (issue 21): started, unclaimed copies of templates that `create_instance`
 * claims instead of copying. members.ts says what a member is, claim.ts takes one,
 * keeper.ts keeps the pools filled, lock.ts keeps keepers to one.
 *
 * @module
 */

export * from "./members.ts";
export * from "./claim.ts";
export * from "./keeper.ts";
export * from "./lock.ts";
