/* Sessions that stop, resume, fork, and outlive the daemon. A stop saves the session (see
 * snapshot.h) and ends its processes; the id then lives only in the store, and the first call
 * that needs a sandbox resumes it into a fresh one from the profile's zygote, so every layer
 * of the sandbox applies anew. A fork saves the parent once and loads that state into n fresh
 * sandboxes at once while the daemon copies /work into each: a session's live interpreter
 * cannot be forked into new namespaces (its seccomp filter forbids making them, on purpose),
 * and a pool member loading a pickle is as fast as the pickle. docs/LIFECYCLE.md has the
 * reasoning and the numbers. */
#include "audit/audit.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox.h"
#include "session-internal.h"
#include "session-table.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *state_dir(const struct session_manager *mgr)
{
        return mgr->cfg.state_dir;
}

void lifecycle_remove_saved(struct session_manager *mgr, const char *id)
{
        if (state_dir(mgr))
                (void) snapshot_remove(state_dir(mgr), id);
}

void lifecycle_save_files(struct session *s)
{
        struct airlock_error err = { { 0 } };
        int r;

        if (s->ephemeral || !s->mgr->store || !s->sb)
                return;
        /* A microVM's /work is inside its VM, reached file by file over its channel: it is
         * not copied to disk after each change (docs/PROFILES.md, "The microvm tier"). */
        if (s->sb->vm_files)
                return;
        pthread_mutex_lock(&s->save_lock);
        r = snapshot_save_files(state_dir(s->mgr), s->id, s->sb, s->mgr->cfg.max_stopped_bytes,
                                &err);
        pthread_mutex_unlock(&s->save_lock);
        if (r < 0)
                log_warn("session=%s msg=\"cannot copy the files of /work to disk: %s\"", s->id,
                         err.msg);
}

