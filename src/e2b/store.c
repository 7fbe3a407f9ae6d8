/* The state of E2B compatibility: each sandbox's access token and template, in e2b.db in the
 * daemon's state directory (a stopped session is reached again after a restart with the
 * token its create call returned), and its code contexts, in memory (a context is a language
 * and a directory, nothing a restart needs to keep). One connection under one lock; a token is
 * read on every sandbox route, which costs one indexed SELECT. */
#include "e2b.h"

#include "base/cleanup.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct context_row {
        char session[E2B_SESSION_ID_MAX + 1];
        struct e2b_context c;
};

struct e2b {
        pthread_mutex_t lock;
        sqlite3 *db;
        struct context_row *contexts;
        size_t n_contexts;
};

static const char schema[] = "PRAGMA journal_mode=WAL;"
                             "PRAGMA synchronous=NORMAL;"
                             "CREATE TABLE IF NOT EXISTS sandboxes ("
                             "  session_id TEXT PRIMARY KEY,"
                             "  access_token TEXT NOT NULL,"
                             "  template TEXT NOT NULL"
                             ");";

int e2b_new(const char *state_dir, struct e2b **ret, struct airlock_error *err)
{
        struct e2b *e = calloc(1, sizeof(*e));
        char path[4096];
        char *msg = NULL;
        int rc;

        if (!e)
                return -ENOMEM;
        pthread_mutex_init(&e->lock, NULL);
        if (!state_dir)
                (void) snprintf(path, sizeof(path), ":memory:");
        else if ((size_t) snprintf(path, sizeof(path), "%s/e2b.db", state_dir) >= sizeof(path)) {
                e2b_free(e);
                return airlock_error_set(err, -ENAMETOOLONG,
                                         "the state directory's path is too long");
        }
        rc = sqlite3_open_v2(path, &e->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                     SQLITE_OPEN_EXRESCODE,
                             NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(e->db, schema, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                int r = airlock_error_set(err, -EIO, "cannot open '%s': %s", path,
                                          msg ? msg : sqlite3_errmsg(e->db));
                sqlite3_free(msg);
                e2b_free(e);
                return r;
        }
        (void) sqlite3_busy_timeout(e->db, 2000);
        *ret = e;
        return 0;
}

struct e2b *e2b_free(struct e2b *e)
{
        if (!e)
                return NULL;
        if (e->db)
                (void) sqlite3_close(e->db);
        free(e->contexts);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

/* The row of session_id into token and template (either may be NULL). Called locked.
 * Returns 0, -ENOENT or -EIO. */
static int row_get_locked(struct e2b *e, const char *session_id, char token[E2B_TOKEN_LEN + 1],
                          char template_id[64])
{
        sqlite3_stmt *stmt = NULL;
        int rc, r = -ENOENT;

        rc = sqlite3_prepare_v2(e->db,
                                "SELECT access_token, template FROM sandboxes WHERE session_id = ?",
                                -1, &stmt, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_text(stmt, 1, session_id, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(stmt);
                if (rc == SQLITE_ROW) {
                        if (token)
                                (void) snprintf(token, E2B_TOKEN_LEN + 1, "%s",
                                                (const char *) sqlite3_column_text(stmt, 0));
                        if (template_id)
                                (void) snprintf(template_id, 64, "%s",
                                                (const char *) sqlite3_column_text(stmt, 1));
                        r = 0;
                } else if (rc != SQLITE_DONE) {
                        r = -EIO;
                }
        } else {
                r = -EIO;
        }
        sqlite3_finalize(stmt);
        return r;
}

static int random_hex(char *out, size_t n_bytes)
{
        unsigned char raw[64];
        size_t got = 0;

        if (n_bytes > sizeof(raw))
                return -EINVAL;
        while (got < n_bytes) {
                ssize_t n = getrandom(raw + got, n_bytes - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        for (size_t i = 0; i < n_bytes; i++)
                (void) sprintf(out + 2 * i, "%02x", raw[i]);
        explicit_bzero(raw, sizeof(raw));
        return 0;
}

int e2b_token_issue(struct e2b *e, const char *session_id, const char *template_id,
                    char ret_token[E2B_TOKEN_LEN + 1], char ret_template[64])
{
        char token[E2B_TOKEN_LEN + 1], tmpl[64];
        sqlite3_stmt *stmt = NULL;
        int r, rc;

        pthread_mutex_lock(&e->lock);
        r = row_get_locked(e, session_id, token, tmpl);
        if (r == -ENOENT) {
                (void) snprintf(tmpl, sizeof(tmpl), "%s", template_id ? template_id : "base");
                r = random_hex(token, E2B_TOKEN_LEN / 2);
                if (r >= 0) {
                        rc = sqlite3_prepare_v2(e->db,
                                                "INSERT INTO sandboxes (session_id, access_token, "
                                                "template) VALUES (?, ?, ?)",
                                                -1, &stmt, NULL);
                        if (rc == SQLITE_OK)
                                rc = sqlite3_bind_text(stmt, 1, session_id, -1, SQLITE_STATIC);
                        if (rc == SQLITE_OK)
                                rc = sqlite3_bind_text(stmt, 2, token, -1, SQLITE_STATIC);
                        if (rc == SQLITE_OK)
                                rc = sqlite3_bind_text(stmt, 3, tmpl, -1, SQLITE_STATIC);
                        if (rc == SQLITE_OK)
                                rc = sqlite3_step(stmt);
                        r = rc == SQLITE_DONE ? 0 : -EIO;
                        sqlite3_finalize(stmt);
                }
        }
        pthread_mutex_unlock(&e->lock);
        if (r < 0)
                return r;
        memcpy(ret_token, token, sizeof(token));
        if (ret_template)
                memcpy(ret_template, tmpl, sizeof(tmpl));
        explicit_bzero(token, sizeof(token));
        return 0;
}

int e2b_token_check(struct e2b *e, const char *session_id, const char *token)
{
        char want[E2B_TOKEN_LEN + 1];
        unsigned char diff = 0;
        size_t n;
        int r;

        pthread_mutex_lock(&e->lock);
        r = row_get_locked(e, session_id, want, NULL);
        pthread_mutex_unlock(&e->lock);
        if (r < 0)
                return r == -ENOENT ? -ENOENT : r;
        if (!token)
                return -EACCES;
        /* Constant time in the token's contents: the length is no secret (always 48). */
        n = strlen(token);
        if (n != E2B_TOKEN_LEN) {
                explicit_bzero(want, sizeof(want));
                return -EACCES;
        }
        for (size_t i = 0; i < n; i++)
                diff |= (unsigned char) (want[i] ^ token[i]);
        explicit_bzero(want, sizeof(want));
        return diff == 0 ? 0 : -EACCES;
}

void e2b_template_of(struct e2b *e, const char *session_id, char ret[64])
{
        pthread_mutex_lock(&e->lock);
        if (row_get_locked(e, session_id, NULL, ret) < 0)
                (void) snprintf(ret, 64, "base");
        pthread_mutex_unlock(&e->lock);
}

void e2b_forget(struct e2b *e, const char *session_id)
{
        sqlite3_stmt *stmt = NULL;
        size_t o = 0;

        pthread_mutex_lock(&e->lock);
        if (sqlite3_prepare_v2(e->db, "DELETE FROM sandboxes WHERE session_id = ?", -1, &stmt,
                               NULL) == SQLITE_OK &&
            sqlite3_bind_text(stmt, 1, session_id, -1, SQLITE_STATIC) == SQLITE_OK)
                (void) sqlite3_step(stmt);
        sqlite3_finalize(stmt);
        for (size_t i = 0; i < e->n_contexts; i++)
                if (strcmp(e->contexts[i].session, session_id) != 0)
                        e->contexts[o++] = e->contexts[i];
        e->n_contexts = o;
        pthread_mutex_unlock(&e->lock);
}

int e2b_context_add(struct e2b *e, const char *session_id, const char *language, const char *cwd,
                    struct e2b_context *ret)
{
        struct context_row row = { 0 }, *grown;
        unsigned n = 0;
        char hex[17];
        int r;

        r = random_hex(hex, 8);
        if (r < 0)
                return r;
        (void) snprintf(row.session, sizeof(row.session), "%s", session_id);
        (void) snprintf(row.c.id, sizeof(row.c.id), "%s", hex);
        (void) snprintf(row.c.language, sizeof(row.c.language), "%s", language);
        (void) snprintf(row.c.cwd, sizeof(row.c.cwd), "%s", cwd);

        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->n_contexts; i++)
                n += strcmp(e->contexts[i].session, session_id) == 0;
        if (n >= E2B_CONTEXTS_MAX) {
                pthread_mutex_unlock(&e->lock);
                return -EUSERS;
        }
        grown = realloc(e->contexts, (e->n_contexts + 1) * sizeof(*grown));
        if (!grown) {
                pthread_mutex_unlock(&e->lock);
                return -ENOMEM;
        }
        e->contexts = grown;
        e->contexts[e->n_contexts++] = row;
        pthread_mutex_unlock(&e->lock);
        *ret = row.c;
        return 0;
}

/* The index of the context, or -1. Called locked. */
static ssize_t context_find_locked(struct e2b *e, const char *session_id, const char *id)
{
        for (size_t i = 0; i < e->n_contexts; i++)
                if (strcmp(e->contexts[i].session, session_id) == 0 &&
                    strcmp(e->contexts[i].c.id, id) == 0)
                        return (ssize_t) i;
        return -1;
}

int e2b_context_get(struct e2b *e, const char *session_id, const char *id, struct e2b_context *ret)
{
        ssize_t i;

        pthread_mutex_lock(&e->lock);
        i = context_find_locked(e, session_id, id);
        if (i >= 0)
                *ret = e->contexts[i].c;
        pthread_mutex_unlock(&e->lock);
        return i >= 0 ? 0 : -ENOENT;
}

int e2b_context_remove(struct e2b *e, const char *session_id, const char *id)
{
        ssize_t i;

        pthread_mutex_lock(&e->lock);
        i = context_find_locked(e, session_id, id);
        if (i >= 0)
                e->contexts[i] = e->contexts[--e->n_contexts];
        pthread_mutex_unlock(&e->lock);
        return i >= 0 ? 0 : -ENOENT;
}

json_t *e2b_context_list(struct e2b *e, const char *session_id)
{
        json_t *list = json_array();

        if (!list)
                return NULL;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->n_contexts; i++) {
                const struct e2b_context *c = &e->contexts[i].c;
                if (strcmp(e->contexts[i].session, session_id) != 0)
                        continue;
                (void) json_array_append_new(list,
                                             json_pack("{s:s, s:s, s:s}", "id", c->id, "language",
                                                       c->language, "cwd", c->cwd));
        }
        pthread_mutex_unlock(&e->lock);
        return list;
}
