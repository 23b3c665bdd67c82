/**
 * cridock's own version: what `cridock --version` and `cridock check
 * --version` print and what the packages are named after. A module of its
 * own so that everything may read it without importing main.ts (the entry,
 * which imports everything else). package.json carries the same number; a
 * unit test keeps the two equal. Not the CRI Version.version field, which
 * the protocol fixes (cri/runtime-info-rpcs.ts).
 */
export const CRIDOCK_VERSION = "0.1.0";