/* Puts s back to LIVE after a save that did not end it (unless it ended meanwhile). */
static void leave_saving(struct session *s)
{
        pthread_mutex_lock(&s->lock);
        if (s->phase == PHASE_SAVING)
                s->phase = PHASE_LIVE;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

/* Waits out a resume or another save, then takes s for saving. Returns 0, 1 when s is gone
 * already (stopped or ended), -EBUSY while an execution runs. Lock held on entry and exit. */
static int enter_saving_locked(struct session *s)
{
        while (s->phase == PHASE_RESUMING || s->phase == PHASE_SAVING)
                pthread_cond_wait(&s->cond, &s->lock);
        if (s->phase == PHASE_GONE)
                return 1;
        if (s->busy)
                return -EBUSY;
        s->phase = PHASE_SAVING;
        return 0;
}

int lifecycle_stop(struct session *s, bool shutdown, struct airlock_error *err)
{
        struct session_manager *mgr = s->mgr;
        _cleanup_free_ char *info = NULL;
        struct sandbox *sb = NULL;
        json_t *meta = NULL;
        time_t now;
        bool ours;
        int r;

        if (!mgr->store)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "this daemon has no state directory, so its sessions "
                                         "cannot stop");
        pthread_mutex_lock(&s->lock);
        if (shutdown && s->busy && s->sb) {
                /* The daemon is going away: interrupt the cell, give it the grace period. */
                struct timespec until;
                (void) sandbox_interrupt(s->sb);
                (void) clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += (time_t) (mgr->cfg.interrupt_grace_ms / 1000) + 2;
                while (s->busy && pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0)
                        ;
        }
        r = enter_saving_locked(s);
        pthread_mutex_unlock(&s->lock);
        if (r == 1)
                return s->gone_stopped
                               ? 0
                               : airlock_error_set(err, -ENOENT, "session %s has ended", s->id);
        if (r < 0)
                return airlock_error_set(err, r,
                                         "session %s is running an execution; interrupt it or "
                                         "wait for it before stopping the session",
                                         s->id);

        pthread_mutex_lock(&s->save_lock);
        r = snapshot_save(state_dir(mgr), s->id, s->sb, true, mgr->cfg.max_stopped_bytes, &meta,
                          err);
        pthread_mutex_unlock(&s->save_lock);
        if (r < 0) {
                leave_saving(s);
                log_warn("session=%s msg=\"cannot stop: %s\"", s->id, err->msg);
                return r;
        }

        now = time(NULL);
        pthread_mutex_lock(&mgr->lock);
        ours = session_table_find(mgr, s->id) == s;
        if (ours)
                session_table_remove(mgr, s);
        pthread_mutex_lock(&s->lock);
        if (ours && s->phase == PHASE_SAVING) {
                sb = TAKE_PTR(s->sb);
                json_decref(s->saved);
                s->saved = TAKE_PTR(meta);
                s->phase = PHASE_GONE;
                s->gone_stopped = true;
                info = session_info_json(s);
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (info)
                (void) store_session_stopped(
                        mgr->store, s->id, (long long) now,
                        (long long) now + (long long) (mgr->cfg.delete_after_ms / 1000), info);
        pthread_mutex_unlock(&mgr->lock);
        json_decref(meta);
        if (!info) {
                /* Deleted while we saved it: the delete wins. */
                lifecycle_remove_saved(mgr, s->id);
                if (ours)
                        session_unref(s);
                return airlock_error_set(err, -ENOENT, "session %s was deleted", s->id);
        }
        /* Not buried for the worker: stopped means no process and no cgroup when we answer. */
        if (sb) {
                sandbox_kill(sb);
                sandbox_free(sb);
        }
        log_info("session=%s profile=%s msg=\"session stopped%s\"", s->id, s->profile->name,
                 shutdown ? " (daemon shutting down)" : "");
        /* Without a request in this thread, the manager's worker stopped it: idle or at the end
         * of its lifetime. */
        audit_emit_owned(mgr->cfg.audit, "session.stopped", s->tenant, s->id,
                         json_pack("{s:s}", "reason",
                                   shutdown                ? "shutdown"
                                   : audit_scope_current() ? "client"
                                                           : "idle"));
        session_unref(s); /* the table's reference */
        return 0;
}

void lifecycle_checkpoint(struct session *s)
{
        struct session_manager *mgr = s->mgr;
        struct airlock_error err = { { 0 } };
        json_t *meta = NULL;
        uint64_t t0 = now_ns();
        int r;

        pthread_mutex_lock(&s->lock);
        r = s->dirty ? enter_saving_locked(s) : 1;
        pthread_mutex_unlock(&s->lock);
        if (r != 0)
                return;
        pthread_mutex_lock(&s->save_lock);
        r = snapshot_save(state_dir(mgr), s->id, s->sb, true, mgr->cfg.max_stopped_bytes, &meta,
                          &err);
        pthread_mutex_unlock(&s->save_lock);
        pthread_mutex_lock(&s->lock);
        if (r >= 0) {
                json_decref(s->saved);
                s->saved = TAKE_PTR(meta);
                s->dirty = false;
        } else {
                /* Not again before another quiet period. */
                s->last_used_ns = now_ns();
        }
        pthread_mutex_unlock(&s->lock);
        leave_saving(s);
        if (r >= 0) {
                session_store_info(s);
                log_debug("session=%s msg=\"checkpoint saved\" ms=%.1f", s->id,
                          (now_ns() - t0) / 1e6);
        } else {
                log_warn("session=%s msg=\"checkpoint failed: %s\"", s->id, err.msg);
        }
}

/* A saved list of strings (NULL when it was not saved: the profile's, or none). */
static char **strv_from_json(json_t *a)
{
        char **v;
        size_t i, n = 0;
        json_t *e;

        if (!json_is_array(a))
                return NULL;
        v = calloc(json_array_size(a) + 1, sizeof(char *));
        json_array_foreach (a, i, e)
                if (v && json_is_string(e))
                        v[n++] = strdup(json_string_value(e));
        return v;
}

/* The facts a stopped session's row keeps, back on a new object. */
static void restore_facts(struct session *s, json_t *row)
{
        json_t *info = json_object_get(row, "info"), *env = json_object_get(info, "env"), *e;
        size_t i, n = 0;

        s->created_at = (time_t) json_integer_value(json_object_get(row, "created_at"));
        s->last_used_at = (time_t) json_integer_value(json_object_get(info, "last_used_at"));
        if (json_integer_value(json_object_get(info, "stop_after_ms")) > 0)
                s->stop_after_ms =
                        (uint64_t) json_integer_value(json_object_get(info, "stop_after_ms"));
        s->exec_count = (unsigned) json_integer_value(json_object_get(info, "execution_count"));
        s->cpu_ms = json_number_value(json_object_get(info, "cpu_ms"));
        s->saved = json_is_object(json_object_get(info, "saved"))
                           ? json_incref(json_object_get(info, "saved"))
                           : NULL;
        if (json_array_size(env) > 0) {
                s->env = calloc(json_array_size(env) + 1, sizeof(char *));
                json_array_foreach (env, i, e)
                        if (s->env && json_is_string(e))
                                s->env[n++] = strdup(json_string_value(e));
        }
        if (json_is_string(json_object_get(info, "home")))
                s->home = strdup(json_string_value(json_object_get(info, "home")));
        s->code_tools = strv_from_json(json_object_get(info, "code_tools"));
        s->approved_tools = strv_from_json(json_object_get(info, "approved_tools"));
        session_network_restore(s, json_object_get(info, "network"));
        if (json_object_size(json_object_get(info, "metadata")) > 0)
                s->metadata = json_deep_copy(json_object_get(info, "metadata"));
        s->timeout_ms = (uint64_t) json_integer_value(json_object_get(info, "timeout_ms"));
        s->stops_at = (time_t) json_integer_value(json_object_get(info, "stops_at"));
        /* A lifetime that ran out while it was stopped is spent: the resume was asked for, and
         * the session lives on under its idle stop (docs/LIFECYCLE.md). */
        if (s->stops_at > 0 && s->stops_at <= time(NULL))
                s->stops_at = 0;
}

/* A stopped microVM session's own VM, restored from what the stop saved: no Python reseed
 * (it is the same session going on, generators included), but a reseeded kernel and the
 * host's clock. */
static int resume_vm(struct session_manager *mgr, struct profile_slot *slot, struct session *s,
                     struct sandbox **ret_sb, json_t **ret_report, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        struct sandbox *sb = NULL;
        int r;

        r = session_fd_room(mgr, 1, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&s->save_lock);
        fd = snapshot_open_vm(state_dir(mgr), s->id);
        pthread_mutex_unlock(&s->save_lock);
        if (fd < 0)
                return airlock_error_set(err, fd, "the session's saved VM cannot be read: %s",
                                         strerror(-fd));
        r = session_vm_spawn(mgr, slot, s->id, fd, &sb, err);
        /* Its own names and narrowed network on the proxy before the guest runs on. */
        if (r >= 0)
                session_network_bind(s, sb);
        if (r >= 0)
                r = sandbox_vm_ready(sb, false, err);
        if (r >= 0) {
                *ret_report = json_pack("{s:[], s:n}", "lost_names", "error");
                r = *ret_report ? 0 : -ENOMEM;
        }
        if (r < 0) {
                sandbox_free(sb);
                return r;
        }
        *ret_sb = sb;
        return 0;
}

int lifecycle_resume(struct session_manager *mgr, const char *id, struct session **ret_s,
                     struct airlock_error *err)
{
        struct profile_slot *slot = NULL;
        struct session *s = NULL;
        struct sandbox *sb = NULL;
        json_t *row = NULL, *report = NULL;
        const char *state;
        uint64_t t0 = now_ns(), t1 = 0, t2 = 0;
        bool state_lost;
        char cause[sizeof(err->msg)];
        int r;

        if (!mgr->store)
                return -ENOENT;
        pthread_mutex_lock(&mgr->lock);
        if (mgr->stopping) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -ESHUTDOWN, "the daemon is shutting down");
        }
        s = session_table_find(mgr, id);
        if (s && !tenant_scope_sees(s->tenant)) {
                /* Live, and another tenant's: as if there were none. */
                pthread_mutex_unlock(&mgr->lock);
                return -ENOENT;
        }
        s = NULL;
        if (session_table_find(mgr, id)) {
                /* Someone resumed it meanwhile: the caller finds it now. */
                pthread_mutex_unlock(&mgr->lock);
                return session_lookup(mgr, id, ret_s, err);
        }
        row = store_get(mgr->store, id);
        state = json_string_value(json_object_get(row, "state"));
        if (!state || strcmp(state, "stopped") != 0 || !session_row_visible(row)) {
                pthread_mutex_unlock(&mgr->lock);
                json_decref(row);
                return -ENOENT;
        }
        if (mgr->n_sessions + mgr->reserved >= mgr->cfg.max_sessions) {
                pthread_mutex_unlock(&mgr->lock);
                json_decref(row);
                return airlock_error_set(err, -EUSERS,
                                         "the daemon already runs %u sessions, its limit, and "
                                         "cannot resume session %s; stop or end another one",
                                         mgr->cfg.max_sessions, id);
        }
        r = session_profile_slot(mgr, json_string_value(json_object_get(row, "profile")), &slot,
                                 err);
        /* A resumed session is live again: it counts against its tenant's quotas (the caller
         * is its tenant, or internal work with no quotas). */
        if (r >= 0)
                r = session_quota_check_locked(mgr, slot->profile, 1, err);
        if (r >= 0) {
                const char *owner =
                        json_string_value(json_object_get(json_object_get(row, "info"), "tenant"));
                s = session_new_object(mgr, id, slot->profile);
                if (s && owner)
                        (void) snprintf(s->tenant, sizeof(s->tenant), "%s", owner);
                r = s ? session_table_add(mgr, s) : -ENOMEM;
        }
        if (r < 0) {
                pthread_mutex_unlock(&mgr->lock);
                session_unref(s);
                json_decref(row);
                if (r == -ENOMEM || r == -EXFULL)
                        return r;
                /* err->msg is both the cause and the result: copied first, as snprintf's
                 * buffers must not overlap. */
                (void) snprintf(cause, sizeof(cause), "%s", err->msg);
                return airlock_error_set(err, r, "cannot resume session %s: %s", id, cause);
        }
        s->phase = PHASE_RESUMING;
        restore_facts(s, row);
        if (!s->saved && s->exec_count == 0)
                /* It never ran a cell (a crash caught it before its first checkpoint): there
                 * are no variables to miss. */
                s->saved =
                        json_pack("{s:i, s:i, s:i, s:o, s:o, s:n}", "offset", 0, "size", 0, "count",
                                  0, "lost_names", json_array(), "modules", json_object(), "bash");
        pthread_mutex_unlock(&mgr->lock);
        json_decref(row);

        if (json_is_true(json_object_get(s->saved, "vm"))) {
                /* A microVM session saved whole: its own VM back, nothing lost. */
                r = resume_vm(mgr, slot, s, &sb, &report, err);
                t1 = t2 = now_ns();
                goto loaded;
        }
        {
                char unused[SESSION_ID_MAX + 1]; /* the session keeps its own id */
                r = session_fd_room(mgr, 1, err);
                if (r >= 0)
                        r = session_take_sandbox(mgr, slot, &sb, unused, err);
        }
        t1 = now_ns();
        /* Before the restore: unpickling the session's values can run its code. */
        if (r >= 0)
                session_network_bind(s, sb);
        if (r >= 0)
                r = session_apply_env(sb, s->env, s->home, err);
        if (r >= 0 && sandbox_is_vm(sb)) {
                /* A microVM session whose VM was never saved (the daemon ended before its first
                 * checkpoint): a fresh VM, and what it had is lost. */
                report = json_pack("{s:[], s:s?}", "lost_names", "error",
                                   s->exec_count ? "the session's VM was never saved: its "
                                                   "variables and files were lost"
                                                 : NULL);
                r = report ? 0 : -ENOMEM;
        } else if (r >= 0) {
                pthread_mutex_lock(&s->save_lock);
                r = snapshot_load(state_dir(mgr), id, sb, s->saved, &report, err);
                pthread_mutex_unlock(&s->save_lock);
        }
        t2 = now_ns();
