/* progress.h: a progress bar on stderr for long reads and writes (loading a model, converting
 * one): redrawn in place when stderr is a terminal; in a log (a file, a pipe, mpirun's
 * forwarding) a line every HEADSPLIT_PROGRESS_EVERY seconds (default 5; 0: every quarter
 * second; "off": none) and a last line when any was printed, so that quick loads stay
 * quiet.  It watches the process's own I/O counters
 * (/proc/self/io), so the code doing the I/O needs no hooks. */
#ifndef HEADSPLIT_APP_PROGRESS_H
#define HEADSPLIT_APP_PROGRESS_H

#include <stdint.h>

typedef struct Progress Progress;

/* Starts drawing "label: bytes [of total] rate" every quarter second; total 0 when unknown;
 * writes: count bytes written instead of read.  NULL (nothing drawn) when the counters
 * cannot be read or a log's lines are off. */
Progress *progress_start(const char *label, uint64_t total, int writes);
/* Draws the last figures, ends the line and frees p (NULL is fine).  complete: the work
 * is done, so the last line shows the total reached whatever the counters saw (a file's
 * bytes that nobody reads, a total that was an estimate). */
void progress_stop(Progress *p, int complete);

#endif
