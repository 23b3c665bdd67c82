/** The code and message of the CridockError a promise rejects with (anything else is rethrown). */
import { CridockError } from "../../src/errors.ts";

export async function codeOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof CridockError) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a rejection");
}