loaded:
        if (r < 0) {
                sandbox_free(sb);
                pthread_mutex_lock(&mgr->lock);
                session_table_remove(mgr, s);
                pthread_mutex_unlock(&mgr->lock);
                pthread_mutex_lock(&s->lock);
                s->phase = PHASE_GONE;
                s->gone_stopped = true; /* still stopped on disk: a later call may try again */
                pthread_cond_broadcast(&s->cond);
                pthread_mutex_unlock(&s->lock);
                log_error("session=%s msg=\"cannot resume: %s\"", id, err->msg);
                session_unref(s); /* the table's */
                session_unref(s);
                return r;
        }
        state_lost = json_is_string(json_object_get(report, "error"));
        pthread_mutex_lock(&s->lock);
        s->sb = sb;
        s->phase = PHASE_LIVE;
        s->resume_report = report;
        s->last_used_at = time(NULL);
        s->last_used_ns = now_ns();
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        (void) store_session_live(mgr->store, id);
        audit_emit_owned(
                mgr->cfg.audit, "session.resumed", s->tenant, id,
                json_pack("{s:s, s:b}", "profile", s->profile->name, "state_lost", state_lost));
        log_info("session=%s profile=%s msg=\"session resumed%s\" sandbox_ms=%.1f load_ms=%.1f", id,
                 s->profile->name, state_lost ? " (part of its state lost)" : "", (t1 - t0) / 1e6,
                 (t2 - t1) / 1e6);
        *ret_s = s;
        return 0;
}

