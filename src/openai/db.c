/* openai.db: the metadata of the Files API and of containers, in the daemon's state directory
 * so that it outlives a restart. One connection, one statement at a time under db_lock;
 * writes are small (an upload, a container, a file first seen), never on an execution. The
 * contents of files are not here: they are files of their own (files.c) or in /work. */
#include "openai-internal.h"

#include "base/log.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>

/* files: the Files API, each file its tenant's (owner). containers: what the Containers API was
 * told of a session (its name and memory_limit); a session made otherwise has no row and is still a
 * container. container_files: the ids given to paths of a container's /work. */
static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;"
                             "CREATE TABLE IF NOT EXISTS files ("
                             "  id TEXT PRIMARY KEY,"
                             "  filename TEXT NOT NULL,"
                             "  purpose TEXT NOT NULL,"
                             "  bytes INTEGER NOT NULL,"
                             "  created_at INTEGER NOT NULL,"
                             "  owner TEXT NOT NULL DEFAULT 'default'"
                             ");"
                             "CREATE INDEX IF NOT EXISTS files_created ON files(created_at);"
                             "CREATE TABLE IF NOT EXISTS containers ("
                             "  session_id TEXT PRIMARY KEY,"
                             "  name TEXT NOT NULL,"
                             "  memory_limit TEXT,"
                             "  created_at INTEGER NOT NULL"
                             ");"
                             "CREATE TABLE IF NOT EXISTS container_files ("
                             "  id TEXT PRIMARY KEY,"
                             "  session_id TEXT NOT NULL,"
                             "  path TEXT NOT NULL,"
                             "  source TEXT NOT NULL,"
                             "  created_at INTEGER NOT NULL,"
                             "  UNIQUE (session_id, path)"
                             ");";

int db_open(struct openai *oa, struct airlock_error *err)
{
        char path[4096];
        char *msg = NULL;
        int rc;

        if ((size_t) snprintf(path, sizeof(path), "%s/openai.db", oa->dir) >= sizeof(path))
                return airlock_error_set(err, -ENAMETOOLONG,
                                         "the state directory's path is too long");
        rc = sqlite3_open_v2(path, &oa->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                     SQLITE_OPEN_EXRESCODE,
                             NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(oa->db, schema, NULL, NULL, &msg);
        if (rc == SQLITE_OK)
                rc = tenant_owner_column_add(oa->db, "files", &msg);
        if (rc != SQLITE_OK) {
                int r = airlock_error_set(err, -EIO, "cannot open '%s': %s", path,
                                          msg ? msg : sqlite3_errmsg(oa->db));
                sqlite3_free(msg);
                db_close(oa);
                return r;
        }
        (void) sqlite3_busy_timeout(oa->db, 2000);
        return 0;
}

void db_close(struct openai *oa)
{
        if (oa->db)
                (void) sqlite3_close(oa->db);
        oa->db = NULL;
}

static json_t *column_json(sqlite3_stmt *stmt, int i)
{
        switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_INTEGER:
                return json_integer(sqlite3_column_int64(stmt, i));
        case SQLITE_NULL:
                return json_null();
        default:
                return json_string((const char *) sqlite3_column_text(stmt, i));
        }
}

/* The statement's parameters from ap, as types says. Returns SQLite's result code. */
static int bind_all(sqlite3_stmt *stmt, const char *types, va_list ap)
{
        int rc = SQLITE_OK;

        for (int i = 0; rc == SQLITE_OK && types[i]; i++) {
                if (types[i] == 's') {
                        const char *s = va_arg(ap, const char *);
                        rc = s ? sqlite3_bind_text(stmt, i + 1, s, -1, SQLITE_TRANSIENT)
                               : sqlite3_bind_null(stmt, i + 1);
                } else {
                        rc = sqlite3_bind_int64(stmt, i + 1, va_arg(ap, long long));
                }
        }
        return rc;
}

/* Runs sql, appending each row to rows when it is not NULL. Returns 0 or -EIO. */
static int run(struct openai *oa, json_t *rows, const char *sql, const char *types, va_list ap)
{
        sqlite3_stmt *stmt = NULL;
        int rc;

        pthread_mutex_lock(&oa->db_lock);
        rc = sqlite3_prepare_v2(oa->db, sql, -1, &stmt, NULL);
        if (rc == SQLITE_OK)
                rc = bind_all(stmt, types, ap);
        while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                json_t *row = rows ? json_object() : NULL;

                rc = SQLITE_OK;
                if (!rows)
                        continue;
                for (int i = 0; row && i < sqlite3_column_count(stmt); i++)
                        json_object_set_new(row, sqlite3_column_name(stmt, i),
                                            column_json(stmt, i));
                if (!row || json_array_append_new(rows, row) < 0)
                        rc = SQLITE_NOMEM;
        }
        if (rc == SQLITE_DONE)
                rc = SQLITE_OK;
        if (rc != SQLITE_OK)
                log_warn("msg=\"openai store: %s\"", sqlite3_errmsg(oa->db));
        sqlite3_finalize(stmt);
        pthread_mutex_unlock(&oa->db_lock);
        return rc == SQLITE_OK ? 0 : -EIO;
}

int db_exec(struct openai *oa, const char *sql, const char *types, ...)
{
        va_list ap;
        int r;

        va_start(ap, types);
        r = run(oa, NULL, sql, types, ap);
        va_end(ap);
        return r;
}

static json_t *query_v(struct openai *oa, const char *sql, const char *types, va_list ap)
{
        json_t *rows = json_array();

        if (rows && run(oa, rows, sql, types, ap) < 0) {
                json_decref(rows);
                return NULL;
        }
        return rows;
}

json_t *db_query(struct openai *oa, const char *sql, const char *types, ...)
{
        json_t *rows;
        va_list ap;

        va_start(ap, types);
        rows = query_v(oa, sql, types, ap);
        va_end(ap);
        return rows;
}

json_t *db_query_one(struct openai *oa, const char *sql, const char *types, ...)
{
        json_t *rows, *row;
        va_list ap;

        va_start(ap, types);
        rows = query_v(oa, sql, types, ap);
        va_end(ap);
        row = json_incref(json_array_get(rows, 0));
        json_decref(rows);
        return row;
}
