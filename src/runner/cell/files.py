"""The files manifest: which files under the working directory a cell created, changed or
deleted."""

import os

from . import context as ctx
from .context import _cwd


# The change watch (src/runner/watch.h), set by runner.c; None where the runner did not (the
# manifest then walks before and after every cell).
_watch_reset = _watch_add = _watch_quiet = _watch_forget = None
# (root, snapshot) after the last cell, the snapshot before the next while the watch stays quiet.
_last = None


def _forget_in_child():
    global _last
    _last = None
    if _watch_forget is not None:
        _watch_forget()


os.register_at_fork(after_in_child=_forget_in_child)


def _before(root):
    """The snapshot of root before a cell: the last cell's, when the watch saw nothing change
    since, else a walk that watches every directory it enters."""
    global _last
    if root is None:
        return None
    if _last is not None and _last[0] == root and _watch_quiet is not None and _watch_quiet():
        return _last[1]
    _last = None
    if _watch_reset is None:
        return _snapshot(root)
    _watch_reset()
    return _snapshot(root, _watch_add)


def _after(root):
    """The snapshot of root after a cell, always a walk (a cell's writes through mmap raise no
    event), which the next cell may reuse. Where the cell changed something (events came), the
    watch starts again with the directories as they are now."""
    global _last
    if root is None:
        return None
    if _watch_reset is None:
        return _snapshot(root)
    if _watch_quiet():
        snap = _snapshot(root)  # nothing moved: every directory it enters is watched already
    else:
        _watch_reset()
        snap = _snapshot(root, _watch_add)
    _last = (root, snap)
    return snap


def _snapshot(root, watch=None):
    """({relative path: (size, mtime_ns, inode)}, truncated) for the regular files and symlinks
    under root, without following symlinks; truncated says the entry bound cut the walk short.
    An empty directory costs one scandir(); a file costs one lstat (scandir gives no sizes).
    watch(path), when given, is called for each directory before it is read."""
    if root is None:
        return None
    snap = {}
    seen = 0
    truncated = False
    # pip's installs for the session (hundreds of files) are not files the cell made.
    skip = os.environ.get("PYTHONUSERBASE")
    stack = [("", root, 0)]
    scandir = os.scandir
    while stack and not truncated:
        prefix, path, depth = stack.pop()
        if watch is not None:
            watch(path)
        try:
            it = scandir(path)
        except OSError:
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > ctx._WALK_MAX_ENTRIES:
                    truncated = True
                    break
                try:
                    if entry.is_dir(follow_symlinks=False):
                        # Deeper directories are skipped by both walks alike, so the diff
                        # stays consistent: the manifest just does not see them.
                        if depth < ctx._WALK_MAX_DEPTH and entry.path != skip:
                            stack.append((prefix + entry.name + "/", entry.path, depth + 1))
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        st = entry.stat(follow_symlinks=False)
                        snap[prefix + entry.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
                except OSError:
                    continue
    return snap, truncated


def _safe_path(rel):
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:  # undecodable bytes in a name (surrogateescape)
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _files_changed(before, after):
    """Diff two snapshots into [{"path", "size", "change"}] sorted by path. When a walk hit its
    bound it saw only part of the tree: "created" is then only reported if the walk before the
    cell was complete, "deleted" only if the walk after it was."""
    if before is None or after is None:
        return []
    old, old_cut = before
    new, new_cut = after
    if not old and not new:
        return []
    changes = []
    for path, st in new.items():
        prev = old.get(path)
        if prev is None:
            if not old_cut:
                changes.append((path, st[0], "created"))
        elif prev != st:
            changes.append((path, st[0], "changed"))
    if not new_cut:
        for path in old.keys() - new.keys():
            changes.append((path, 0, "deleted"))
    changes.sort()
    return [{"path": _safe_path(p), "size": size, "change": c} for p, size, c in changes]


def files_snapshot():
    """The "before" half of the files manifest for a cell that does not run through
    run_cell() (a bash cell): pass the value to files_changed() afterwards."""
    root = _cwd()
    return (root, _before(root))


def files_changed(snapshot):
    """What changed under the snapshot's root since files_snapshot(), in run_cell()'s "files"
    format."""
    root, before = snapshot
    if before is None:
        return []
    return _files_changed(before, _after(root))