/* "5 days", "3 hours", "10 minutes", "20 seconds". */
static void format_duration(uint64_t ms, char *buf, size_t size)
{
        static const struct {
                uint64_t s;
                const char *unit;
        } units[] = { { 86400, "day" }, { 3600, "hour" }, { 60, "minute" }, { 1, "second" } };
        uint64_t secs = ms / 1000;

        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (secs >= units[i].s || i == ELEMENTSOF(units) - 1) {
                        uint64_t n = secs / units[i].s;
                        (void) snprintf(buf, size, "%llu %s%s", (unsigned long long) n,
                                        units[i].unit, n == 1 ? "" : "s");
                        return;
                }
}

void lifecycle_delete_due(struct session_manager *mgr)
{
        json_t *rows = store_due_for_deletion(mgr->store, (long long) time(NULL), 64), *row;
        char after[48], reason[160];
        size_t i;

        format_duration(mgr->cfg.delete_after_ms, after, sizeof(after));
        (void) snprintf(reason, sizeof(reason), "it was deleted %s after it stopped", after);
        json_array_foreach (rows, i, row) {
                const char *id = json_string_value(json_object_get(row, "id"));
                bool resumed;
                pthread_mutex_lock(&mgr->lock);
                resumed = session_table_find(mgr, id) != NULL;
                if (!resumed) {
                        (void) store_session_ended(mgr->store, id, false, reason);
                        session_remember_ended(mgr, id,
                                               json_string_value(json_object_get(
                                                       json_object_get(row, "info"), "tenant")),
                                               false, reason);
                }
                pthread_mutex_unlock(&mgr->lock);
                if (!resumed) {
                        lifecycle_remove_saved(mgr, id);
                        audit_emit_owned(mgr->cfg.audit, "session.deleted",
                                         json_string_value(json_object_get(
                                                 json_object_get(row, "info"), "tenant")),
                                         id, json_pack("{s:s}", "reason", "expired"));
                        log_info("session=%s msg=\"stopped session deleted: %s\"", id, reason);
                }
        }
        json_decref(rows);
}

