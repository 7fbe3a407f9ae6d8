/* The session store: one SQLite database in the state directory recording every session's
 * life: live, stopped (its state on disk beside the database, see snapshot.h), or ended and
 * why. Stopped sessions live only here, not in memory, so ten thousand of them cost the daemon
 * nothing; a session that was live when the daemon crashed is found here at the next start and
 * becomes stopped, resumable from its last checkpoint. Writes are small and synchronous (WAL),
 * on create, checkpoint, stop, resume and end, never on execute. */
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

/* state is 'live', 'stopped', or NULL once the session ended (ended_at, lost, reason). info
 * is the session's own facts as JSON (see session.c); the store only keeps it. */
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

/* Columns added by the session lifecycle; a store made by an older daemon gains them. */
static const char *const added_columns[] = {
        "ALTER TABLE sessions ADD COLUMN state TEXT",
        "ALTER TABLE sessions ADD COLUMN stopped_at INTEGER",
        "ALTER TABLE sessions ADD COLUMN delete_at INTEGER",
        "ALTER TABLE sessions ADD COLUMN info TEXT",
};
static const char schema_v2[] =
        "CREATE INDEX IF NOT EXISTS sessions_state ON sessions(state, delete_at);"
        /* Rows an older daemon left live were lost with it. */
        "UPDATE sessions SET ended_at = strftime('%s','now'), lost = 1, "
        "  reason = 'the daemon stopped while the session was live' "
        "WHERE ended_at IS NULL AND state IS NULL;"
        "PRAGMA user_version = 2;";

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
        for (size_t i = 0; rc == SQLITE_OK && i < sizeof(added_columns) / sizeof(*added_columns);
             i++)
                /* "duplicate column" when the store has it already: fine. */
                (void) sqlite3_exec(st->db, added_columns[i], NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(st->db, schema_v2, NULL, NULL, &msg);
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

static json_t *row_json(sqlite3_stmt *stmt);

/* Runs one statement with text/integer parameters given as a format of 's' and 'i', appending
 * its rows (row_json()) to rows when rows is not NULL. Returns SQLite's result code. */
static int run_v(struct store *st, json_t *rows, const char *sql, const char *types, va_list ap)
{
        sqlite3_stmt *stmt = NULL;
        int rc;

        pthread_mutex_lock(&st->lock);
        rc = sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL);
        for (int i = 0; rc == SQLITE_OK && types[i]; i++) {
                if (types[i] == 's')
                        rc = sqlite3_bind_text(stmt, i + 1, va_arg(ap, const char *), -1,
                                               SQLITE_TRANSIENT);
                else
                        rc = sqlite3_bind_int64(stmt, i + 1, va_arg(ap, long long));
        }
        while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                json_t *row = rows ? row_json(stmt) : NULL;
                if (row)
                        json_array_append_new(rows, row);
                rc = SQLITE_OK;
        }
        if (rc == SQLITE_DONE)
                rc = SQLITE_OK;
        if (rc != SQLITE_OK)
                log_warn("msg=\"session store: %s\"", sqlite3_errmsg(st->db));
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return rc;
}

