/* The session store: one SQLite database in the state directory recording every session's
 * life (created, ended, why). Sessions' processes cannot outlive the daemon, but their records
 * do: after a crash or restart, a call on an old session id still learns that the session was
 * lost and why, instead of a bare "not found". Writes are small and synchronous (WAL mode), on
 * the create and end paths only, never on execute. */
#include "session-internal.h"

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct store {
        pthread_mutex_t lock;
        sqlite3 *db;
};

static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;"
                             "CREATE TABLE IF NOT EXISTS sessions ("
                             "  id TEXT PRIMARY KEY,"
                             "  profile TEXT NOT NULL,"
                             "  created_at INTEGER NOT NULL,"
                             "  ended_at INTEGER,"
                             "  lost INTEGER NOT NULL DEFAULT 0,"
                             "  reason TEXT"
                             ");"
                             "CREATE INDEX IF NOT EXISTS sessions_ended ON sessions(ended_at);";

int store_open(const char *state_dir, struct store **ret_store, struct airlock_error *err)
{
        struct store *st;
        char path[4096];
        char *msg = NULL;
        int rc;

        st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        pthread_mutex_init(&st->lock, NULL);
        (void) snprintf(path, sizeof(path), "%s/sessions.db", state_dir);
        rc = sqlite3_open_v2(path, &st->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                     SQLITE_OPEN_EXRESCODE,
                             NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(st->db, schema, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                int r = airlock_error_set(err, -EIO, "cannot open the session store '%s': %s", path,
                                          msg ? msg : sqlite3_errmsg(st->db));
                sqlite3_free(msg);
                store_close(st);
                return r;
        }
        (void) sqlite3_busy_timeout(st->db, 2000);
        *ret_store = st;
        return 0;
}

void store_close(struct store *st)
{
        if (!st)
                return;
        (void) sqlite3_close(st->db);
        pthread_mutex_destroy(&st->lock);
        free(st);
}

/* Runs one statement with text/integer parameters given as a format of 's' and 'i'. */
static int store_exec(struct store *st, const char *sql, const char *types, ...)
{
        sqlite3_stmt *stmt = NULL;
        va_list ap;
        int rc;

        if (!st)
                return 0;
        pthread_mutex_lock(&st->lock);
        rc = sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL);
        va_start(ap, types);
        for (int i = 0; rc == SQLITE_OK && types[i]; i++) {
                if (types[i] == 's')
                        rc = sqlite3_bind_text(stmt, i + 1, va_arg(ap, const char *), -1,
                                               SQLITE_TRANSIENT);
                else
                        rc = sqlite3_bind_int64(stmt, i + 1, va_arg(ap, long long));
        }
        va_end(ap);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(stmt);
                if (rc == SQLITE_DONE)
                        rc = SQLITE_OK;
        }
        if (rc != SQLITE_OK)
                log_warn("msg=\"session store: %s\"", sqlite3_errmsg(st->db));
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int store_mark_all_lost(struct store *st, const char *reason)
{
        return store_exec(st,
                          "UPDATE sessions SET ended_at = ?1, lost = 1, reason = ?2 "
                          "WHERE ended_at IS NULL",
                          "is", (long long) time(NULL), reason);
}

int store_session_created(struct store *st, const char *id, const char *profile)
{
        return store_exec(
                st, "INSERT OR REPLACE INTO sessions (id, profile, created_at) VALUES (?1, ?2, ?3)",
                "ssi", id, profile, (long long) time(NULL));
}

int store_session_ended(struct store *st, const char *id, bool lost, const char *reason)
{
        return store_exec(st,
                          "UPDATE sessions SET ended_at = ?1, lost = ?2, reason = ?3 WHERE id = ?4",
                          "iiss", (long long) time(NULL), (long long) lost, reason, id);
}

json_t *store_describe_ended(struct store *st, const char *id)
{
        sqlite3_stmt *stmt = NULL;
        json_t *o = NULL;

        if (!st)
                return NULL;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(st->db,
                               "SELECT lost, reason FROM sessions WHERE id = ?1 AND ended_at IS "
                               "NOT NULL",
                               -1, &stmt, NULL) == SQLITE_OK &&
            sqlite3_bind_text(stmt, 1, id, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
                const unsigned char *reason = sqlite3_column_text(stmt, 1);
                o = json_pack("{s:s, s:s, s:s}", "id", id, "state",
                              sqlite3_column_int(stmt, 0) ? "lost" : "ended", "reason",
                              reason ? (const char *) reason : "unknown");
        }
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return o;
}

int store_prune(struct store *st, long long older_than_s)
{
        return store_exec(st, "DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?1",
                          "i", (long long) time(NULL) - older_than_s);
}