json_t *lifecycle_describe_row(struct session_manager *mgr, json_t *row)
{
        json_t *info = json_object_get(row, "info");
        json_t *lost = json_object_get(json_object_get(info, "saved"), "lost_names");
        json_t *code_tools = json_object_get(info, "code_tools");
        json_t *approved = json_object_get(info, "approved_tools");
        const char *profile = json_string_value(json_object_get(row, "profile"));
        char created[32], used[32], stopped[32], del[32];
        json_int_t limit = 0;
        uint64_t stop_after = (uint64_t) json_integer_value(json_object_get(info, "stop_after_ms"));
        json_t *tools = json_is_array(code_tools) ? json_incref(code_tools) : json_array();
        json_t *desc;

        pthread_mutex_lock(&mgr->lock);
        for (unsigned i = 0; profile && i < mgr->n_profiles; i++)
                if (strcmp(mgr->profiles[i]->profile->name, profile) == 0) {
                        const struct profile *p = mgr->profiles[i]->profile;
                        limit = (json_int_t) p->limits.memory_bytes;
                        /* Not saved: the session had its profile's (as a live one shows). */
                        for (char **t = p->code_tools; !json_is_array(code_tools) && t && *t; t++)
                                (void) json_array_append_new(tools, json_string(*t));
                }
        pthread_mutex_unlock(&mgr->lock);
        session_format_time((time_t) json_integer_value(json_object_get(row, "created_at")),
                            created);
        session_format_time((time_t) json_integer_value(json_object_get(info, "last_used_at")),
                            used);
        session_format_time((time_t) json_integer_value(json_object_get(row, "stopped_at")),
                            stopped);
        session_format_time((time_t) json_integer_value(json_object_get(row, "delete_at")), del);
        desc = json_pack(
                "{s:O, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:{s:f, s:I, "
                "s:I}, s:o, s:o}",
                "id", json_object_get(row, "id"), "profile", profile ? profile : "", "state",
                "stopped", "created_at", created, "last_used_at", used, "stop_after_s",
                (json_int_t) (stop_after / 1000), "idle_timeout_s",
                (json_int_t) (stop_after / 1000), "stopped_at", stopped, "delete_at", del,
                "execution_count", json_integer_value(json_object_get(info, "execution_count")),
                "lost_names", json_is_array(lost) ? json_incref(lost) : json_array(), "usage",
                "cpu_ms", json_number_value(json_object_get(info, "cpu_ms")), "peak_memory_bytes",
                (json_int_t) 0, "memory_limit_bytes", limit, "code_tools", tools, "approved_tools",
                json_is_array(approved) ? json_incref(approved) : json_array());
        if (desc)
                session_describe_patchable(
                        desc, json_object_get(info, "metadata"),
                        (uint64_t) json_integer_value(json_object_get(info, "timeout_ms")),
                        (time_t) json_integer_value(json_object_get(info, "stops_at")));
        if (desc)
                session_describe_node(desc);
        return desc;
}

int session_stop(struct session_manager *mgr, const char *id, json_t **ret_desc,
                 struct airlock_error *err)
{
        struct session *s = NULL;
        int r;

        if (!mgr->store)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "this daemon has no state directory, so its sessions "
                                         "cannot stop");
        if (session_find(mgr, id, &s) == 0) {
                r = lifecycle_stop(s, false, err);
                session_unref(s);
                if (r < 0)
                        return r;
        }
        json_t *desc = session_describe_id(mgr, id);
        if (!desc)
                return -ENOENT;
        if (ret_desc)
                *ret_desc = desc;
        else
                json_decref(desc);
        return 0;
}

int session_resume(struct session_manager *mgr, const char *id, json_t **ret_desc,
                   struct airlock_error *err)
{
        struct session *s = NULL;
        bool was_live = session_find(mgr, id, &s) == 0;
        json_t *desc, *report;
        int r;

        if (was_live)
                session_unref(s);
        r = session_lookup(mgr, id, &s, err);
        if (r < 0)
                return r;
        desc = session_describe(s);
        pthread_mutex_lock(&s->lock);
        /* The report stays for the first execution; this answer only repeats it. */
        report = was_live ? NULL : json_incref(s->resume_report);
        pthread_mutex_unlock(&s->lock);
        session_unref(s);
        if (!desc) {
                json_decref(report);
                return -ENOMEM;
        }
        json_object_set_new(desc, "resumed", json_boolean(report != NULL));
        json_object_set(desc, "lost_names",
                        report ? json_object_get(report, "lost_names")
                               : json_object_get(desc, "lost_names"));
        if (report && json_is_string(json_object_get(report, "error")))
                json_object_set(desc, "resume_error", json_object_get(report, "error"));
        json_decref(report);
        *ret_desc = desc;
        return 0;
}