static int store_exec(struct store *st, const char *sql, const char *types, ...)
{
        va_list ap;
        int rc;

        if (!st)
                return 0;
        va_start(ap, types);
        rc = run_v(st, NULL, sql, types, ap);
        va_end(ap);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int store_session_created(struct store *st, const char *id, const char *profile, const char *info)
{
        return store_exec(st,
                          "INSERT OR REPLACE INTO sessions (id, profile, created_at, state, info) "
                          "VALUES (?1, ?2, ?3, 'live', ?4)",
                          "ssis", id, profile, (long long) time(NULL), info);
}

int store_session_update(struct store *st, const char *id, const char *info)
{
        return store_exec(st, "UPDATE sessions SET info = ?1 WHERE id = ?2", "ss", info, id);
}

int store_session_stopped(struct store *st, const char *id, long long stopped_at,
                          long long delete_at, const char *info)
{
        return store_exec(st,
                          "UPDATE sessions SET state = 'stopped', stopped_at = ?1, delete_at = ?2, "
                          "info = ?3 WHERE id = ?4",
                          "iiss", stopped_at, delete_at, info, id);
}

int store_session_live(struct store *st, const char *id)
{
        return store_exec(st,
                          "UPDATE sessions SET state = 'live', stopped_at = NULL, delete_at = "
                          "NULL WHERE id = ?1",
                          "s", id);
}

int store_session_ended(struct store *st, const char *id, bool lost, const char *reason)
{
        return store_exec(st,
                          "UPDATE sessions SET state = NULL, stopped_at = NULL, delete_at = NULL, "
                          "ended_at = ?1, lost = ?2, reason = ?3 WHERE id = ?4",
                          "iiss", (long long) time(NULL), (long long) lost, reason, id);
}

int store_recover(struct store *st, long long now, long long delete_after_s)
{
        return store_exec(st,
                          "UPDATE sessions SET state = 'stopped', stopped_at = ?1, delete_at = ?2 "
                          "WHERE state = 'live'",
                          "ii", now, now + delete_after_s);
}

#define ROW_COLUMNS "id, profile, created_at, state, stopped_at, delete_at, info"

/* One row as {id, profile, created_at, state, stopped_at, delete_at, info}: integers as
 * integers (or null), info parsed (or an empty object). */
static json_t *row_json(sqlite3_stmt *stmt)
{
        json_t *info = NULL;
        const unsigned char *text = sqlite3_column_text(stmt, 6);

        if (text)
                info = json_loads((const char *) text, 0, NULL);
        if (!json_is_object(info)) {
                json_decref(info);
                info = json_object();
        }
#define INT_OR_NULL(i)                                                                             \
        (sqlite3_column_type(stmt, i) == SQLITE_NULL                                               \
                 ? json_null()                                                                     \
                 : json_integer(sqlite3_column_int64(stmt, i)))
        return json_pack("{s:s, s:s, s:o, s:s?, s:o, s:o, s:o}", "id",
                         (const char *) sqlite3_column_text(stmt, 0), "profile",
                         (const char *) sqlite3_column_text(stmt, 1), "created_at", INT_OR_NULL(2),
                         "state", (const char *) sqlite3_column_text(stmt, 3), "stopped_at",
                         INT_OR_NULL(4), "delete_at", INT_OR_NULL(5), "info", info);
#undef INT_OR_NULL
}

/* Runs a query with text/integer parameters ('s', 'i') and returns its rows as row_json(). */
static json_t *store_rows(struct store *st, const char *sql, const char *types, ...)
{
        json_t *rows = json_array();
        va_list ap;

        if (!st || !rows)
                return rows;
        va_start(ap, types);
        (void) run_v(st, rows, sql, types, ap);
        va_end(ap);
        return rows;
}

json_t *store_get(struct store *st, const char *id)
{
        json_t *rows = store_rows(st,
                                  "SELECT " ROW_COLUMNS " FROM sessions WHERE id = ?1 AND state IS "
                                  "NOT NULL",
                                  "s", id);
        json_t *row = json_incref(json_array_get(rows, 0));

        json_decref(rows);
        return row;
}

json_t *store_list_stopped(struct store *st)
{
        return store_rows(st,
                          "SELECT " ROW_COLUMNS " FROM sessions WHERE state = 'stopped' "
                          "ORDER BY stopped_at",
                          "");
}

json_t *store_due_for_deletion(struct store *st, long long now, unsigned max)
{
        return store_rows(st,
                          "SELECT " ROW_COLUMNS " FROM sessions WHERE state = 'stopped' AND "
                          "delete_at <= ?1 ORDER BY delete_at LIMIT ?2",
                          "ii", now, (long long) max);
}

json_t *store_describe_ended(struct store *st, const char *id)
{
        sqlite3_stmt *stmt = NULL;
        json_t *o = NULL;

        if (!st)
                return NULL;
        pthread_mutex_lock(&st->lock);
        if (sqlite3_prepare_v2(st->db,
                               "SELECT lost, reason, json_extract(info, '$.tenant') FROM "
                               "sessions WHERE id = ?1 AND ended_at IS NOT NULL AND state IS NULL",
                               -1, &stmt, NULL) == SQLITE_OK &&
            sqlite3_bind_text(stmt, 1, id, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
                const unsigned char *reason = sqlite3_column_text(stmt, 1);
                const unsigned char *tenant = sqlite3_column_text(stmt, 2);
                /* "tenant": whose it was, for the caller to check (no info: "default"). */
                o = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "state",
                              sqlite3_column_int(stmt, 0) ? "lost" : "ended", "reason",
                              reason ? (const char *) reason : "unknown", "tenant",
                              tenant ? (const char *) tenant : "default");
        }
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return o;
}

int store_prune(struct store *st, long long older_than_s)
{
        return store_exec(st,
                          "DELETE FROM sessions WHERE state IS NULL AND ended_at IS NOT NULL AND "
                          "ended_at < ?1",
                          "i", (long long) time(NULL) - older_than_s);
}
