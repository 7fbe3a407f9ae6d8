"""The files manifest: which files under the working directory a cell created, changed or
deleted."""

import os

from . import context as ctx
from .context import _cwd


def _snapshot(root):
    """({relative path: (size, mtime_ns, inode)}, truncated) for the regular files and symlinks
    under root, without following symlinks; truncated says the entry bound cut the walk short.
    An empty directory costs one scandir(); a file costs one lstat (scandir gives no sizes)."""
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
    return (root, _snapshot(root))


def files_changed(snapshot):
    """What changed under the snapshot's root since files_snapshot(), in run_cell()'s "files"
    format."""
    root, before = snapshot
    if before is None:
        return []
    return _files_changed(before, _snapshot(root))