/* A file holding the parent's saved state for the children to read: nameless, in the state
 * directory (or in memory without one), gone when the last fd closes. */
static int fork_state_file(struct session_manager *mgr)
{
        int fd = -1;

        if (state_dir(mgr))
                fd = open(state_dir(mgr), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                fd = memfd_create("airlock-fork", MFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Holds (on) or lets go of the refills and warm-ups of slot's pool while a fork's children
 * load: each is a zygote fork and ~300 page faults, which would take the CPUs from them. */
static void fork_hold_pool(struct session_manager *mgr, struct profile_slot *slot, bool on)
{
        pthread_mutex_lock(&mgr->lock);
        if (on)
                slot->forking++;
        else if (slot->forking > 0 && --slot->forking == 0)
                pthread_cond_signal(&mgr->wake);
        pthread_mutex_unlock(&mgr->lock);
}

/* Whether the session's /work holds its pip site directory (SANDBOX_SITE_BASE). */
static bool has_site_dir(struct sandbox *sb)
{
        _cleanup_close_ int work = workspace_open(sb, NULL);

        return work >= 0 && faccessat(work, SANDBOX_SITE_BASE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A new open file description on the same file, with its own offset. */
static int reopen_ro(int fd)
{
        char path[64];
        int r;

        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        r = open(path, O_RDONLY | O_CLOEXEC);
        return r < 0 ? -errno : r;
}

int session_fork(struct session_manager *mgr, const char *id, unsigned n, json_t **ret_sessions,
                 struct airlock_error *err)
{
        struct sandbox *sbs[SESSION_FORK_MAX] = { 0 };
        char ids[SESSION_FORK_MAX][SESSION_ID_MAX + 1];
        json_t *reports[SESSION_FORK_MAX] = { 0 };
        struct profile_slot *slot = NULL;
        struct session *parent = NULL;
        _cleanup_(egress_policy_freep) struct egress_policy *network = NULL;
        bool network_lost = false;
        _cleanup_close_ int state = -EBADF;
        json_t *meta = NULL, *out = NULL;
        uint64_t bytes = 0, room = 0;
        unsigned made = 0;
        bool reserved = false, site_first = false, shared = false, held = false;
        struct quota_hold hold = { 0 };
        uint64_t t[6] = { now_ns() };
        int r;

        if (n < 1 || n > SESSION_FORK_MAX)
                return airlock_error_set(err, -EINVAL, "n: must be from 1 to %d", SESSION_FORK_MAX);
        r = session_lookup(mgr, id, &parent, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&parent->lock);
        r = enter_saving_locked(parent);
        pthread_mutex_unlock(&parent->lock);
        if (r != 0) {
                session_unref(parent);
                return r == 1 ? airlock_error_set(err, -EAGAIN,
                                                  "session %s stopped while it was forked; "
                                                  "try again",
                                                  id)
                              : airlock_error_set(err, -EBUSY,
                                                  "session %s is running an execution; wait "
                                                  "for it or interrupt it before forking",
                                                  id);
        }

        /* The children's policy (NULL: the profile's), set once the session is saving. */
        pthread_mutex_lock(&parent->lock);
        if (parent->network && !(network = egress_policy_copy(parent->network)))
                r = -ENOMEM;
        network_lost = parent->network_lost;
        pthread_mutex_unlock(&parent->lock);
        if (r >= 0)
                r = session_fd_room(mgr, n, err);
        if (r < 0)
                goto out;
        pthread_mutex_lock(&mgr->lock);
        if (mgr->n_sessions + mgr->reserved + n > mgr->cfg.max_sessions) {
                r = airlock_error_set(err, -EUSERS,
                                      "%u more sessions would pass the daemon's limit of %u", n,
                                      mgr->cfg.max_sessions);
        } else {
                /* The quota check and the hold of the places are one step: a create of the
                 * same tenant that comes while the children load counts them. */
                r = session_quota_hold_locked(mgr, parent->profile, n, parent->tenant, &hold, err);
                if (r >= 0) {
                        mgr->reserved += n;
                        reserved = true;
                        r = session_profile_slot(mgr, parent->profile->name, &slot, err);
                }
        }
        pthread_mutex_unlock(&mgr->lock);
        if (r < 0)
                goto out;

        if (sandbox_is_vm(parent->sb)) {
                state = fork_state_file(mgr);
                if (state < 0) {
                        r = airlock_error_set(err, state, "cannot make a file for the fork: %s",
                                              strerror(-state));
                        goto out;
                }
                /* The parent's whole VM, saved once (it goes on running), restored n times:
                 * each child is the parent, memory, threads and sockets, with its own
                 * randomness. */
                r = sandbox_vm_save(parent->sb, state, true, &bytes, err);
                if (r >= 0 && bytes > mgr->cfg.max_stopped_bytes)
                        r = airlock_error_set(err, -EFBIG,
                                              "the session's VM takes %llu bytes saved, more "
                                              "than the daemon's limit (%llu)",
                                              (unsigned long long) bytes,
                                              (unsigned long long) mgr->cfg.max_stopped_bytes);
                t[1] = now_ns();
                for (made = 0; r >= 0 && made < n; made++) {
                        int fd = reopen_ro(state);
                        session_make_id(ids[made]);
                        r = fd < 0 ? airlock_error_set(err, fd,
                                                       "cannot reopen the fork's state: %s",
                                                       strerror(-fd))
                                   : session_vm_spawn(mgr, slot, ids[made], fd, &sbs[made], err);
                        if (fd >= 0)
                                (void) close(fd);
                        /* The child's names and the parent's policy before its guest runs on
                         * (its code is the parent's), as below. */
                        if (r >= 0)
                                session_network_bind_as(
                                        sbs[made], ids[made], parent->tenant, parent->profile,
                                        network_lost ? session_network_none() : network);
                }
                if (r < 0)
                        goto out;
                t[2] = t[3] = now_ns();
                leave_saving(parent);
                for (unsigned i = 0; i < n; i++) {
                        r = sandbox_vm_ready(sbs[i], true, err);
                        if (r >= 0)
                                reports[i] = json_pack("{s:[], s:n}", "lost_names", "error");
                        if (r >= 0 && !reports[i])
                                r = -ENOMEM;
                        if (r < 0)
                                goto out;
                }
                t[4] = now_ns();
                goto children;
        }
        /* The shared save when the parent's memory has room for a second copy of its state
         * (docs/LIFECYCLE.md, "Fork"), else, or when the state turns out not to fit, the
         * classic one into a file of the daemon's that each child copies from. */
        if (sandbox_share_room(parent->sb, &room) >= 0 && room > 0) {
                if (room > mgr->cfg.max_stopped_bytes)
                        room = mgr->cfg.max_stopped_bytes;
                state = snapshot_shared_file(room);
                if (state < 0) {
                        r = airlock_error_set(err, state, "cannot make a file for the fork: %s",
                                              strerror(-state));
                        goto out;
                }
                r = sandbox_snapshot_shared(parent->sb, state, room, &meta, &bytes, err);
                if (r >= 0)
                        r = snapshot_shared_seal(state, bytes, err);
                if (r >= 0)
                        shared = true;
                else if (r == -ENOSPC) {
                        log_debug("session=%s msg=\"%s: the fork copies\"", id, err->msg);
                        safe_close_fd(TAKE_FD(state));
                } else
                        goto out;
        }
        if (!shared) {
                state = fork_state_file(mgr);
                if (state < 0) {
                        r = airlock_error_set(err, state, "cannot make a file for the fork: %s",
                                              strerror(-state));
                        goto out;
                }
                r = sandbox_snapshot(parent->sb, state, mgr->cfg.max_stopped_bytes, &meta, &bytes,
                                     err);
                if (r < 0)
                        goto out;
        }
        t[1] = now_ns();

        /* Each child starts loading as soon as it has a sandbox, before any is waited for:
         * they unpickle in parallel while the next ones start and while the daemon copies
         * /work into each. Unless the parent installed packages with pip: their modules must
         * be in the child's /work before it imports them again, so /work goes first. */
        site_first = has_site_dir(parent->sb);
        fork_hold_pool(mgr, slot, true);
        held = true;
        for (made = 0; made < n; made++) {
                int fd;
                r = session_take_sandbox(mgr, slot, &sbs[made], ids[made], err);
                /* The child's id, tenant and the parent's policy before the restore, which
                 * runs the parent's code (unpickling), not the profile's wider one. */
                if (r >= 0)
                        session_network_bind_as(sbs[made], ids[made], parent->tenant,
                                                parent->profile,
                                                network_lost ? session_network_none() : network);
                if (r >= 0)
                        r = session_apply_env(sbs[made], parent->env, parent->home, err);
                if (r >= 0 && site_first)
                        r = workspace_copy(parent->sb, sbs[made], err);
                if (r < 0)
                        goto out;
                fd = reopen_ro(state);
                r = fd < 0 ? airlock_error_set(err, fd, "cannot reopen the fork's state: %s",
                                               strerror(-fd))
                           : sandbox_restore_send(sbs[made], fd, meta, true, err);
                if (r < 0)
                        goto out;
        }
        t[2] = now_ns();
        for (unsigned i = 0; i < n && !site_first; i++) {
                r = workspace_copy(parent->sb, sbs[i], err);
                if (r < 0)
                        goto out;
        }
        t[3] = now_ns();
        leave_saving(parent); /* the parent goes on while the children finish loading */
        for (unsigned i = 0; i < n; i++) {
                r = sandbox_restore_wait(sbs[i], &reports[i], err);
                if (r < 0)
                        goto out;
        }
        t[4] = now_ns();
        fork_hold_pool(mgr, slot, false);
        held = false;

children:
        out = json_array();
        for (unsigned i = 0; i < n; i++) {
                _cleanup_free_ char *info = NULL;
                struct session *c;
                json_t *desc;

                c = session_new_object(mgr, ids[i], parent->profile);
                if (!c) {
                        r = -ENOMEM;
                        goto out;
                }
                c->sb = TAKE_PTR(sbs[i]);
                pthread_mutex_lock(&parent->lock);
                c->stop_after_ms = parent->stop_after_ms;
                c->exec_count = parent->exec_count;
                memcpy(c->tenant, parent->tenant, sizeof(c->tenant));
                c->env = parent->env ? strv_copy(parent->env) : NULL;
                c->home = parent->home ? strdup(parent->home) : NULL;
                c->code_tools = parent->code_tools ? strv_copy(parent->code_tools) : NULL;
                c->approved_tools =
                        parent->approved_tools ? strv_copy(parent->approved_tools) : NULL;
                c->network = network ? egress_policy_copy(network) : NULL;
                c->network_lost = network_lost;
                /* Labels, default timeout and lifetime go with the copy. */
                c->metadata = parent->metadata ? json_deep_copy(parent->metadata) : NULL;
                c->timeout_ms = parent->timeout_ms;
                c->stops_at = parent->stops_at;
                pthread_mutex_unlock(&parent->lock);
                if (network && !c->network) {
                        /* Without it the child would get its profile's wider network. */
                        session_unref(c);
                        r = -ENOMEM;
                        goto out;
                }
                session_network_bind(c, c->sb);
                c->dirty = true; /* its first checkpoint saves its own copy */
                pthread_mutex_lock(&mgr->lock);
                mgr->reserved--;
                hold.n--;
                r = session_table_add(mgr, c);
                pthread_mutex_unlock(&mgr->lock);
                if (r < 0) {
                        session_unref(c);
                        goto out;
                }
                info = session_info_json(c);
                (void) store_session_created(mgr->store, c->id, c->profile->name, info);
                desc = session_describe(c);
                if (desc) {
                        json_object_set(desc, "lost_names",
                                        json_object_get(reports[i], "lost_names"));
                        /* As a resume says it: the child lives on without the variables. */
                        if (json_is_string(json_object_get(reports[i], "error")))
                                json_object_set(desc, "resume_error",
                                                json_object_get(reports[i], "error"));
                }
                json_array_append_new(out, desc);
                log_info("session=%s parent=%s msg=\"session forked\"", c->id, id);
                session_unref(c);
        }
        reserved = false; /* every place went to a child */
        {
                json_t *children = json_array(), *c;
                size_t k;

                json_array_foreach (out, k, c)
                        json_array_append(children, json_object_get(c, "id"));
                audit_emit_scoped(mgr->cfg.audit, "session.forked", id,
                                  json_pack("{s:o*}", "children", children));
        }
        t[5] = now_ns();
        log_info("session=%s msg=\"forked into %u sessions (%llu bytes of state, %s)\" "
                 "save_ms=%.1f sandboxes_ms=%.1f send_copy_ms=%.1f load_ms=%.1f register_ms=%.1f",
                 id, n, (unsigned long long) bytes, shared ? "shared" : "copied",
                 (t[1] - t[0]) / 1e6, (t[2] - t[1]) / 1e6, (t[3] - t[2]) / 1e6, (t[4] - t[3]) / 1e6,
                 (t[5] - t[4]) / 1e6);
        *ret_sessions = TAKE_PTR(out);
        r = 0;
out:
        if (held)
                fork_hold_pool(mgr, slot, false);
        leave_saving(parent);
        for (unsigned i = 0; i < SESSION_FORK_MAX; i++) {
                sandbox_free(sbs[i]);
                json_decref(reports[i]);
        }
        if (reserved) {
                pthread_mutex_lock(&mgr->lock);
                /* The places the loop above did not hand to a child. */
                mgr->reserved -= n - (unsigned) json_array_size(out);
                pthread_mutex_unlock(&mgr->lock);
        }
        if (hold.profile) {
                pthread_mutex_lock(&mgr->lock);
                session_quota_release_locked(mgr, &hold);
                pthread_mutex_unlock(&mgr->lock);
        }
        json_decref(out);
        json_decref(meta);
        session_unref(parent);
        return r;
}
