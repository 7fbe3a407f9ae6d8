/* The Responses API's SQLite store (store.h): one row per stored response, its three
 * parts as JSON text. Its own database file, apart from the session store and the Files API's,
 * so that each can change its schema alone. Writes happen once per response, after the model
 * answered, never while it runs. */
#include "store.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct responses_store {
        pthread_mutex_t lock;
        sqlite3 *db;
        unsigned puts; /* since the last prune */
};

/* Pruned on open and then once every this many writes. */
#define PRUNE_EVERY 256

static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;"
                             "CREATE TABLE IF NOT EXISTS responses ("
                             "  id TEXT PRIMARY KEY,"
                             "  created_at INTEGER NOT NULL,"
                             "  response TEXT NOT NULL,"
                             "  input_items TEXT NOT NULL,"
                             "  state TEXT NOT NULL,"
                             "  owner TEXT NOT NULL DEFAULT 'default'"
                             ");"
                             "CREATE INDEX IF NOT EXISTS responses_created ON "
                             "responses(created_at);";

static long long keep_since(void)
{
        return (long long) time(NULL) - (long long) RESPONSES_KEEP_DAYS * 24 * 3600;
}

int responses_store_open(const char *state_dir, struct responses_store **ret_store,
                         struct airlock_error *err)
{
        struct responses_store *st;
        char path[4096];
        char *msg = NULL;
        int rc, fd;

        if (state_dir) {
                if (snprintf(path, sizeof(path), "%s/%s", state_dir, RESPONSES_STORE_FILE) >=
                    (int) sizeof(path))
                        return airlock_error_set(err, -ENAMETOOLONG,
                                                 "the state directory's path is too long");
                /* SQLite would create it with the umask's mode: the conversations in it are
                 * the users' data, for the daemon's user alone. */
                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0) {
                        rc = -errno;
                        return airlock_error_set(err, rc,
                                                 "cannot open the responses store '%s': %s", path,
                                                 strerror(-rc));
                }
                (void) close(fd);
        } else {
                (void) snprintf(path, sizeof(path), ":memory:");
        }
        st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        pthread_mutex_init(&st->lock, NULL);
        rc = sqlite3_open_v2(path, &st->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                     SQLITE_OPEN_EXRESCODE,
                             NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(st->db, schema, NULL, NULL, &msg);
        if (rc == SQLITE_OK)
                rc = tenant_owner_column_add(st->db, "responses", &msg);
        if (rc != SQLITE_OK) {
                int r = airlock_error_set(err, -EIO, "cannot open the responses store '%s': %s",
                                          path, msg ? msg : sqlite3_errmsg(st->db));
                sqlite3_free(msg);
                responses_store_free(st);
                return r;
        }
        (void) sqlite3_busy_timeout(st->db, 2000);
        (void) responses_store_prune(st, keep_since());
        *ret_store = st;
        return 0;
}

struct responses_store *responses_store_free(struct responses_store *st)
{
        if (!st)
                return NULL;
        (void) sqlite3_close(st->db);
        pthread_mutex_destroy(&st->lock);
        free(st);
        return NULL;
}

static char *dump(json_t *v)
{
        return json_dump_text(v ? v : json_null(), JSON_COMPACT | JSON_ENCODE_ANY, NULL);
}

int responses_store_put(struct responses_store *st, const char *id, long long created_at,
                        json_t *response, json_t *input_items, json_t *state)
{
        _cleanup_free_ char *resp = dump(response), *items = dump(input_items), *cont = dump(state);
        sqlite3_stmt *stmt = NULL;
        bool prune;
        int rc;

        if (!resp || !items || !cont)
                return -ENOMEM;
        if (strlen(resp) + strlen(items) + strlen(cont) > RESPONSES_STORE_ROW_MAX)
                return -E2BIG;
        pthread_mutex_lock(&st->lock);
        rc = sqlite3_prepare_v2(st->db,
                                "INSERT OR REPLACE INTO responses (id, created_at, response, "
                                "input_items, state, owner) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                                -1, &stmt, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(stmt, 2, created_at);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 3, resp, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 4, items, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 5, cont, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 6, tenant_scope_owner(), -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(stmt);
        (void) sqlite3_finalize(stmt);
        prune = ++st->puts >= PRUNE_EVERY;
        if (prune)
                st->puts = 0;
        pthread_mutex_unlock(&st->lock);
        if (prune)
                (void) responses_store_prune(st, keep_since());
        return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Parses column i of a row, or NULL when it is not JSON (never written so by us). */
static json_t *column_json(sqlite3_stmt *stmt, int i)
{
        const char *text = (const char *) sqlite3_column_text(stmt, i);

        return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
}

int responses_store_get(struct responses_store *st, const char *id, json_t **ret_response,
                        json_t **ret_input_items, json_t **ret_state)
{
        json_t *parts[3] = { NULL, NULL, NULL };
        json_t **rets[3] = { ret_response, ret_input_items, ret_state };
        sqlite3_stmt *stmt = NULL;
        int rc, r = 0;

        pthread_mutex_lock(&st->lock);
        rc = sqlite3_prepare_v2(st->db,
                                "SELECT response, input_items, state FROM responses WHERE id = ?1 "
                                "AND (?2 IS NULL OR owner = ?2)",
                                -1, &stmt, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 2, tenant_scope_filter(), -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
                for (int i = 0; i < 3; i++) {
                        if (!rets[i])
                                continue;
                        parts[i] = column_json(stmt, i);
                        if (!parts[i])
                                r = -EIO;
                }
        } else {
                r = rc == SQLITE_DONE ? -ENOENT : -EIO;
        }
        (void) sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        for (int i = 0; i < 3; i++) {
                if (r < 0)
                        json_decref(parts[i]);
                else if (rets[i])
                        *rets[i] = parts[i];
        }
        return r;
}

/* Runs one statement taking an id (and the owner filter as ?2) or a time, returning the rows it
 * changed or -EIO. */
static int change(struct responses_store *st, const char *sql, const char *id, long long t)
{
        sqlite3_stmt *stmt = NULL;
        int rc, n = 0;

        pthread_mutex_lock(&st->lock);
        rc = sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL);
        if (rc == SQLITE_OK)
                rc = id ? sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC)
                        : sqlite3_bind_int64(stmt, 1, t);
        if (rc == SQLITE_OK && id)
                rc = sqlite3_bind_text(stmt, 2, tenant_scope_filter(), -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE)
                n = sqlite3_changes(st->db);
        (void) sqlite3_finalize(stmt);
        pthread_mutex_unlock(&st->lock);
        return rc == SQLITE_DONE ? n : -EIO;
}

int responses_store_delete(struct responses_store *st, const char *id)
{
        int n = change(st, "DELETE FROM responses WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)", id,
                       0);

        if (n < 0)
                return n;
        return n == 0 ? -ENOENT : 0;
}

int responses_store_prune(struct responses_store *st, long long older_than)
{
        return change(st, "DELETE FROM responses WHERE created_at < ?1", NULL, older_than);
}
