"""Setting a zygote up: configure() with the profile, preload() of its modules, reseed() in every
fresh session."""

import builtins
import os
import sys

from . import context as ctx
from . import ipython
from .pip import _refresh_sites
from .policy import _guarded_import
from .rich import _install_pyplot_hook, _patch_pyplot
from .tools import _install_tools_module


def configure(profile, imports, policy, shell=False):
    """Set the profile name (used in messages), the top-level module allow-list (None: any) and
    the policy ("none" or "restricted"). Installs or removes the __import__ guard and loads the
    modules run_cell() needs, so that a forked session does not pay for them. shell: the
    profile allows bash, and so IPython's dialect (ipython.py), whose shell is made here."""
    if isinstance(imports, str) and not isinstance(policy, str):
        # Called as configure(profile, policy, imports): the two are unambiguous by type.
        imports, policy = policy, imports
    if policy not in ("none", "restricted"):
        raise ValueError(f"unknown policy {policy!r} (expected 'none' or 'restricted')")
    ctx._profile = str(profile)
    ctx._restricted = policy == "restricted"
    if imports is None:
        ctx._allowed = None
        ctx._allowed_text = ""
    else:
        ctx._allowed = frozenset(str(m) for m in imports)
        ctx._allowed_text = ", ".join(sorted(ctx._allowed)) or "(none)"

    # Install the guard once: unwrap a guard installed earlier (by this or another instance of
    # this module) so guards never stack.
    current = builtins.__import__
    ctx._orig_import = getattr(current, "_airlock_original", current)
    if ctx._allowed is None:
        builtins.__import__ = ctx._orig_import
    else:
        _guarded_import._airlock_original = ctx._orig_import
        builtins.__import__ = _guarded_import

    # Warm-up: what run_cell() needs is loaded here, in the zygote, not again in each session.
    import ast  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import warnings

    # plt.show() on the Agg backend is replaced (see _patch_pyplot); these cover fig.show() and
    # a show() reached before the patch.
    warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
    warnings.filterwarnings("ignore", message=".*is non-interactive, and thus cannot be shown.*")
    _patch_pyplot()
    _install_pyplot_hook()
    _install_tools_module()
    # The layer's packages are importable before preload() imports them.
    _refresh_sites()
    ctx._display = None
    if shell:
        why = ipython.enable()
        if why is not None:
            sys.stderr.write(f"airlock: {why}\n")
        else:
            from IPython.display import display

            display._airlock_display = True  # saved.py and _user_namespace() know it as ours
            ctx._display = display


def preload(modules):
    """Import each module (trusted: no allow-list check). Returns ["name: message", ...] for the
    ones that failed, an empty list when all imported."""
    import importlib

    errors = []
    for name in modules:
        try:
            importlib.import_module(name)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a module may raise anything, SystemExit included
            errors.append(f"{name}: {e}" if str(e) else f"{name}: {type(e).__name__}")
    _patch_pyplot()
    return errors


def home(path):
    """The session lives in path, E2B's /home/user (runner.c has entered it and set HOME): a
    sandbox made through E2B's API, whose code expects E2B's kernels' conventions. The one the
    cell package keeps: an image saved to a path (PIL's Image.save) is also displayed, as E2B's
    code interpreter does (docs/E2B.md)."""
    ctx._save_displays = bool(path)


def reseed():
    """Give this (freshly forked) session its own random sequences: sessions forked from one
    zygote would otherwise share the state of random and numpy's legacy global RandomState.
    (numpy's default_rng() and secrets/uuid read the OS entropy themselves; the str hash seed is
    fixed at interpreter start and cannot be changed here.)"""
    # A module that is not loaded yet seeds itself from os.urandom when the session imports it.
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed(os.urandom(32))
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        raw = os.urandom(32)
        nprandom.seed([int.from_bytes(raw[i:i + 4], "little") for i in range(0, 32, 4)])
