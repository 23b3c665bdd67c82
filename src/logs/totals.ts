/**
 * Process-wide totals of the log writers, monotonic for the life of the
 * process (followers come and go with their containers; these do not reset).
 * Plain numbers bumped on the write path; metrics/ reads them at scrape time.
 */
export const logTotals = {
  /** Bytes written into CRI log files. */
  bytesWritten: 0,
  /** Occasions on which Docker rotated output away before it was read. */
  lostEvents: 0,
  /** Bytes known to be lost on those occasions (a lower bound). */
  lostBytes: 0,
};
