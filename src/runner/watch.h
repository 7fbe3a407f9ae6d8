/* A change watch over the directories of the working tree, for the files manifest
 * (src/runner/cell/files.py): the manifest's snapshot of the tree after one cell stands as the
 * snapshot before the next while nothing has changed in between, which saves a walk of the
 * tree (a scandir per directory and an lstat per file) on every cell.
 *
 * An inotify instance of the runner's own, watching each directory the walk enters. "Quiet"
 * means no event of any kind came since the last look: an upload or delete by the daemon, a
 * background process or thread of the session writing, a directory made or removed. Any doubt
 * (no instance, a watch that could not be added, a queue that overflowed, a read error) is
 * "not quiet", and the manifest walks the tree as it always did.
 *
 * What inotify does not see: writes through a shared writable mmap, and writes through a hard
 * link in a directory the walk does not enter. A change of that kind between two cells is then
 * reported by the second cell's manifest (its walk after the cell sees it), where a walk
 * before the cell would have hidden it. */
#pragma once

#include <Python.h>

/* _watch_reset(): drops the watch and starts an empty one. */
extern PyMethodDef watch_reset_def;
/* _watch_add(path): watches the directory path (not its subdirectories). A failure (the
 * kernel's watch limit, a directory gone) leaves the watch broken until the next reset. */
extern PyMethodDef watch_add_def;
/* _watch_quiet() -> bool: whether no event came since the last call (or the reset), reading
 * them all; False when the watch is broken or missing. */
extern PyMethodDef watch_quiet_def;
/* _watch_forget(): in a forked child, closes its copy of the instance without touching the
 * parent's (os.register_at_fork). */
extern PyMethodDef watch_forget_def;
